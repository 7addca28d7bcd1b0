"""validate_messages refuses bad input with an InvalidMessageError naming where."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from turnkit import InvalidMessageError, Message, TextBlock, TurnkitError, validate_messages

from ._assertions import assert_invalid

PNG = {"type": "base64", "media_type": "image/png", "data": "aGk="}


def user(*content: Any, **fields: Any) -> dict[str, Any]:
    return {"role": "user", "content": list(content), **fields}


def assistant(*content: Any, **fields: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": list(content), **fields}


def text(value: Any = "hi", **fields: Any) -> dict[str, Any]:
    return {"type": "text", "text": value, **fields}


def tool_use(call_id: str = "call_1", **fields: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": "search", "input": {}, **fields}


def tool_result(content: Any = "ok", **fields: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": "call_1", "content": content, **fields}


def image(**source: Any) -> dict[str, Any]:
    return {"type": "image", "source": {**PNG, **source}}


def image_url(url: str, **source: Any) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "url", "url": url, **source}}


# -- the error itself -----------------------------------------------------------


def test_invalid_message_error_is_a_value_error_with_code_path_and_problem() -> None:
    err = InvalidMessageError("messages[1].role", "unknown role 'bot'")
    assert isinstance(err, ValueError)
    assert isinstance(err, TurnkitError)
    assert err.code == "INVALID_MESSAGE"
    assert (err.path, err.problem) == ("messages[1].role", "unknown role 'bot'")
    assert str(err) == "messages[1].role: unknown role 'bot'"


def test_invalid_message_error_survives_pickling() -> None:
    err = InvalidMessageError("messages[0].content", "bad")
    copy = pickle.loads(pickle.dumps(err))
    assert (type(copy), copy.path, copy.problem, str(copy)) == (
        InvalidMessageError,
        err.path,
        err.problem,
        str(err),
    )


def test_error_within_a_prefix_joins_paths() -> None:
    assert InvalidMessageError("text", "x").within("content[0]").path == "content[0].text"
    assert InvalidMessageError("[2]", "x").within("input.tags").path == "input.tags[2]"
    assert InvalidMessageError("", "x").within("messages[0]").path == "messages[0]"
    assert InvalidMessageError("text", "x").within("").path == "text"


# -- the list and the messages --------------------------------------------------


@pytest.mark.parametrize("value", ["hello", None, 3, {"role": "user", "content": []}])
def test_input_that_is_not_a_list_or_tuple_is_refused(value: object) -> None:
    assert_invalid(lambda: validate_messages(value), "messages", "expected a list of messages")


def test_a_list_and_a_tuple_are_both_accepted() -> None:
    wire = [user(text())]
    assert validate_messages(wire) == validate_messages(tuple(wire))


@pytest.mark.parametrize(
    ("item", "got"), [(None, "null"), (3, "an integer"), ([], "a list"), ("hi", "a string")]
)
def test_message_that_is_not_a_mapping_is_refused(item: object, got: str) -> None:
    assert_invalid(
        lambda: validate_messages([user(text()), item]),
        "messages[1]",
        f"expected a message object, got {got}",
    )


def test_a_block_object_in_place_of_a_message_is_refused() -> None:
    assert_invalid(lambda: validate_messages([TextBlock("hi")]), "messages[0]", "TextBlock")


def test_missing_role_is_refused() -> None:
    assert_invalid(
        lambda: validate_messages([{"content": []}]), "messages[0].role", "required field"
    )


@pytest.mark.parametrize("role", ["bot", "tool", "User", ""])
def test_unknown_role_is_refused(role: str) -> None:
    assert_invalid(
        lambda: validate_messages([{"role": role, "content": []}]),
        "messages[0].role",
        f"unknown role {role!r}",
    )


def test_role_that_is_not_a_string_is_refused() -> None:
    assert_invalid(
        lambda: validate_messages([{"role": 1, "content": []}]), "messages[0].role", "string"
    )


def test_bare_string_content_is_refused_with_its_path() -> None:
    assert_invalid(
        lambda: validate_messages([{"role": "user", "content": "hello"}]),
        "messages[0].content",
        "use a text block",
    )


@pytest.mark.parametrize("content", [None, 5, {"type": "text", "text": "hi"}])
def test_content_that_is_not_a_list_is_refused(content: object) -> None:
    assert_invalid(
        lambda: validate_messages([{"role": "user", "content": content}]),
        "messages[0].content",
        "expected a list",
    )


def test_missing_content_is_refused() -> None:
    assert_invalid(
        lambda: validate_messages([{"role": "user"}]), "messages[0].content", "required field"
    )


def test_bare_string_block_is_refused_with_its_path() -> None:
    assert_invalid(
        lambda: validate_messages([user(text(), "hello")]),
        "messages[0].content[1]",
        "use a text block",
    )


@pytest.mark.parametrize("block", [None, 3, []])
def test_block_that_is_not_an_object_is_refused(block: object) -> None:
    assert_invalid(lambda: validate_messages([user(block)]), "messages[0].content[0]")


def test_unknown_message_type_is_refused() -> None:
    assert_invalid(
        lambda: validate_messages([user(type="note")]),
        "messages[0].type",
        "unknown message type 'note'",
    )


@pytest.mark.parametrize(
    ("fields", "path"),
    [
        ({"id": 5}, "messages[0].id"),
        ({"invocation_id": 5}, "messages[0].invocation_id"),
        ({"metadata": [1, 2]}, "messages[0].metadata"),
        ({"metadata": "x"}, "messages[0].metadata"),
        ({"origin": "openai"}, "messages[0].origin"),
        ({"origin": {"provider": "openai"}}, "messages[0].origin.model"),
        ({"origin": {"provider": "", "model": "m"}}, "messages[0].origin.provider"),
        ({"origin": {"provider": "p", "model": "m", "region": "eu"}}, "messages[0].origin.region"),
    ],
)
def test_ill_typed_message_field_is_refused(fields: dict[str, Any], path: str) -> None:
    assert_invalid(lambda: validate_messages([assistant(**fields)]), path)


def test_ill_typed_field_names_the_types_in_words() -> None:
    err = assert_invalid(lambda: validate_messages([user(id=5)]), "messages[0].id")
    assert err.problem == "expected a string or null, got an integer"


def test_unknown_message_field_is_refused() -> None:
    assert_invalid(
        lambda: validate_messages([user(name="bob")]), "messages[0].name", "unknown field"
    )


def test_non_string_key_in_a_message_is_refused() -> None:
    assert_invalid(
        lambda: validate_messages([{"role": "user", "content": [], 1: 2}]),
        "messages[0]",
        "keys must be strings",
    )


# -- blocks ------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["audio", "Text", "", "base64"])
def test_unknown_block_type_is_refused(kind: str) -> None:
    assert_invalid(
        lambda: validate_messages([user({"type": kind})]),
        "messages[0].content[0].type",
        f"unknown block type {kind!r}",
    )


def test_block_without_type_is_refused() -> None:
    assert_invalid(
        lambda: validate_messages([user({"text": "hi"})]),
        "messages[0].content[0].type",
        "required field",
    )


@pytest.mark.parametrize(
    ("block", "field"),
    [
        ({"type": "text"}, "text"),
        ({"type": "image"}, "source"),
        ({"type": "file", "source": PNG}, "filename"),
        ({"type": "tool_result", "content": "ok"}, "tool_use_id"),
        ({"type": "tool_result", "tool_use_id": "call_1"}, "content"),
        ({"type": "image", "source": {"type": "base64", "data": "aGk="}}, "source.media_type"),
        ({"type": "image", "source": {"type": "base64", "media_type": "image/png"}}, "source.data"),
        ({"type": "image", "source": {"type": "url"}}, "source.url"),
        ({"type": "image", "source": {"url": "https://a.example/x.png"}}, "source.type"),
    ],
)
def test_missing_block_field_is_refused(block: dict[str, Any], field: str) -> None:
    assert_invalid(
        lambda: validate_messages([user(block)]), f"messages[0].content[0].{field}", "required"
    )


@pytest.mark.parametrize(
    ("block", "field"),
    [
        ({"type": "thinking"}, "thinking"),
        ({"type": "tool_use", "name": "f", "input": {}}, "id"),
        ({"type": "tool_use", "id": "c", "input": {}}, "name"),
        ({"type": "tool_use", "id": "c", "name": "f"}, "input"),
    ],
)
def test_missing_assistant_block_field_is_refused(block: dict[str, Any], field: str) -> None:
    assert_invalid(
        lambda: validate_messages([assistant(block)]),
        f"messages[0].content[0].{field}",
        "required",
    )


@pytest.mark.parametrize(
    ("block", "field"),
    [
        (text(5), "text"),
        (text(None), "text"),
        (text(cache="5m"), "cache"),
        (text(cache={"ttl": "10m"}), "cache.ttl"),
        (text(cache={"ttl": 5}), "cache.ttl"),
        (text(cache={"size": 1}), "cache.size"),
        ({"type": "image", "source": "https://a.example/x.png"}, "source"),
        ({"type": "file", "source": PNG, "filename": ""}, "filename"),
        ({"type": "file", "source": PNG, "filename": 3}, "filename"),
        (tool_result(5), "content"),
        (tool_result(is_error="yes"), "is_error"),
        (tool_result(is_error=1), "is_error"),
        (tool_result(tool_use_id=""), "tool_use_id"),
        (tool_result(tool_use_id=7), "tool_use_id"),
        (tool_result([text(), "more"]), "content[1]"),
        (tool_result([text(5)]), "content[0].text"),
    ],
)
def test_ill_typed_user_block_field_is_refused(block: dict[str, Any], field: str) -> None:
    assert_invalid(lambda: validate_messages([user(block)]), f"messages[0].content[0].{field}")


@pytest.mark.parametrize(
    ("block", "field"),
    [
        ({"type": "thinking", "thinking": 1}, "thinking"),
        ({"type": "thinking", "thinking": "x", "signature": 1}, "signature"),
        ({"type": "thinking", "thinking": "x", "redacted": "no"}, "redacted"),
        ({"type": "thinking", "thinking": "x", "redacted": 0}, "redacted"),
        (tool_use(""), "id"),
        (tool_use(5), "id"),
        (tool_use(name=""), "name"),
        (tool_use(input=[1]), "input"),
        (tool_use(input="{}"), "input"),
        (tool_use(input=None), "input"),
    ],
)
def test_ill_typed_assistant_block_field_is_refused(block: dict[str, Any], field: str) -> None:
    assert_invalid(lambda: validate_messages([assistant(block)]), f"messages[0].content[0].{field}")


@pytest.mark.parametrize(
    ("block", "field"),
    [
        (text(style="bold"), "style"),
        (image(width=10), "source.width"),
        ({"type": "image", "source": PNG, "alt": "x"}, "alt"),
        (image_url("https://a.example/x.png", size=1), "source.size"),
        (tool_result(name="f"), "name"),
    ],
)
def test_unknown_block_field_is_refused(block: dict[str, Any], field: str) -> None:
    assert_invalid(
        lambda: validate_messages([user(block)]), f"messages[0].content[0].{field}", "unknown"
    )


# -- placement ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("role", "block", "problem"),
    [
        ("user", tool_use(), "a tool_use block is not allowed in a user message"),
        ("user", {"type": "thinking", "thinking": "x"}, "a thinking block"),
        ("assistant", tool_result(), "a tool_result block is not allowed in an assistant message"),
        ("system", image(), "an image block is not allowed in a system message"),
        ("system", {"type": "file", "source": PNG, "filename": "a.png"}, "a file block"),
        ("system", tool_result(), "a tool_result block"),
        ("system", tool_use(), "a tool_use block"),
        ("system", {"type": "thinking", "thinking": "x"}, "a thinking block"),
    ],
)
def test_block_in_the_wrong_role_is_refused(role: str, block: Any, problem: str) -> None:
    wire = [{"role": role, "content": [text(), block]}]
    assert_invalid(lambda: validate_messages(wire), "messages[0].content[1]", problem)


@pytest.mark.parametrize(
    "block",
    [{"type": "thinking", "thinking": "x"}, tool_use(), tool_result()],
)
def test_tool_result_holds_text_image_or_file_only(block: dict[str, Any]) -> None:
    assert_invalid(
        lambda: validate_messages([user(tool_result([block]))]),
        "messages[0].content[0].content[0].type",
        "not allowed in a tool_result",
    )


def test_is_error_with_non_string_content_is_refused() -> None:
    assert_invalid(
        lambda: validate_messages([user(tool_result([text()], is_error=True))]),
        "messages[0].content[0].content",
        "must be a string when is_error is true",
    )


def test_is_error_with_string_content_and_parts_without_error_are_accepted() -> None:
    (message,) = validate_messages([user(tool_result("boom", is_error=True), tool_result([]))])
    assert message.content[0].is_error is True
    assert message.content[1].content == ()


# -- base64, media types, URLs ----------------------------------------------------


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ("", "must not be empty"),
        ("aGk", "not canonical base64"),  # bad length
        ("aG!=", "not canonical base64"),  # bad character
        ("aGk-", "not canonical base64"),  # url-safe alphabet
        ("aGk=\n", "not canonical base64"),
        (" aGk=", "not canonical base64"),
        ("YQ===", "not canonical base64"),
        ("a===", "not canonical base64"),  # too much padding
        ("====", "not canonical base64"),
        ("YQ==YQ==", "not canonical base64"),  # padding in the middle
        ("YR==", "non-zero padding bits"),
        ("aGl=", "non-zero padding bits"),
        ("aGé=", "not canonical base64"),  # non-ASCII
        ("٣٣٣٣", "not canonical base64"),
    ],
)
def test_base64_that_is_not_canonical_is_refused(data: str, problem: str) -> None:
    assert_invalid(
        lambda: validate_messages([user(text(), image(data=data))]),
        "messages[0].content[1].source.data",
        problem,
    )


def test_base64_data_that_is_not_a_string_is_refused() -> None:
    assert_invalid(
        lambda: validate_messages([user(image(data=b"aGk="))]),
        "messages[0].content[0].source.data",
    )


@pytest.mark.parametrize("data", ["aGk=", "aGVsbG8=", "YQ==", "AAAA", "+/+/"])
def test_canonical_base64_is_accepted(data: str) -> None:
    (message,) = validate_messages([user(image(data=data))])
    assert message.content[0].source.data == data


@pytest.mark.parametrize(
    "media_type", ["png", "image", "image/", "/png", "image/png ", "image/png; q=1", ""]
)
def test_media_type_that_is_not_type_subtype_is_refused(media_type: str) -> None:
    block = {"type": "file", "filename": "a", "source": {**PNG, "media_type": media_type}}
    assert_invalid(
        lambda: validate_messages([user(block)]),
        "messages[0].content[0].source.media_type",
        "is not a type/subtype media type",
    )


@pytest.mark.parametrize(
    "media_type", ["image/svg+xml", "image/bmp", "image/tiff", "application/pdf", "text/plain"]
)
def test_image_media_type_outside_png_jpeg_gif_webp_is_refused(media_type: str) -> None:
    assert_invalid(
        lambda: validate_messages([user(image(media_type=media_type))]),
        "messages[0].content[0].source.media_type",
        "unsupported image type",
    )


def test_image_url_with_a_non_image_media_type_is_refused() -> None:
    assert_invalid(
        lambda: validate_messages([user(image_url("https://a.example/x", media_type="text/html"))]),
        "messages[0].content[0].source.media_type",
        "unsupported image type",
    )


@pytest.mark.parametrize("media_type", ["image/png", "image/jpeg", "image/gif", "image/webp"])
def test_the_four_image_types_are_accepted(media_type: str) -> None:
    (message,) = validate_messages([user(image(media_type=media_type))])
    assert message.content[0].source.media_type == media_type


@pytest.mark.parametrize("media_type", ["application/pdf", "text/csv", "application/vnd.ms-excel"])
def test_files_take_any_type_subtype(media_type: str) -> None:
    block = {"type": "file", "filename": "f", "source": {**PNG, "media_type": media_type}}
    (message,) = validate_messages([user(block)])
    assert message.content[0].source.media_type == media_type


@pytest.mark.parametrize(
    "url",
    [
        "ftp://a.example/x.png",
        "file:///etc/passwd",
        "javascript:alert(1)",
        "data:image/png;base64,aGk=",
        "/relative/x.png",
        "a.example/x.png",
        "https://",
        "https:///path",
        "https://a.example/x y.png",
        "https://a.example/\nx.png",
        "https://[::1/x.png",
        "",
    ],
)
def test_url_that_is_not_absolute_http_is_refused(url: str) -> None:
    assert_invalid(
        lambda: validate_messages([user(image_url(url))]),
        "messages[0].content[0].source.url",
        "is not an absolute http(s) URL",
    )


@pytest.mark.parametrize(
    "url", ["https://a.example/x.png", "http://127.0.0.1:8080/x?y=1#z", "https://[::1]/x"]
)
def test_absolute_http_urls_are_accepted(url: str) -> None:
    (message,) = validate_messages([user(image_url(url))])
    assert message.content[0].source.url == url


def test_unknown_source_type_is_refused() -> None:
    assert_invalid(
        lambda: validate_messages([user(image(type="file"))]),
        "messages[0].content[0].source.type",
        "unknown source type 'file'",
    )


# -- tool_use ids ------------------------------------------------------------------


def test_duplicate_tool_use_ids_within_one_message_are_refused() -> None:
    assert_invalid(
        lambda: validate_messages([assistant(tool_use("a"), text(), tool_use("a"))]),
        "messages[0].content[2].id",
        "duplicate tool_use id 'a'",
    )


def test_duplicate_tool_use_ids_across_the_list_name_the_first_one() -> None:
    wire = [
        user(text()),
        assistant(tool_use("a")),
        user(tool_result(tool_use_id="a")),
        assistant(text(), tool_use("b"), tool_use("a")),
    ]
    assert_invalid(
        lambda: validate_messages(wire),
        "messages[3].content[2].id",
        "duplicate tool_use id 'a' (first at messages[1].content[0])",
    )


def test_duplicate_tool_use_ids_are_found_among_message_objects_too() -> None:
    call = Message.assistant({"type": "tool_use", "id": "a", "name": "f", "input": {}})
    assert_invalid(
        lambda: validate_messages([call, Message.user("next"), call]),
        "messages[2].content[0].id",
        "first at messages[0].content[0]",
    )


def test_a_custom_root_path_prefixes_every_error() -> None:
    assert_invalid(
        lambda: validate_messages([user(text(5))], path="history"), "history[0].content[0].text"
    )
