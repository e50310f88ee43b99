"""serve.py's middleware: the base URL script in every HTML page, nothing else touched (no server, no browser)."""

from __future__ import annotations

import gzip

from bench.protocol import run_apart
from serve import BaseUrlMiddleware, base_url_script

PAGE = b"<!DOCTYPE html><html><head><title>x</title></head><body></body></html>"


def _call(body: bytes, content_type: bytes, *, encoding: bytes | None = None, method: str = "GET", status: int = 200):
    async def app(scope, receive, send):
        headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
        if encoding:
            headers.append((b"content-encoding", encoding))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        half = len(body) // 2
        await send({"type": "http.response.body", "body": body[:half], "more_body": True})
        await send({"type": "http.response.body", "body": body[half:]})

    sent: list[dict] = []

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": method, "path": "/tour", "headers": []}
    run_apart(BaseUrlMiddleware(app)(scope, None, send))  # its own thread: a browser test's loop may be running here
    headers = dict(sent[0]["headers"])
    return headers, b"".join(m.get("body", b"") for m in sent[1:])


def test_the_script_sets_the_backend_base_url_before_anything_else():
    assert b'new URL("/", window.location.origin)' in base_url_script("")
    assert b'new URL("/lab/", window.location.origin)' in base_url_script("/lab/")


def test_html_gets_the_script_at_the_start_of_its_head():
    headers, body = _call(PAGE, b"text/html; charset=utf-8")
    assert body.startswith(b"<!DOCTYPE html><html><head><script>window.__streamlit")
    assert body.endswith(PAGE[len(b"<!DOCTYPE html><html><head>"):])
    assert int(headers[b"content-length"]) == len(body)


def test_gzipped_html_is_sent_plain_with_the_script():
    headers, body = _call(gzip.compress(PAGE), b"text/html", encoding=b"gzip")
    assert b"content-encoding" not in headers
    assert b"window.__streamlit" in body and int(headers[b"content-length"]) == len(body)


def test_other_responses_pass_through():
    assert _call(b'{"a": 1}', b"application/json")[1] == b'{"a": 1}'
    assert _call(PAGE, b"text/html", method="POST")[1] == PAGE
    assert _call(PAGE, b"text/html", status=404)[1] == PAGE
