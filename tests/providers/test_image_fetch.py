"""Fetching image URLs: one resolution, checked and connected to; one deadline; clean errors.

The resolver is ours (``socket.getaddrinfo`` swapped for a fake that answers
differently on each call), the servers are on loopback addresses.
"""

from __future__ import annotations

import base64
import ipaddress
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from turnkit.errors import ImagePolicyError
from turnkit.messages import Base64Source, UrlSource
from turnkit.providers import ImagePolicy
from turnkit.providers.images import fetch_image, is_public_address

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
ALLOW_LOOPBACK = ImagePolicy(fetch_urls=True, allow_private_addresses=True, fetch_timeout_s=10)


class _Recorder(BaseHTTPRequestHandler):
    """Serves the PNG and records the Host header of every request."""

    hosts: list[str]

    def do_GET(self) -> None:
        self.hosts.append(self.headers.get("Host", ""))
        self.send_response(200)
        self.send_header("content-type", "image/png")
        self.send_header("content-length", str(len(PNG)))
        self.end_headers()
        self.wfile.write(PNG)

    def log_message(self, *args: object) -> None:
        return


def _serve(address: str, port: int = 0) -> tuple[ThreadingHTTPServer, list[str]]:
    hosts: list[str] = []
    handler = type("Handler", (_Recorder,), {"hosts": hosts})
    httpd = ThreadingHTTPServer((address, port), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, hosts


class FakeResolver:
    """Answers for ``name`` from ``answers``, one per call (the last one repeats)."""

    def __init__(self, name: str, *answers: str) -> None:
        self.name = name
        self.answers = list(answers)
        self.calls = 0
        self.real = socket.getaddrinfo

    def __call__(self, host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host not in (self.name, self.name.encode()):
            return self.real(host, port, *args, **kwargs)
        answer = self.answers[min(self.calls, len(self.answers) - 1)]
        self.calls += 1
        family = socket.AF_INET6 if ":" in answer else socket.AF_INET
        sockaddr = (answer, port or 0, 0, 0) if family == socket.AF_INET6 else (answer, port or 0)
        return [(family, socket.SOCK_STREAM, 6, "", sockaddr)]


@pytest.fixture
def resolver(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    def install(name: str, *answers: str) -> FakeResolver:
        fake = FakeResolver(name, *answers)
        monkeypatch.setattr(socket, "getaddrinfo", fake)
        return fake

    yield install


async def test_the_fetch_connects_to_the_address_that_was_checked(resolver: Any) -> None:
    checked, checked_hosts = _serve("127.0.0.2")
    port = checked.server_address[1]
    rebound, rebound_hosts = _serve("127.0.0.1", port)  # where a second lookup would go
    try:
        fake = resolver("images.test", "127.0.0.2", "127.0.0.1")
        source = await fetch_image(UrlSource(f"http://images.test:{port}/a.png"), ALLOW_LOOPBACK)
    finally:
        checked.shutdown()
        rebound.shutdown()
    assert isinstance(source, Base64Source) and base64.b64decode(source.data) == PNG
    assert fake.calls == 1
    assert checked_hosts == [f"images.test:{port}"]
    assert rebound_hosts == []


async def test_a_private_answer_is_refused_after_one_lookup(resolver: Any) -> None:
    fake = resolver("images.test", "127.0.0.1", "93.184.216.34")
    policy = ImagePolicy(fetch_urls=True, fetch_timeout_s=5)
    with pytest.raises(ImagePolicyError, match=r"non-public address \(127\.0\.0\.1\)"):
        await fetch_image(UrlSource("http://images.test/a.png"), policy)
    assert fake.calls == 1


async def test_https_sends_the_url_host_as_sni_while_connecting_to_the_checked_address(
    resolver: Any,
) -> None:
    listener = socket.create_server(("127.0.0.2", 0))
    port = listener.getsockname()[1]
    hello: list[bytes] = []

    def accept_one() -> None:
        connection, _ = listener.accept()
        with connection:
            hello.append(connection.recv(4096))

    thread = threading.Thread(target=accept_one, daemon=True)
    thread.start()
    resolver("images.test", "127.0.0.2")
    try:
        with pytest.raises(ImagePolicyError, match="failed"):
            await fetch_image(UrlSource(f"https://images.test:{port}/a.png"), ALLOW_LOOPBACK)
    finally:
        listener.close()
        thread.join(5)
    assert hello and b"images.test" in hello[0]  # the TLS ClientHello's server_name


@pytest.mark.parametrize(
    "address",
    [
        "64:ff9b::7f00:1",  # NAT64 of 127.0.0.1
        "64:ff9b::a00:1",  # NAT64 of 10.0.0.1
        "2002:7f00:1::1",  # 6to4 of 127.0.0.1
        "2002:c0a8:101::1",  # 6to4 of 192.168.1.1
        "::127.0.0.1",  # IPv4-compatible
        "::a9fe:a9fe",  # IPv4-compatible 169.254.169.254 (cloud metadata)
        "::ffff:127.0.0.1",  # IPv4-mapped
        "fd00::1",
        "fe80::1",
        "::1",
        "224.0.0.1",
        "0.0.0.0",
        "100.64.0.1",
        "169.254.169.254",
    ],
)
def test_addresses_that_are_or_embed_private_ones_are_not_public(address: str) -> None:
    assert not is_public_address(ipaddress.ip_address(address))


@pytest.mark.parametrize("address", ["93.184.216.34", "2606:4700::1", "64:ff9b::5db8:d822"])
def test_public_addresses_are_public(address: str) -> None:
    assert is_public_address(ipaddress.ip_address(address))


async def test_a_nat64_answer_for_loopback_is_refused(resolver: Any) -> None:
    resolver("images.test", "64:ff9b::7f00:1")
    policy = ImagePolicy(fetch_urls=True, fetch_timeout_s=5)
    with pytest.raises(ImagePolicyError, match="non-public address"):
        await fetch_image(UrlSource("http://images.test/a.png"), policy)


class _Trickle(BaseHTTPRequestHandler):
    """Sends the headers, then one byte at a time until the client leaves."""

    stop: threading.Event

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("content-type", "image/png")
        self.end_headers()
        try:
            while not self.stop.wait(0.05):  # the server's pace, not a test wait
                self.wfile.write(b"x")
                self.wfile.flush()
        except OSError:
            return

    def log_message(self, *args: object) -> None:
        return


async def test_one_deadline_bounds_the_whole_fetch_even_while_bytes_keep_coming() -> None:
    stop = threading.Event()
    handler = type("Handler", (_Trickle,), {"stop": stop})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    policy = ImagePolicy(fetch_urls=True, allow_private_addresses=True, fetch_timeout_s=0.5)
    url = f"http://127.0.0.1:{httpd.server_address[1]}/slow.png"
    try:
        with pytest.raises(ImagePolicyError, match=r"took longer than 0\.5s"):
            await fetch_image(UrlSource(url), policy)
    finally:
        stop.set()
        httpd.shutdown()


async def test_a_refused_connection_is_an_image_policy_error() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(ImagePolicyError, match="failed: ConnectError"):
        await fetch_image(UrlSource(f"http://127.0.0.1:{port}/a.png"), ALLOW_LOOPBACK)


async def test_a_name_that_does_not_resolve_is_an_image_policy_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def fail(*args: Any, **kwargs: Any) -> Any:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", fail)
    with pytest.raises(ImagePolicyError, match="cannot resolve image host"):
        await fetch_image(UrlSource("http://nowhere.test/a.png"), ALLOW_LOOPBACK)
