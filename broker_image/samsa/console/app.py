"""The console's routes: pages and their POST actions, the read-only switch (on by default: the
forms are not shown and the POSTs answer 403), the console's own login, the error pages, and
the lag sampler that runs while the console does."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import urlsplit

from aiohttp import web

from samsa.cli.errors import Failure
from samsa.console import forms, pages
from samsa.console.cluster import ClusterView
from samsa.console.lag_history import LagHistory
from samsa.console.login import authorized

log = logging.getLogger("samsa.console")
T = TypeVar("T")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

READ_ONLY_MESSAGE = (
    "The console is read-only: producing and resetting offsets are off. "
    "Start it with --read-write to allow them."
)


@dataclass
class Settings:
    read_only: bool = True
    users: dict[str, str] = field(default_factory=dict)
    lag_interval: float = 5.0  # seconds between two lag samples


VIEW = web.AppKey("view", ClusterView)
SETTINGS = web.AppKey("settings", Settings)
HISTORY = web.AppKey("history", LagHistory)


def status_of(failure: Failure) -> int:
    """The HTTP status of a cluster failure, from the CLI's wording of it."""
    message = failure.message
    if "does not exist" in message or "has no partition" in message:
        return 404
    if "is active" in message or "became active" in message:
        return 409
    if any(
        words in message
        for words in ("cannot reach", "accepted the connection", "did not answer", "lost the")
    ):
        return 503
    return 502


def _html(status: int, body: str) -> web.Response:
    return web.Response(status=status, text=body, content_type="text/html")


def _error(request: web.Request, status: int, message: str) -> web.Response:
    return _html(status, pages.error_page(status, message, _ro(request)))


def _ro(request: web.Request) -> bool:
    return request.app[SETTINGS].read_only


