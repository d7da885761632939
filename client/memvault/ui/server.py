"""The browser's server: the pages behind the guard, on 127.0.0.1 and a free
port (or the one asked for), until Ctrl-C."""

from __future__ import annotations

import os
import signal
import socket
import tempfile
import webbrowser
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import FrameType

import uvicorn
from jinja2 import Environment, PackageLoader, StrictUndefined
from starlette.applications import Starlette
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from memvault.client import Client
from memvault.ui.actions import Actions
from memvault.ui.guard import Guard, Sessions
from memvault.ui.pages import Pages
from memvault.ui.recent import RecentEvents

__all__ = ["HOST", "Browser", "make_app"]

HOST = "127.0.0.1"


def templates() -> Environment:
    # Autoescape everything: memory text is whatever an agent wrote.
    env = Environment(loader=PackageLoader("memvault.ui", "templates"), autoescape=True,
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["when"] = _when
    env.filters["day"] = _day
    env.filters["short"] = lambda memory_id: memory_id[:8]
    return env


def make_app(client: Client, sessions: Sessions, port: int, recent: RecentEvents) -> Guard:
    pages = Pages(client, templates(), recent)
    actions = Actions(client, pages)
    routes = [
        Route("/", pages.home), Route("/search", pages.search), Route("/browse", pages.browse),
        Route("/memory/{memory_id}", pages.memory), Route("/trash", pages.trash),
        Route("/upkeep", pages.upkeep), Route("/vault", pages.vault),
        Route("/memory/{memory_id}/edit", actions.edit, methods=["POST"]),
        Route("/memory/{memory_id}/supersede", actions.supersede, methods=["POST"]),
        Route("/memory/{memory_id}/pin", actions.pin, methods=["POST"]),
        Route("/memory/{memory_id}/forget", actions.forget, methods=["POST"]),
        Route("/memory/{memory_id}/restore", actions.restore, methods=["POST"]),
        Route("/upkeep/sweep", actions.sweep, methods=["POST"]),
        Route("/upkeep/consolidate", actions.consolidate, methods=["POST"]),
        Mount("/static", StaticFiles(packages=[("memvault.ui", "static")]), name="static"),
    ]
    return Guard(Starlette(routes=routes), sessions, HOST, port)


@dataclass
class Browser:
    """`memvault ui`: serve until interrupted; `announce` is told the URL."""

    client: Client
    port: int = 0
    open_browser: bool = True

    def run(self, announce: Callable[[str], None]) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((HOST, self.port))
        # Listening before the URL is told: a browser that opens it at once connects.
        listener.listen(128)
        port = listener.getsockname()[1]
        sessions = Sessions()
        recent = RecentEvents(self.client)
        recent.start()
        url = f"http://{HOST}:{port}/?token={sessions.token}"
        config = uvicorn.Config(make_app(self.client, sessions, port, recent),
                                log_level="warning", access_log=False, server_header=False,
                                lifespan="off")
        server = uvicorn.Server(config)
        # Until uvicorn's own handlers are in place, a Ctrl-C or SIGTERM is
        # told to the server, not raised: a KeyboardInterrupt that lands in
        # a finaliser (the opener's `Popen.__del__`, as `webbrowser.open`
        # returns) is printed and dropped, and the server then served on
        # (once in 269 starts interrupted while the browser opened, under
        # load). Told so, it starts, sees it should exit and shuts down.
        def stop(signum: int, frame: FrameType | None) -> None:
            server.should_exit = True

        previous = {signum: signal.signal(signum, stop) for signum in _STOPS}
        try:
            announce(url)
            with tempfile.TemporaryDirectory(prefix="memvault-ui-") as private:
                if self.open_browser:
                    webbrowser.open(_launch_page(Path(private), url).as_uri())
                server.run(sockets=[listener])
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            recent.stop()
            listener.close()


# The signals uvicorn stops on (`uvicorn.server.HANDLED_SIGNALS` on POSIX).
_STOPS = (signal.SIGINT, signal.SIGTERM)


def _launch_page(private: Path, url: str) -> Path:
    """A page that sends the browser on to `url`, readable by this user alone.

    The browser is opened at this file, not at `url`: a command line (the
    browser's, or the opener's) is readable by every local user in the
    process list, and whoever spent the token first would hold the session.
    """
    page = private / "open.html"
    fd = os.open(page, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(f'<!doctype html><meta http-equiv="refresh" content="0;url={url}">'
                  f'<a href="{url}">memvault</a>\n')
    return page


def _when(epoch: float) -> str:
    return datetime.fromtimestamp(epoch).isoformat(sep=" ", timespec="seconds") if epoch else ""


def _day(epoch: float) -> str:
    """A table's time: the date (the whole time is in its title)."""
    return datetime.fromtimestamp(epoch).strftime("%Y-%m-%d") if epoch else ""
