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
from urllib.parse import urlsplit

from turnkit.errors import ImagePolicyError, UnsupportedContentError
from turnkit.messages import Base64Source, ImageBlock, Message, ToolResultBlock, UrlSource
from turnkit.messages._checks import IMAGE_MEDIA_TYPES

__all__ = ["ImagePolicy", "apply_image_policy"]


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
      loopback or link-local addresses (off: a guard against SSRF).
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
    """Download an image URL into a base64 source, within the policy."""
    import httpx2  # the HTTP client the provider SDKs use

    host = urlsplit(source.url).hostname or ""
    if not policy.allow_private_addresses:
        await _refuse_private(host)
    async with (
        httpx2.AsyncClient(timeout=policy.fetch_timeout_s, follow_redirects=False) as client,
        client.stream("GET", source.url) as response,
    ):
        if response.status_code != 200:
            raise ImagePolicyError(f"fetching {source.url} gave HTTP {response.status_code}")
        media_type = response.headers.get("content-type") or source.media_type or ""
        media_type = media_type.split(";")[0].strip().lower()
        if media_type not in IMAGE_MEDIA_TYPES:
            raise ImagePolicyError(f"{source.url} is not a supported image ({media_type or '?'})")
        data = bytearray()
        async for chunk in response.aiter_bytes():
            data += chunk
            policy.check_size(len(data), f"the image at {source.url}")
    return Base64Source(media_type, base64.b64encode(bytes(data)).decode("ascii"))


async def _refuse_private(host: str) -> None:
    import asyncio  # imported here: loading them costs `import turnkit` ~30 ms
    import ipaddress
    import socket

    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError as err:
        raise ImagePolicyError(f"cannot resolve image host {host!r}: {err}") from None
    for info in infos:
        address = ipaddress.ip_address(info[4][0])
        if not address.is_global:
            raise ImagePolicyError(
                f"image host {host!r} resolves to a non-public address ({address}); "
                "fetching it is refused"
            )
