"""Who may ask the memory browser anything, checked before any page runs.

The server listens on 127.0.0.1, which every local process and every web
page the user opens can reach. So:

- Host must be the server's own `127.0.0.1:PORT`: a page of another site
  whose name was re-pointed at 127.0.0.1 (DNS rebinding) sends its own name.
- The URL the user is given carries a random one-time token (256 bits). The
  first request with it gets a session cookie (HttpOnly: no script reads it;
  SameSite=Strict: no other site's page sends it) and a redirect to the
  same path without the token, so that the token does not stay in the
  address bar or the history. Every other request needs that cookie.
- A request that may change something (anything but GET and HEAD) also
  needs an Origin header naming this server: another site's form, which
  the cookie's SameSite already stops, is refused twice.
- Every answer says: no caching, no framing, no referrer to other sites, scripts and styles
  from this server only (Content-Security-Policy), and no CORS header is
  ever sent, so no other origin may read an answer.
"""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlencode

from starlette.datastructures import Headers, MutableHeaders
from starlette.requests import HTTPConnection
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["COOKIE", "Guard", "Sessions"]

COOKIE = "memvault_session"
TOKEN_PARAM = "token"
SAFE_METHODS = frozenset({"GET", "HEAD"})
SECURITY_HEADERS = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'; connect-src 'self'"),
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    # Not "no-referrer": with it Chromium sends `Origin: null` on the pages'
    # own form posts, which the Origin check must then refuse.
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
    "cross-origin-opener-policy": "same-origin",
    "cross-origin-resource-policy": "same-origin",
}


@dataclass
class Sessions:
    """The one-time token, and the sessions it was exchanged for."""

    token: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    _spent: bool = False
    _sessions: set[str] = field(default_factory=set)

    def exchange(self, token: str) -> str | None:
        """A new session for the token, once; None for any other string or a second use."""
        if self._spent or not hmac.compare_digest(token.encode(), self.token.encode()):
            return None
        self._spent = True
        session = secrets.token_urlsafe(32)
        self._sessions.add(session)
        return session

    def valid(self, session: str | None) -> bool:
        return session is not None and any(
            hmac.compare_digest(session.encode(), known.encode()) for known in self._sessions)


class Guard:
    """ASGI middleware: refuses what the module docstring says, adds the headers."""

    def __init__(self, app: ASGIApp, sessions: Sessions, host: str, port: int) -> None:
        self.app = app
        self.sessions = sessions
        self.authority = f"{host}:{port}"
        self.origin = f"http://{self.authority}"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self._check(scope)
        if refusal is not None:
            await _secured(refusal)(scope, receive, send)
            return

        async def send_secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers[name] = value
            await send(message)

        await self.app(scope, receive, send_secured)

    def _check(self, scope: Scope) -> Response | None:
        headers = Headers(scope=scope)
        if headers.get("host") != self.authority:
            return PlainTextResponse("refused: this server answers only to "
                                     f"{self.authority}", status_code=421)
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        if TOKEN_PARAM in query and scope["method"] == "GET":
            return self._exchange(scope, query)
        if not self.sessions.valid(HTTPConnection(scope).cookies.get(COOKIE)):
            return PlainTextResponse(
                "refused: no session. Open the URL `memvault ui` printed (it works once); "
                "restart `memvault ui` for a new one", status_code=403)
        if scope["method"] not in SAFE_METHODS and headers.get("origin") != self.origin:
            return PlainTextResponse("refused: a change must come from this server's own pages",
                                     status_code=403)
        return None

    def _exchange(self, scope: Scope, query: dict[str, str]) -> Response:
        session = self.sessions.exchange(query.pop(TOKEN_PARAM))
        if session is None:
            return PlainTextResponse("refused: that link was used already or is not this "
                                     "server's; restart `memvault ui` for a new one",
                                     status_code=403)
        rest = urlencode(query)
        response = RedirectResponse(scope["path"] + (f"?{rest}" if rest else ""),
                                    status_code=303)
        response.set_cookie(COOKIE, session, httponly=True, samesite="strict", path="/")
        return response


def _secured(response: Response) -> Response:
    for name, value in SECURITY_HEADERS.items():
        response.headers[name] = value
    return response
