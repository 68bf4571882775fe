"""The ASGI application: OpenAI's routes over a Runner, with the safety rules of docs/server.md.

Every route checks the API key when one is set; bodies past the size limit are refused before
they are read whole; a bad body is a 400 that names the field; a full queue a 429 with
Retry-After. A streamed answer starts only once the engine has taken the request and accepted
its prompt, so a prompt too long for the context is a 400 too, never a broken stream. A client
that goes away cancels its turn: streamed, at the next token it is sent; waiting, or answered
whole, as soon as the server hears the disconnect (a watcher on the request's receive channel,
not a poll between events: at 100 tok/s an event is always due sooner than any poll interval,
so a poll between events never ran).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from workbench.engine.requests import (
    GenerateResult,
    PrefillProgress,
    SessionError,
    StopReason,
    TokenEvent,
)
from workbench.server.errors import ApiError
from workbench.server.protocol import EngineCall, parse_chat, parse_completion, parse_json
from workbench.server.responses import (
    ChunkMaker,
    DeltaTracker,
    chat_response,
    completion_response,
)
from workbench.server.runner import Event, Generation, Runner, Started
from workbench.server.stop_filter import StopFilter, cut_at_stop, stop_tail_bytes
from workbench.server.structured import LogprobsOut
from workbench.server.telemetry import RequestInfo
from workbench.server.tools import CallHoldback

MAX_BODY_BYTES = 4 << 20  # default request size limit
log = logging.getLogger("uvicorn.error")  # the server's own log: its level and format


class ClientGone(Exception):
    """The client disconnected before its answer was complete."""


def create_app(runner: Runner, model_id: str, *, api_key: str | None = None,
               max_body_bytes: int = MAX_BODY_BYTES) -> Starlette:
    created = int(time.time())

    async def models(request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [
            {"id": model_id, "object": "model", "created": created, "owned_by": "workbench"}]})

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok", "model": model_id,
                             "in_flight": runner.admission.in_flight})

    async def chat(request: Request) -> Response:
        return await _answer(request, parse_chat, "chatcmpl")

    async def completions(request: Request) -> Response:
        return await _answer(request, parse_completion, "cmpl")

    async def _answer(request: Request, parse: Callable[[dict[str, Any]], EngineCall],
                      prefix: str) -> Response:
        try:
            body = await read_body(request, max_body_bytes)
        except ClientDisconnect:
            # Left before its body ended (a Content-Length never reached, a chunked body
            # abandoned): nobody is there to answer. One line, no traceback.
            # A chunked body cut or malformed is uvicorn's own one line ("Invalid HTTP
            # request received."): a second would say it twice.
            if "chunked" not in request.headers.get("transfer-encoding", "").lower():
                log.warning("a client (%s) left before its request body ended; nothing was run",
                            client_label(request))
            return Response(status_code=499)
        call = parse(parse_json(body))
        info = RequestInfo(id=f"{prefix}-{uuid.uuid4().hex[:24]}", kind=call.kind,
                           client=client_label(request, call.client))
        generation = runner.start(call, info)
        # The body is read: what the client sends from now on can only be its disconnect. The
        # watcher is cancelled before a streamed response runs (the response listens itself).
        gone = asyncio.ensure_future(_client_gone(request))
        try:
            first = await _next(generation, gone, skip_progress=False)
            if isinstance(first, GenerateResult) and not first.ok:
                raise _refusal(first)  # refused before any decode: a plain error, not a stream
            if call.stream:
                return StreamingResponse(_stream(call, info, generation, first),
                                         media_type="text/event-stream",
                                         headers={"Cache-Control": "no-cache",
                                                  "X-Accel-Buffering": "no"})
            item: Event = first
            logprobs = LogprobsOut(call.kind, call.decoding.logprobs >= 0)
            while not isinstance(item, GenerateResult):
                if isinstance(item, TokenEvent):
                    logprobs.add(item.choice)
                item = await _next(generation, gone)
            if not item.ok:
                raise _refusal(item)
            logprobs.cut(stop_tail_bytes(item.text, call.stop))
            make = chat_response if call.kind == "chat" else completion_response
            return JSONResponse(make(info.id, model_id, int(time.time()), item, call.stop,
                                     logprobs.whole()))
        except ClientGone:
            generation.cancel()
            return Response(status_code=499)
        except BaseException:
            generation.cancel()
            raise
        finally:
            gone.cancel()

    async def _stream(call: EngineCall, info: RequestInfo, generation: Generation,
                      first: Event) -> AsyncIterator[str]:
        maker = ChunkMaker(call.kind, info.id, model_id)
        tracker = DeltaTracker()
        stops = StopFilter(call.stop)
        logprobs = LogprobsOut(call.kind, call.decoding.logprobs >= 0)
        held = CallHoldback(generation.tool_openers) if call.calls_allowed else None
        try:
            if call.kind == "chat":
                yield _sse(maker.role())
            item: Event = first
            while True:
                if isinstance(item, PrefillProgress):
                    # A comment line: keeps the connection alive, and a client gone is seen.
                    yield f": prefill {item.done}/{item.total}\n\n"
                elif isinstance(item, TokenEvent):
                    logprobs.add(item.choice)
                    answer, reasoning = tracker.update(item.metrics.text, item.metrics.reasoning)
                    answer = stops.feed(answer)
                    if held is not None:
                        answer = held.feed(answer)
                    if answer or reasoning:
                        yield _sse(maker.delta(answer, reasoning, logprobs.pending()))
                elif isinstance(item, GenerateResult):
                    logprobs.cut(stop_tail_bytes(item.text, call.stop))
                    rest = stops.flush()
                    if held is not None:
                        held.feed(rest)
                        rest = held.finish(cut_at_stop(item.text, call.stop)[0])
                    if rest:
                        yield _sse(maker.delta(rest, logprobs=logprobs.pending()))
                    if not item.ok:
                        yield _sse(_refusal(item).body())
                    else:
                        for chunk in maker.calls(item):
                            yield _sse(chunk)
                        for chunk in maker.finish(item, stops.stopped, call.include_usage,
                                                  logprobs.pending()):
                            yield _sse(chunk)
                    yield "data: [DONE]\n\n"
                    return
                item = await generation.next()
        finally:
            if not generation.finished:
                generation.cancel()

    async def _next(generation: Generation, gone: asyncio.Future[None],
                    skip_progress: bool = True) -> Event:
        """The generation's next event (not Started; progress unless skipped), or ClientGone as
        soon as `gone` is done."""
        while True:
            waiting = asyncio.ensure_future(generation.next())
            await asyncio.wait({waiting, gone}, return_when=asyncio.FIRST_COMPLETED)
            if not waiting.done():
                waiting.cancel()
                raise ClientGone
            item = waiting.result()
            if isinstance(item, Started) or (skip_progress and isinstance(item, PrefillProgress)):
                continue
            return item

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await runner.drain()  # Ctrl-C: what was admitted finishes before the engine closes

    async def api_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ApiError)
        return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        kind = "not_found_error" if exc.status_code == 404 else "invalid_request_error"
        what = (f"no route {request.method} {request.url.path}" if exc.status_code in (404, 405)
                else str(exc.detail))
        return JSONResponse(ApiError(exc.status_code, what, type=kind).body(),
                            status_code=exc.status_code)

    async def engine_error(request: Request, exc: Exception) -> Response:
        # No model (the window closed it), or the engine failed: an OpenAI-style body still.
        if isinstance(exc, SessionError):
            return JSONResponse(ApiError(503, str(exc), type="server_error",
                                         code="model_not_loaded").body(), status_code=503)
        return JSONResponse(ApiError(500, f"the server failed: {exc}", type="server_error").body(),
                            status_code=500)

    app = Starlette(
        routes=[
            Route("/v1/models", models, methods=["GET"]),
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/v1/completions", completions, methods=["POST"]),
            Route("/health", health, methods=["GET"]),
        ],
        exception_handlers={ApiError: api_error, HTTPException: http_error,
                            Exception: engine_error},
        lifespan=lifespan,
    )
    if api_key:
        app.add_middleware(ApiKeyMiddleware, api_key=api_key)
    app.state.runner = runner
    return app


class ApiKeyMiddleware:
    """`Authorization: Bearer KEY` on every request, the key compared in constant time. The
    scheme's name is case-insensitive (RFC 7235: `bearer KEY` and `BEARER KEY` are the same)."""

    def __init__(self, app: ASGIApp, api_key: str) -> None:
        self.app = app
        self.expected = api_key.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            scheme, _, key = Headers(scope=scope).get("authorization", "").partition(" ")
            given = key.lstrip(" ").encode() if scheme.lower() == "bearer" else b""
            if not (given and hmac.compare_digest(given, self.expected)):
                error = ApiError(401, "a valid API key is needed: send the header "
                                 "'Authorization: Bearer KEY' with the key the server was "
                                 "started with (--api-key)", code="invalid_api_key")
                response = JSONResponse(error.body(), status_code=401,
                                        headers={"WWW-Authenticate": "Bearer"})
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


async def _client_gone(request: Request) -> None:
    """Returns once the client has disconnected (the body must have been read)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def read_body(request: Request, limit: int) -> bytes:
    """The body, refused with 413 as soon as it is known to exceed `limit` bytes."""
    declared = request.headers.get("content-length")
    too_big = ApiError(413, f"the request body is larger than the server's limit of {limit} "
                       "bytes (--max-request-bytes)", code="request_too_large")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise too_big
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise too_big
    return bytes(body)


def client_label(request: Request, named: str = "") -> str:
    """Who sent a request, for the window's label and the log: the name it gives itself (the
    `user` field) or its User-Agent, and its address."""
    who = named or request.headers.get("user-agent", "") or "unknown client"
    where = f"{request.client.host}:{request.client.port}" if request.client else "?"
    return f"{who[:60]} ({where})"


def _refusal(result: GenerateResult) -> ApiError:
    if result.stop_reason is StopReason.REJECTED:
        code = "context_length_exceeded" if "context" in result.error else "invalid_request"
        return ApiError(400, result.error, code=code)
    return ApiError(500, result.error or "the generation failed", type="server_error")


def _sse(payload: dict[str, Any]) -> str:
    return f"data: {json.dumps(payload, ensure_ascii=False)}\n\n"

