"""ImagePolicy: which images reach a provider, and fetching URLs safely."""

from __future__ import annotations

import base64
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from turnkit import ImageBlock, Message, ToolResultBlock
from turnkit.errors import ImagePolicyError, UnsupportedContentError
from turnkit.messages import Base64Source, TextBlock
from turnkit.providers import ImagePolicy, apply_image_policy

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


class _Images(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/cat.png":
            self._send(200, "image/png", PNG)
        elif self.path == "/page.html":
            self._send(200, "text/html", b"<html></html>")
        elif self.path == "/big.png":
            self._send(200, "image/png", PNG * 100)
        else:
            self._send(404, "text/plain", b"missing")

    def _send(self, status: int, kind: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        return


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Images)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def user_with(url: str) -> tuple[Message, ...]:
    return (Message.user("look", ImageBlock({"type": "url", "url": url})),)


async def apply(messages: tuple[Message, ...], policy: ImagePolicy, takes_urls: bool = False):
    return await apply_image_policy(messages, policy, provider="test", takes_urls=takes_urls)


async def test_url_images_pass_to_providers_that_take_urls(server: str) -> None:
    messages = user_with(f"{server}/cat.png")
    assert await apply(messages, ImagePolicy(), takes_urls=True) == messages


async def test_without_fetching_a_url_image_is_a_clear_error(server: str) -> None:
    with pytest.raises(UnsupportedContentError, match="cannot take image URLs"):
        await apply(user_with(f"{server}/cat.png"), ImagePolicy())


async def test_fetching_refuses_loopback_and_private_addresses(server: str) -> None:
    with pytest.raises(ImagePolicyError, match="non-public address"):
        await apply(user_with(f"{server}/cat.png"), ImagePolicy(fetch_urls=True))


async def test_fetching_inlines_the_image_when_allowed(server: str) -> None:
    policy = ImagePolicy(fetch_urls=True, allow_private_addresses=True)
    (message,) = await apply(user_with(f"{server}/cat.png"), policy)
    source = message.content[1].source
    assert isinstance(source, Base64Source) and source.media_type == "image/png"
    assert base64.b64decode(source.data) == PNG


@pytest.mark.parametrize(
    ("path", "error"),
    [
        ("/page.html", "not a supported image"),
        ("/gone.png", "HTTP 404"),
        ("/big.png", "over the limit"),
    ],
)
async def test_fetched_content_is_checked(server: str, path: str, error: str) -> None:
    policy = ImagePolicy(fetch_urls=True, allow_private_addresses=True, max_bytes=len(PNG) * 10)
    with pytest.raises(ImagePolicyError, match=error):
        await apply(user_with(f"{server}{path}"), policy)


async def test_schemes_and_host_allowlist() -> None:
    only_https = ImagePolicy(schemes=frozenset({"https"}))
    with pytest.raises(ImagePolicyError, match="scheme 'http' is not allowed"):
        await apply(user_with("http://example.com/a.png"), only_https, takes_urls=True)
    allowlist = ImagePolicy(allowed_hosts=frozenset({"example.com"}))
    assert await apply(user_with("https://cdn.example.com/a.png"), allowlist, takes_urls=True)
    with pytest.raises(ImagePolicyError, match="not in the allowlist"):
        await apply(user_with("https://evil.test/a.png"), allowlist, takes_urls=True)


async def test_inline_size_limit_applies_inside_tool_results() -> None:
    image = ImageBlock(Base64Source("image/png", base64.b64encode(PNG * 50).decode()))
    messages = (Message.user(ToolResultBlock("t1", [TextBlock("chart"), image])),)
    with pytest.raises(ImagePolicyError, match="an inline image is"):
        await apply(messages, ImagePolicy(max_bytes=1000), takes_urls=True)
    assert await apply(messages, ImagePolicy(), takes_urls=True) == messages