async def _run(call: Callable[..., T], *args: Any) -> T:
    """A blocking cluster call off the event loop, each bounded by its own timeout.

    On a daemon thread rather than asyncio.to_thread: the default executor's threads are
    joined at exit, so Ctrl-C would wait out a call to an unreachable cluster (10 s or more)."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()

    def settle(outcome: Any, error: BaseException | None) -> None:
        if done.cancelled():
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(outcome)

    def work() -> None:
        outcome: Any = None
        error: BaseException | None = None
        try:
            outcome = call(*args)
        except BaseException as exc:
            error = exc
        # A closed loop means nobody waits for the answer any more.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, outcome, error)

    threading.Thread(target=work, name="samsa-console-call", daemon=True).start()
    return await done


@web.middleware
async def login(request: web.Request, handler: Handler) -> web.StreamResponse:
    if authorized(request.headers.get("Authorization"), request.app[SETTINGS].users):
        return await handler(request)
    response = _error(request, 401, "Log in to use the console.")
    response.headers["WWW-Authenticate"] = 'Basic realm="samsa console"'
    return response


@web.middleware
async def errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except forms.InputError as exc:
        return _error(request, 400, str(exc))
    except Failure as exc:
        return _error(request, status_of(exc), exc.message)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return _error(request, exc.status, exc.reason)
    except Exception:
        log.exception("console request %s failed", request.path)
        return _error(request, 500, "The console failed to answer: see its log.")


def _writes(request: web.Request) -> None:
    if _ro(request):
        raise web.HTTPForbidden(reason=READ_ONLY_MESSAGE)
    # Browsers send the login and any cookie with a form another site posts here: a write must
    # come from the console's own pages (browsers name the page's origin in Origin).
    origin = request.headers.get("Origin")
    if origin is not None and urlsplit(origin).netloc != request.host:
        raise web.HTTPForbidden(reason=f"Refused a write posted from another site ({origin}).")


routes = web.RouteTableDef()


def _listing(
    path: str, read: Callable[[ClusterView], Callable[[], T]], page: Callable[[T, bool], str]
) -> None:
    """A page that shows one read of the cluster as it is: brokers, topics, groups."""

    async def show(request: web.Request) -> web.Response:
        data = await _run(read(request.app[VIEW]))
        return _html(200, page(data, _ro(request)))

    routes.get(path)(show)


_listing("/", lambda view: view.brokers, pages.brokers_page)
_listing("/topics", lambda view: view.topics, pages.topics_page)
_listing("/groups", lambda view: view.group_ids, pages.groups_page)


@routes.get("/topics/{topic}")
async def topic(request: web.Request) -> web.Response:
    info = await _run(request.app[VIEW].topic, request.match_info["topic"])
    return _html(200, pages.topic_page(info, _ro(request)))


@routes.get("/topics/{topic}/partitions/{partition}/messages")
async def messages(request: web.Request) -> web.Response:
    view = request.app[VIEW]
    name = request.match_info["topic"]
    partition = forms.whole_number(request.match_info, "partition")
    assert partition is not None
    query = dict(request.query)
    limit = forms.page_size(query)
    if query.get("timestamp", "").strip():
        at = forms.timestamp(query["timestamp"])
        offset = await _run(view.offset_for_time, name, partition, at)
    else:
        offset = forms.whole_number(query, "offset", 0) or 0
    records, low, high = await _run(view.records, name, partition, offset, limit)
    page = pages.messages_page(
        name, partition, records, max(offset, low), limit, low, high, _ro(request)
    )
    return _html(200, page)


@routes.post("/topics/{topic}/produce")
async def produce(request: web.Request) -> web.Response:
    _writes(request)
    name = request.match_info["topic"]
    form = {k: str(v) for k, v in (await request.post()).items()}
    partition = forms.whole_number(form, "partition")
    headers = forms.headers(form.get("headers", ""))
    key = form.get("key", "").encode() or None
    value = form.get("value", "").encode()
    where = await _run(request.app[VIEW].produce, name, partition, key, value, headers)
    return _html(200, pages.produced_page(name, *where, _ro(request)))


@routes.get("/groups/{group}")
async def group(request: web.Request) -> web.Response:
    view = request.app[VIEW]
    name = request.match_info["group"]
    info = await _run(view.group, name)
    names: list[str] = []
    if not _ro(request):
        # The group's own topics first: the reset form's choice starts on one of them.
        own = sorted({o["topic"] for o in info["offsets"]})
        names = own + [t["name"] for t in await _run(view.topics) if t["name"] not in own]
    samples = request.app[HISTORY].samples(name)
    return _html(
        200,
        pages.group_page(info, samples, request.app[SETTINGS].lag_interval, names, _ro(request)),
    )


@routes.get("/groups/{group}/lag.json")
async def group_lag(request: web.Request) -> web.Response:
    return web.json_response(request.app[HISTORY].as_json(request.match_info["group"]))


@routes.post("/groups/{group}/reset")
async def reset(request: web.Request) -> web.Response:
    _writes(request)
    name = request.match_info["group"]
    form = {k: str(v) for k, v in (await request.post()).items()}
    target = forms.reset_target(form)
    if not form.get("topic"):
        raise forms.InputError("name the topic whose offsets to reset")
    plan = await _run(request.app[VIEW].reset_offsets, name, form["topic"], target)
    return _html(200, pages.reset_page(name, plan, _ro(request)))


async def _sample_lag(app: web.Application) -> None:
    """Every group's lag, every `lag_interval` seconds, for the group pages' charts."""
    while True:
        try:
            lags = await _run(app[VIEW].all_lags)
        except Failure as exc:
            log.warning("lag sample skipped: %s", exc.message)
        except Exception:
            log.exception("lag sample failed")
        else:
            app[HISTORY].record(time.time(), lags)
        await asyncio.sleep(app[SETTINGS].lag_interval)


async def _sampler(app: web.Application) -> AsyncIterator[None]:
    task = asyncio.create_task(_sample_lag(app))
    yield
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


def make_app(view: ClusterView, settings: Settings) -> web.Application:
    app = web.Application(middlewares=[login, errors])
    app[VIEW] = view
    app[SETTINGS] = settings
    app[HISTORY] = LagHistory()
    app.add_routes(routes)
    app.cleanup_ctx.append(_sampler)
    return app
