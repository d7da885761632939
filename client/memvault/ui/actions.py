"""The browser's forms that change the vault, each one `Client` call and a
redirect (303: the browser then GETs the page, so a reload repeats nothing).

    POST /memory/ID/edit        update the fields that differ from the memory's
    POST /memory/ID/supersede   a new version with the given text
    POST /memory/ID/pin         importance 0.9 (pinned: never swept)
    POST /memory/ID/forget      to the trash, restorable until purged
    POST /memory/ID/restore     back from the trash
    POST /upkeep/sweep          without confirm=yes: what it would do and a
    POST /upkeep/consolidate    button to confirm; with it, done

`guard.py` has already checked the session and the Origin.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, quote

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from memvault.client import Client
from memvault.memory import Memory
from memvault.ui.pages import Pages
from memvault_base.errors import MemvaultError
from memvault_base.memory_rules import PINNED_IMPORTANCE

__all__ = ["Actions"]

# A form's body: a page's own forms send a few fields; 1 MiB is room for the
# longest memory text (32 KiB) many times over.
MAX_FORM_BYTES = 1024 * 1024
# The edit form's fields, in `Client.update`'s keywords.
TEXT_FIELDS = ("text", "type", "topic", "entity", "category", "session", "source", "tier")


@dataclass
class Actions:
    client: Client
    pages: Pages

    async def edit(self, request: Request) -> Response:
        form = await _form(request)
        memory_id = request.path_params["memory_id"]

        def change() -> None:
            current = self.client.get(memory_id)
            changes = _changes(current, form)
            if changes:
                self.client.update(memory_id, **changes)

        return await self._do(request, change, f"/memory/{quote(memory_id)}?done=edited")

    async def supersede(self, request: Request) -> Response:
        form = await _form(request)
        memory_id = request.path_params["memory_id"]
        new_id: list[str] = []

        def change() -> None:
            new_id.append(self.client.supersede(memory_id, form.get("text", "")).id)

        response = await self._do(request, change, "")
        if new_id:
            return _redirect(f"/memory/{quote(new_id[0])}?done=superseded")
        return response

    async def pin(self, request: Request) -> Response:
        memory_id = request.path_params["memory_id"]
        return await self._do(
            request, lambda: self.client.update(memory_id, importance=PINNED_IMPORTANCE),
            f"/memory/{quote(memory_id)}?done=pinned")

    async def forget(self, request: Request) -> Response:
        memory_id = request.path_params["memory_id"]
        return await self._do(request, lambda: self.client.forget(memory_id, by="ui"),
                              f"/memory/{quote(memory_id)}?done=forgotten")

    async def restore(self, request: Request) -> Response:
        memory_id = request.path_params["memory_id"]
        return await self._do(request, lambda: self.client.restore([memory_id]),
                              f"/memory/{quote(memory_id)}?done=restored")

    async def sweep(self, request: Request) -> Response:
        form = await _form(request)
        confirmed = form.get("confirm") == "yes"
        result = await _threaded(lambda: self.client.sweep(dry_run=not confirmed))
        return self.pages.render("upkeep_run.html", kind="sweep", result=result,
                                 confirmed=confirmed)

    async def consolidate(self, request: Request) -> Response:
        form = await _form(request)
        confirmed = form.get("confirm") == "yes"
        result = await _threaded(lambda: self.client.consolidate(dry_run=not confirmed))
        return self.pages.render("upkeep_run.html", kind="consolidate", result=result,
                                 confirmed=confirmed)

    async def _do(self, request: Request, change: Any, then: str) -> Response:
        try:
            await _threaded(change)
        except MemvaultError as err:
            memory_id = request.path_params.get("memory_id", "")
            return self.pages.render("memory.html", 400, memory=None, done="",
                                     error=" ".join(str(err).split()), back=memory_id)
        return _redirect(then)


def _changes(current: Memory, form: dict[str, str]) -> dict[str, Any]:
    """The `Client.update` keywords of the fields the form changed."""
    now = {"text": current.text, "type": current.type, "topic": current.topic_key,
           "entity": current.entity, "category": current.category,
           "session": current.session_id, "source": current.source, "tier": current.tier}
    changes: dict[str, Any] = {name: form[name] for name in TEXT_FIELDS
                               if name in form and form[name] != now[name]}
    if "tags" in form:
        tags = [t.strip() for t in form["tags"].split(",") if t.strip()]
        if tags != list(current.tags):
            changes["tags"] = tags
    if form.get("importance", "").strip():
        try:
            importance = float(form["importance"])
        except ValueError:
            importance = -1.0  # the daemon names the field and its range
        if importance != current.importance:
            changes["importance"] = importance
    return changes


async def _form(request: Request) -> dict[str, str]:
    """The urlencoded body's fields (the last value of each)."""
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            break
    fields = parse_qs(body[:MAX_FORM_BYTES].decode("utf-8", "replace"), keep_blank_values=True)
    return {name: values[-1] for name, values in fields.items()}


async def _threaded(call: Any) -> Any:
    return await run_in_threadpool(call)


def _redirect(path: str) -> Response:
    return RedirectResponse(path, status_code=303)
