"""What the two OpenAI fakes share: the error envelope, Bearer auth, stock errors.

Texts: the two 401 messages are OpenAI's own (chatboxai/chatbox#98 for the
missing key, popjane/free_chatgpt_api#3 for a wrong one, with
``code: invalid_api_key``); the 500 text is the API's usual server_error text.
"""

from __future__ import annotations

from typing import Any, Final

from ._server import RecordedRequest, Refusal

MISSING_KEY: Final = (
    "You didn't provide an API key. You need to provide your API key in an Authorization "
    "header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY), or as the password field "
    "(with blank username) if you're accessing the API from your browser and are prompted for a "
    "username and password. You can obtain an API key from "
    "https://platform.openai.com/account/api-keys."
)
STOCK_ERRORS: Final = {
    400: ("invalid_request_error", None, "Invalid request"),
    401: ("invalid_request_error", "invalid_api_key", "Incorrect API key provided."),
    403: ("invalid_request_error", "unsupported_country_region_territory", "Forbidden"),
    404: ("invalid_request_error", "model_not_found", "The model does not exist."),
    429: ("requests", "rate_limit_exceeded", "Rate limit reached. Please try again later."),
    500: (
        "server_error",
        None,
        "The server had an error while processing your request. Sorry about that!",
    ),
    503: ("server_error", None, "The engine is currently overloaded, please try again later"),
}


def error_envelope(
    message: str,
    *,
    param: str | None = None,
    code: str | None = None,
    kind: str = "invalid_request_error",
) -> dict[str, Any]:
    """``{"error": {"message", "type", "param", "code"}}``."""
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def invalid(message: str, param: str | None = None, code: str | None = None) -> Refusal:
    """A 400 ``invalid_request_error``."""
    return Refusal(400, error_envelope(message, param=param, code=code))


def stock_error(status: int, message: str) -> dict[str, Any]:
    """The envelope for a scripted HTTP error."""
    kind, code, default = STOCK_ERRORS.get(status, ("server_error", None, "Server error"))
    return error_envelope(message or default, code=code, kind=kind)


def check_bearer(request: RecordedRequest, api_key: str) -> None:
    """Refuse a missing or wrong ``Authorization: Bearer`` key with OpenAI's 401s."""
    header = request.headers.get("authorization", "")
    key = header[7:].strip() if header.lower().startswith("bearer ") else ""
    if not key:
        raise Refusal(401, error_envelope(MISSING_KEY))
    if key != api_key:
        masked = key[:3] + "*" * max(len(key) - 7, 0) + key[-4:] if len(key) > 8 else "*" * len(key)
        message = (
            f"Incorrect API key provided: {masked}. You can find your API key at "
            "https://platform.openai.com/account/api-keys."
        )
        raise Refusal(401, error_envelope(message, code="invalid_api_key"))


def too_long(loc: str, value: str, limit: int) -> Refusal:
    """OpenAI's max-length refusal (``string_above_max_length``)."""
    return invalid(
        f"Invalid '{loc}': string too long. Expected a string with maximum length {limit}, "
        f"but got a string with length {len(value)} instead.",
        param=loc,
        code="string_above_max_length",
    )


def check_image_url(loc: str, url: Any) -> None:
    """An image URL must be http(s) or a base64 data URL of an image type."""
    if isinstance(url, str) and url.startswith(("http://", "https://")):
        return
    prefix = (
        f"Invalid image URL: '{loc}'. Expected a base64-encoded data URL with an image MIME "
        "type (e.g. 'data:image/png;base64,aW1nIGJ5dGVzIGhlcmU='), but got "
    )
    if not isinstance(url, str) or not url.startswith("data:"):
        raise invalid(prefix + "a value without the 'data:' prefix.", loc, "invalid_value")
    header, _, data = url[5:].partition(",")
    mime = header.split(";")[0]
    if not mime.startswith("image/"):
        raise invalid(prefix + f"unsupported MIME type '{mime}'.", loc, "invalid_value")
    if not data:
        raise invalid(prefix + "empty base64-encoded bytes.", loc, "invalid_value")
