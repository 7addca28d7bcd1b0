"""The HTTP helpers providers, channels and the server share."""

from __future__ import annotations

from turnkit._http import header, problem_body, retry_after_seconds


def test_headers_are_found_whatever_their_case_and_shape() -> None:
    assert header({"Retry-After": "3"}, "retry-after") == "3"
    assert header({"retry-after": ["7", "8"]}, "Retry-After") == "7"  # slack_sdk's lists
    assert header({"x": "1"}, "retry-after") is None
    assert header(None, "retry-after") is None


def test_retry_after_reads_milliseconds_first_and_refuses_what_is_no_delay() -> None:
    assert retry_after_seconds({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert retry_after_seconds({"Retry-After": ["2"]}) == 2.0
    for bad in ("soon", "-1", "inf", "nan", "Wed, 21 Oct 2026 07:28:00 GMT"):
        assert retry_after_seconds({"retry-after": bad}) is None, bad
    assert retry_after_seconds(None) is None


def test_problem_bodies_follow_rfc_9457() -> None:
    assert problem_body(404, "no such session") == {
        "type": "about:blank",
        "title": "Not Found",
        "status": 404,
        "detail": "no such session",
    }
    assert problem_body(599, "odd")["title"] == "Error"
