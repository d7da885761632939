"""The browser's pages: each reads its query string, makes a few `Client`
calls and renders a template. Nothing here changes the vault (`actions.py` does).

    /           -> /browse
    /search     recall with the CLI's options; each hit's channels, reasons, score parts
    /browse     ListMemories, paged and sorted, with facet links
    /memory/ID  one memory: fields, chain, sources; the forms of `actions.py`
    /trash      what forget put in the trash
    /upkeep     the sweep's and consolidation's dry runs
    /vault      counts, bands, model and cache, sync, recent events

A search from here is a preview: it leaves access counts alone, as looking
is not using (`memvault recall --preview`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from jinja2 import Environment
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from memvault.client import Client
from memvault.ui.recent import RecentEvents
from memvault_base.errors import InvalidArgument, MemvaultError, NotFound

__all__ = ["Pages"]

SORTS = ("created", "last_used", "heat", "importance")
BANDS = ("hot", "warm", "cold", "frozen")
TYPES = ("semantic", "episodic", "procedural")
TIERS = ("working", "long_term", "archived")
MODES = ("hybrid", "vector", "keyword")
PAGE_SIZES = (25, 50, 100, 200)
# Which facet filters a Browse link sets: the facet's name -> the query parameter.
FACET_PARAMS = {"topic": "topic", "entity": "entity", "tag": "tag", "type": "type",
                "source": "source", "session": "session", "band": "band", "tier": "tier"}
# What an action did, by the word it redirects with (?done=...): fixed text,
# never text taken from the request.
DONE = {"edited": "Saved.", "pinned": "Pinned (importance 0.9).",
        "forgotten": "Moved to the trash.", "restored": "Restored from the trash.",
        "superseded": "Stored as a new version; the old one stays in the chain."}


@dataclass
class Pages:
    client: Client
    templates: Environment
    recent: RecentEvents

    def render(self, name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        html = self.templates.get_template(name).render(page=name.split(".")[0], **context)
        return HTMLResponse(html, status_code=status_code)

    def failed(self, err: MemvaultError, name: str, **context: Any) -> HTMLResponse:
        code = 400 if isinstance(err, InvalidArgument) else 404 if isinstance(
            err, NotFound) else 503
        return self.render(name, code, error=" ".join(str(err).split()), **context)

    def home(self, request: Request) -> Response:
        return RedirectResponse("/browse", status_code=303)

    def search(self, request: Request) -> Response:
        asked = _Asked(request)
        form: dict[str, Any] = {
            "q": asked.text("q"), "top_k": asked.number("top_k", 10, 1, 1000),
            "mode": asked.choice("mode", MODES), "types": asked.all("type", TYPES),
            "topic": asked.text("topic"), "exact_topic": asked.flag("exact_topic"),
            "session": asked.text("session"), "source": asked.text("source"),
            "tiers": asked.all("tier", TIERS), "band": asked.choice("band", BANDS),
            "include_superseded": asked.flag("include_superseded"),
            "min_score": asked.text("min_score"), "filter": asked.text("filter"),
            "max_tokens": asked.number("max_tokens", 0, 0, 10**9),
            "offset": asked.number("offset", 0, 0, 999), "turns": asked.flag("turns"),
        }
        context: dict[str, Any] = {"form": form, "modes": MODES, "types": TYPES,
                                   "tiers": TIERS, "bands": BANDS}
        if not form["q"]:
            return self.render("search.html", hits=None, **context)
        try:
            min_score = float(form["min_score"]) if form["min_score"] else None
        except ValueError:
            return self.render("search.html", 400, hits=None,
                               error="min_score: not a number (0..1)", **context)
        try:
            hits = self.client.recall(
                form["q"], top_k=form["top_k"], min_score=min_score,
                filter=form["filter"] or None, mode=form["mode"], types=form["types"],
                topic=form["topic"], exact_topic=form["exact_topic"], session=form["session"],
                source=form["source"], tiers=form["tiers"],
                include_superseded=form["include_superseded"], max_tokens=form["max_tokens"],
                offset=form["offset"], mark_accessed=False, include_turns=form["turns"],
                band=form["band"])
        except MemvaultError as err:
            return self.failed(err, "search.html", hits=None, **context)
        more = asked.link("/search", offset=form["offset"] + len(hits)) if hits.has_more else ""
        return self.render("search.html", hits=hits, more=more, **context)

    def browse(self, request: Request) -> Response:
        asked = _Asked(request)
        form: dict[str, Any] = {
            "sort": asked.choice("sort", SORTS) or "created", "asc": asked.flag("asc"),
            "limit": asked.number("limit", 50, 1, 500), "offset": asked.number("offset", 0, 0,
                                                                               10**9),
            "topic": asked.text("topic"), "entity": asked.text("entity"),
            "tag": asked.text("tag"), "type": asked.choice("type", TYPES),
            "source": asked.text("source"), "session": asked.text("session"),
            "band": asked.choice("band", BANDS), "tier": asked.choice("tier", TIERS),
            "include_superseded": asked.flag("include_superseded"),
        }
        context: dict[str, Any] = {"form": form, "sorts": SORTS, "sizes": PAGE_SIZES,
                                   "link": asked.link, "facet_params": FACET_PARAMS}
        try:
            page = self.client.list_memories(
                sort=form["sort"], ascending=form["asc"], limit=form["limit"],
                offset=form["offset"], topic=form["topic"], entity=form["entity"],
                tag=form["tag"], types=[form["type"]] if form["type"] else [],
                source=form["source"], session=form["session"], band=form["band"],
                tiers=[form["tier"]] if form["tier"] else [],
                include_superseded=form["include_superseded"], facets=True)
        except MemvaultError as err:
            return self.failed(err, "browse.html", listing=None, **context)
        offset, limit = form["offset"], form["limit"]
        pages = {"first": offset + 1, "last": offset + len(page.memories),
                 "previous": asked.link("/browse", offset=max(0, offset - limit))
                 if offset else "",
                 "next": asked.link("/browse", offset=offset + limit)
                 if page.next_page_token else ""}
        return self.render("browse.html", listing=page, pages=pages, **context)

    def memory(self, request: Request) -> Response:
        memory_id = request.path_params["memory_id"]
        done = DONE.get(request.query_params.get("done", ""), "")
        try:
            memory_id = self.client.resolve_id(memory_id)
            memory = self.client.get(memory_id)
        except NotFound:
            trashed = next((t for t in self._trash() if t.memory.id == memory_id), None)
            if trashed is None:
                return self.render("memory.html", 404, memory=None, done=done,
                                   error=f"no memory {memory_id} (nor in the trash)")
            return self.render("memory.html", memory=trashed.memory, trashed=trashed,
                               done=done, chain=[], sources=[], types=TYPES, tiers=TIERS)
        except MemvaultError as err:
            return self.failed(err, "memory.html", memory=None, done=done)
        chain = self.client.history(memory_id)
        sources = self.client.sources(memory_id) if memory.consolidated_from else []
        return self.render("memory.html", memory=memory, trashed=None, done=done, chain=chain,
                           sources=sources, types=TYPES, tiers=TIERS)

    def trash(self, request: Request) -> Response:
        return self.render("trash.html", trash=self._trash(),
                           done=DONE.get(request.query_params.get("done", ""), ""))

    def _trash(self) -> list[Any]:
        return list(self.client.trash())

    def upkeep(self, request: Request) -> Response:
        sweep = self.client.sweep(dry_run=True)
        consolidation = self.client.consolidate(dry_run=True)
        return self.render("upkeep.html", sweep=sweep, consolidation=consolidation,
                           status=self.client.status())

    def vault(self, request: Request) -> Response:
        status = self.client.status(bands=True)
        lookups = status.cache_hits + status.cache_misses
        widest = max(status.bands.values(), default=0) or 1
        return self.render("vault.html", status=status, sync=self.client.sync_status(),
                           hit_rate=status.cache_hits / lookups if lookups else None,
                           bands=[(name, status.bands.get(name, 0),
                                   round(100 * status.bands.get(name, 0) / widest))
                                  for name in BANDS],
                           events=self.recent.latest())


class _Asked:
    """A page's query string, read leniently: a value out of range or not
    among the choices counts as not given."""

    def __init__(self, request: Request) -> None:
        self.params = request.query_params

    def text(self, name: str) -> str:
        return self.params.get(name, "").strip()

    def flag(self, name: str) -> bool:
        return self.params.get(name, "") in ("1", "on", "true")

    def number(self, name: str, default: int, least: int, most: int) -> int:
        try:
            value = int(self.params.get(name, ""))
        except ValueError:
            return default
        return value if least <= value <= most else default

    def choice(self, name: str, allowed: tuple[str, ...]) -> str:
        value = self.params.get(name, "")
        return value if value in allowed else ""

    def all(self, name: str, allowed: tuple[str, ...]) -> list[str]:
        return [v for v in self.params.getlist(name) if v in allowed]

    def link(self, path: str, **changes: object) -> str:
        """This page's query with `changes` (None or "" drops a parameter);
        any change but the offset starts again at the first page."""
        kept = [(k, v) for k, v in self.params.multi_items() if k not in changes]
        if "offset" not in changes:
            kept = [(k, v) for k, v in kept if k != "offset"]
        added = [(k, str(v)) for k, v in changes.items() if v not in (None, "")]
        query = urlencode(kept + added)
        return path + (f"?{query}" if query else "")

