"""Turning command-line arguments into content blocks."""

from __future__ import annotations

import base64
from pathlib import Path

from turnkit.errors import InvalidMessageError
from turnkit.messages import Base64Source, Block, ImageBlock, Message, TextBlock, UrlSource

__all__ = ["UsageError", "image_block", "prompt_blocks"]

_SIGNATURES = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


MAX_IMAGE_BYTES = 20 * 1024 * 1024
"""The largest image file ``--image`` reads (the default ImagePolicy limit)."""


class UsageError(Exception):
    """Bad usage or input: reported as one line, exit code 2."""


def prompt_blocks(prompt: str, images: list[str]) -> tuple[Block, ...]:
    """The user turn: the prompt text, then each image in order."""
    if not prompt.strip():
        raise UsageError("the prompt is empty")
    return (TextBlock(prompt), *(image_block(image) for image in images))


def image_block(value: str) -> ImageBlock:
    """An image from a file path, an http(s) URL or a data: URL."""
    try:
        if value.startswith("data:"):
            return Message.user().append_image_url_block(value).content[0]  # type: ignore[return-value]
        if "://" in value:
            return ImageBlock(UrlSource(value))
    except InvalidMessageError as err:
        raise UsageError(f"--image {value}: {err.problem}") from None
    data = _read_image_file(value)
    media_type = _sniff(data)
    if media_type is None:
        raise UsageError(f"--image {value}: not a PNG, JPEG, GIF or WebP image")
    return ImageBlock(Base64Source(media_type, base64.b64encode(data).decode("ascii")))


def _read_image_file(value: str) -> bytes:
    """The bytes of a regular file of at most MAX_IMAGE_BYTES, or UsageError."""
    import os
    import stat

    try:
        path = Path(value).expanduser()
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            raise UsageError(f"--image {value}: not a regular file")
        if info.st_size > MAX_IMAGE_BYTES:
            raise UsageError(f"--image {value}: larger than {MAX_IMAGE_BYTES} bytes")
        with path.open("rb") as file:
            if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):  # replaced since stat()
                raise UsageError(f"--image {value}: not a regular file")
            data = file.read(MAX_IMAGE_BYTES + 1)
    except FileNotFoundError:
        raise UsageError(f"--image {value}: no such file") from None
    except OSError as err:
        raise UsageError(f"--image {value}: {err.strerror or err}") from None
    except (RuntimeError, ValueError) as err:  # ~nouser, a NUL in the path
        raise UsageError(f"--image {value}: {err}") from None
    if len(data) > MAX_IMAGE_BYTES:
        raise UsageError(f"--image {value}: larger than {MAX_IMAGE_BYTES} bytes")
    return data


def _sniff(data: bytes) -> str | None:
    for magic, media_type in _SIGNATURES:
        if data.startswith(magic):
            return media_type
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None
