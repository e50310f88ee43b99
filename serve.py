"""What ``make run`` starts: the app (``app.py``) served by Streamlit, with the bundled model loaded as the server starts.

``streamlit run app.py`` works too; it loads the model when the first visitor arrives instead.
"""

import gzip
import json
import logging
from contextlib import asynccontextmanager

import streamlit as st
from starlette.middleware import Middleware

from ui.warmup import start_warmup


@asynccontextmanager
async def lifespan(_app):
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    start_warmup()
    yield


def base_url_script(base_url_path: str) -> bytes:
    """The inline script that tells Streamlit's frontend where the server is before its bundle runs.

    Without it the frontend, loaded from a page's URL such as ``/tour``, does not know whether ``/tour`` is the app's
    base path and probes ``/tour/_stcore/health`` and ``/tour/_stcore/host-config`` first: two 404s in the console on
    every load of a page other than Home (the server answers 404 there on purpose; streamlit#7074). Given
    ``window.__streamlit.BACKEND_BASE_URL`` it asks the server at that address only.
    """
    base = "/" + base_url_path.strip("/") + "/" if base_url_path.strip("/") else "/"
    return (
        "<script>window.__streamlit = Object.assign("
        f"{{BACKEND_BASE_URL: new URL({json.dumps(base)}, window.location.origin).href}}, window.__streamlit || {{}});"
        "</script>"
    ).encode()


class BaseUrlMiddleware:
    """Adds ``base_url_script`` to the head of every HTML page the server sends (the app's index.html, served for
    every page's URL). Any other response passes through untouched."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope.get("method") != "GET":
            await self.app(scope, receive, send)
            return
        start: dict | None = None
        body = bytearray()

        async def send_html(message):
            nonlocal start
            if message["type"] == "http.response.start":
                headers = {k.lower(): v for k, v in message.get("headers", [])}
                encoding = headers.get(b"content-encoding", b"").lower()
                html = headers.get(b"content-type", b"").startswith(b"text/html")
                if message["status"] == 200 and html and encoding in (b"", b"gzip"):
                    start = message
                    return
                await send(message)
            elif start is None:
                await send(message)
            else:
                body.extend(message.get("body", b""))
                if message.get("more_body", False):
                    return
                await send_page(start, bytes(body))

        async def send_page(message, page: bytes):
            headers = [(k, v) for k, v in message.get("headers", [])]
            encoded = any(k.lower() == b"content-encoding" and v.lower() == b"gzip" for k, v in headers)
            if encoded:
                page = gzip.decompress(page)
            script = base_url_script(st.get_option("server.baseUrlPath"))
            if b"window.__streamlit" not in page and b"<head>" in page:
                page = page.replace(b"<head>", b"<head>" + script, 1)
            headers = [(k, v) for k, v in headers if k.lower() not in (b"content-length", b"content-encoding")]
            headers.append((b"content-length", str(len(page)).encode()))
            await send({**message, "headers": headers})
            await send({"type": "http.response.body", "body": page})

        await self.app(scope, receive, send_html)


app = st.App("app.py", lifespan=lifespan, middleware=[Middleware(BaseUrlMiddleware)])
