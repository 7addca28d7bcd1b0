"""ImagePolicy: which images may reach a provider, and fetching URLs safely.

The policy is applied to every request before conversion. A URL image goes
to providers that take URLs as it is; for one that does not, it is fetched
and inlined only when the policy allows fetching, and never from a private,
loopback or link-local address unless the policy says so.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

from turnkit.errors import ImagePolicyError, UnsupportedContentError
from turnkit.messages import Base64Source, ImageBlock, Message, ToolResultBlock, UrlSource
from turnkit.messages.checks import IMAGE_MEDIA_TYPES

if TYPE_CHECKING:
    from ipaddress import IPv4Address, IPv6Address

__all__ = ["ImagePolicy", "apply_image_policy", "is_public_address"]


@dataclass(frozen=True, slots=True)
class ImagePolicy:
    """Rules for images on their way to a provider.

    - ``schemes``: URL schemes allowed ("https", "http").
    - ``allowed_hosts``: when set, URL hosts must be one of these or a
      subdomain of one.
    - ``max_bytes``: largest image, decoded, inline or fetched.
    - ``fetch_urls``: whether turnkit may download a URL image to inline it
      for a provider that cannot take URLs.
    - ``allow_private_addresses``: whether fetching may reach private,
      loopback or link-local addresses, or IPv6 forms that embed one (off: a
      guard against SSRF). The host is resolved once and the fetch connects
      to the address that was checked.
    - ``fetch_timeout_s``: the most one whole fetch may take (resolving,
      connecting, headers and body together).
    """

    schemes: frozenset[str] = frozenset({"https", "http"})
    allowed_hosts: frozenset[str] | None = None
    max_bytes: int = 20 * 1024 * 1024
    fetch_urls: bool = False
    allow_private_addresses: bool = False
    fetch_timeout_s: float = 15.0

    def check_url(self, url: str) -> None:
        """Raise ImagePolicyError when ``url`` may not be used at all."""
        parts = urlsplit(url)
        if parts.scheme not in self.schemes:
            raise ImagePolicyError(f"image URL scheme {parts.scheme!r} is not allowed: {url}")
        host = (parts.hostname or "").lower()
        if self.allowed_hosts is not None and not any(
            host == allowed or host.endswith("." + allowed) for allowed in self.allowed_hosts
        ):
            raise ImagePolicyError(f"image host {host!r} is not in the allowlist: {url}")

    def check_size(self, size: int, where: str) -> None:
        if size > self.max_bytes:
            raise ImagePolicyError(f"{where} is {size} bytes, over the limit of {self.max_bytes}")


async def apply_image_policy(
    messages: Sequence[Message], policy: ImagePolicy | None, *, provider: str, takes_urls: bool
) -> tuple[Message, ...]:
    """Check every image against ``policy``; inline URLs the provider cannot take."""
    policy = policy or ImagePolicy()
    out = []
    for message in messages:
        if not any(map(_may_hold_images, message.content)):
            out.append(message)
            continue
        content = tuple(
            [await _image_part(b, policy, provider, takes_urls) for b in message.content]
        )
        same = all(a is b for a, b in zip(content, message.content, strict=True))
        out.append(message if same else message.clone(content=content))
    return tuple(out)


def _may_hold_images(block: object) -> bool:
    kind = type(block)
    return kind is ImageBlock or (kind is ToolResultBlock and not isinstance(block.content, str))


async def _image_part(block, policy: ImagePolicy, provider: str, takes_urls: bool):  # type: ignore[no-untyped-def]
    if isinstance(block, ToolResultBlock) and not isinstance(block.content, str):
        parts = tuple([await _image_part(p, policy, provider, takes_urls) for p in block.content])
        if all(a is b for a, b in zip(parts, block.content, strict=True)):
            return block
        return ToolResultBlock(block.tool_use_id, parts, block.is_error)
    if not isinstance(block, ImageBlock):
        return block
    source = block.source
    if isinstance(source, Base64Source):
        policy.check_size(len(source.data) * 3 // 4, "an inline image")
        return block
    policy.check_url(source.url)
    if takes_urls:
        return block
    if not policy.fetch_urls:
        raise UnsupportedContentError(
            f"{provider} cannot take image URLs ({source.url}); send the image as base64, "
            "or allow fetching with ImagePolicy(fetch_urls=True)",
            provider=provider,
        )
    return ImageBlock(await fetch_image(source, policy))


async def fetch_image(source: UrlSource, policy: ImagePolicy) -> Base64Source:
    """Download an image URL into a base64 source, within the policy.

    The host is resolved once; unless the policy allows private addresses,
    every address it resolves to must be public (IPv6 forms that embed an
    IPv4 address are judged by that address), and the connection goes to the
    address that was checked, with the URL's host in ``Host`` and TLS SNI, so
    a name that resolves differently the next time cannot redirect the fetch.
    ``fetch_timeout_s`` bounds the whole fetch (resolving, connecting,
    headers and body). Environment proxies are not used. Every failure is an
    :class:`ImagePolicyError`.
    """
    import asyncio

    try:
        async with asyncio.timeout(policy.fetch_timeout_s):
            return await _fetch(source.url, source.media_type, policy)
    except ImagePolicyError:
        raise
    except TimeoutError:
        problem = f"fetching {source.url} took longer than {policy.fetch_timeout_s:g}s"
        raise ImagePolicyError(problem) from None
    except Exception as err:  # the HTTP client's errors, OSError, ExceptionGroup, ...
        raise ImagePolicyError(f"fetching {source.url} failed: {_describe(err)}") from None


async def _fetch(url: str, media_type: str | None, policy: ImagePolicy) -> Base64Source:
    import httpx2  # the HTTP client the provider SDKs use

    parts = urlsplit(url)
    host = parts.hostname or ""
    address = await _resolve(host, policy)
    ascii_host = _ascii_host(host)
    shown_host = f"[{ascii_host}]" if ":" in ascii_host else ascii_host
    pinned_host = f"[{address}]" if ":" in address else address
    port = f":{parts.port}" if parts.port is not None else ""
    pinned = urlunsplit((parts.scheme, pinned_host + port, parts.path, parts.query, ""))
    extensions = {"sni_hostname": ascii_host} if parts.scheme == "https" else {}
    async with (
        httpx2.AsyncClient(follow_redirects=False, trust_env=False, timeout=None) as client,
        client.stream(
            "GET", pinned, headers={"Host": shown_host + port}, extensions=extensions
        ) as response,
    ):
        if response.status_code != 200:
            raise ImagePolicyError(f"fetching {url} gave HTTP {response.status_code}")
        found = response.headers.get("content-type") or media_type or ""
        found = found.split(";")[0].strip().lower()
        if found not in IMAGE_MEDIA_TYPES:
            raise ImagePolicyError(f"{url} is not a supported image ({found or '?'})")
        declared = response.headers.get("content-length", "")
        if declared.isdigit():
            policy.check_size(int(declared), f"the image at {url}")
        data = bytearray()
        async for chunk in response.aiter_bytes():
            data += chunk
            policy.check_size(len(data), f"the image at {url}")
    return Base64Source(found, base64.b64encode(bytes(data)).decode("ascii"))


async def _resolve(host: str, policy: ImagePolicy) -> str:
    """The one address the fetch connects to, checked against the policy."""
    import asyncio  # imported here: loading them costs `import turnkit` ~30 ms
    import ipaddress
    import socket

    try:
        infos = await asyncio.get_running_loop().getaddrinfo(
            _ascii_host(host), None, type=socket.SOCK_STREAM
        )
    except (OSError, UnicodeError) as err:
        raise ImagePolicyError(f"cannot resolve image host {host!r}: {err}") from None
    if not infos:
        raise ImagePolicyError(f"image host {host!r} resolves to no address")
    addresses = [ipaddress.ip_address(str(info[4][0]).partition("%")[0]) for info in infos]
    if not policy.allow_private_addresses:
        for address in addresses:
            if not is_public_address(address):
                raise ImagePolicyError(
                    f"image host {host!r} resolves to a non-public address ({address}); "
                    "fetching it is refused"
                )
    return str(addresses[0])


_NAT64 = 0x0064FF9B << 96
_LOW32 = 0xFFFFFFFF


def is_public_address(address: IPv4Address | IPv6Address) -> bool:
    """Whether ``address`` is a public unicast address.

    IPv6 forms that carry an IPv4 address (IPv4-mapped ``::ffff:0:0/96``,
    IPv4-compatible ``::/96``, NAT64 ``64:ff9b::/96``, 6to4 ``2002::/16``)
    are judged by the IPv4 address they carry; Teredo is never public.
    """
    import ipaddress

    if address.version == 6:
        v6 = ipaddress.IPv6Address(address)
        embedded = _embedded_ipv4(v6)
        if embedded is not None:
            return is_public_address(embedded)
        if v6.teredo is not None:
            return False
    return not (
        not address.is_global
        or address.is_private
        or address.is_loopback
        or address.is_link_local
        or address.is_multicast
        or address.is_reserved
        or address.is_unspecified
    )


def _embedded_ipv4(address: IPv6Address) -> IPv4Address | None:
    import ipaddress

    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    high = int(address) >> 32
    if high == _NAT64 >> 32 or high == 0:  # NAT64, IPv4-compatible
        return ipaddress.IPv4Address(int(address) & _LOW32)
    return None


def _ascii_host(host: str) -> str:
    if host.isascii():
        return host.lower()
    import idna  # the encoder the HTTP client uses

    try:
        return str(idna.encode(host.lower()).decode("ascii"))
    except idna.IDNAError as err:
        raise ImagePolicyError(f"image host {host!r} is not a valid domain name: {err}") from None


def _describe(err: BaseException) -> str:
    try:
        text = str(err)
    except Exception:
        text = ""
    if isinstance(err, BaseExceptionGroup) and err.exceptions:
        return _describe(err.exceptions[0])
    name = type(err).__name__
    return f"{name}: {text}" if text else name
