"""The HTTP API: one FastAPI app, whichever engine answers behind it.

    POST /annotate[?threshold=T]  one document {"text", "id", "meta"} or a list -> record(s)
    POST /render                  {"text", "grid", "threshold"} -> the page's drawing and record
    GET  /health                  alive;  GET /ready: pipeline loaded and warmed up (503 before)
    GET  /metadata                pipeline name and version, labels, spans key, threshold, limits
    GET  /                        a page to try it;  GET /docs: the OpenAPI page

Every refusal is a JSON ``{"error": ...}`` that names the problem, with a 4xx status
(``requests.py``); a request that is not answered within ``timeout_s`` gets 504 and nothing of
it; one the queue cannot take gets 503 with Retry-After; a client that goes away cancels what
it asked for. A server error is a 500 with the error's type and message, never a traceback.
With an API key (``--api-key`` or $SPACY_W2NER_API_KEY) every route but /health, /ready, the
page and the API's schema (/, /docs, /openapi.json) wants ``Authorization: Bearer KEY``. No request value names a file.
"""
import asyncio
import hmac
import json
import logging
from contextlib import asynccontextmanager
from typing import Any, Dict, List, Optional

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import HTMLResponse, JSONResponse, Response
from pydantic import TypeAdapter
from starlette.exceptions import HTTPException as StarletteHTTPException

from .. import __version__
from ..annotate.records import Record
from .batching import Overloaded
from .options import ServeOptions
from .page import PAGE
from .requests import AnnotateBody, RequestProblem, check_content_type, read_documents, read_threshold

log = logging.getLogger("spacy_w2ner.serve")
CLIENT_GONE = 499  # nginx's code for a client that closed the connection first


def create_app(engine, options: ServeOptions) -> FastAPI:
    """The app, answering with ``engine`` (``engines.LocalEngine`` or ``engines.ReplicaEngine``).

    The routes (``router``) find the engine, the options and the API key in ``app.state``.
    """
    app = FastAPI(title="spacy-w2ner", version=__version__, lifespan=_lifespan, description=__doc__.split("\n\n")[0])
    app.state.engine = engine
    app.state.options = options
    app.state.api_key = options.resolved_api_key()
    for kind, handler in EXCEPTION_HANDLERS.items():
        app.add_exception_handler(kind, handler)
    app.include_router(router)
    app.openapi = lambda: _openapi(app)
    return app


@asynccontextmanager
async def _lifespan(app: FastAPI):
    await app.state.engine.start()
    yield
    await app.state.engine.stop()


def authorize(request: Request) -> None:
    """Refuse (401) a request without the server's API key, when it has one."""
    api_key = request.app.state.api_key
    if api_key and not hmac.compare_digest(request.headers.get("authorization", ""), f"Bearer {api_key}"):
        raise RequestProblem(401, "missing or wrong token: send Authorization: Bearer <the server's API key>")


def ready_engine(request: Request):
    """The engine, if it is ready to answer (503 while the pipeline loads)."""
    engine = request.app.state.engine
    if not engine.ready:
        raise RequestProblem(503, "the pipeline is still loading; retry shortly (GET /ready)")
    return engine


async def _refused(request: Request, problem: RequestProblem):
    headers = {"Retry-After": "1"} if problem.status == 503 else None
    return JSONResponse({"error": problem.message}, status_code=problem.status, headers=headers)


async def _invalid(request: Request, error: RequestValidationError):
    first = error.errors()[0]
    where = ".".join(str(part) for part in first.get("loc", ()))
    return JSONResponse({"error": f"{where}: {first.get('msg')}"}, status_code=422)


async def _http_error(request: Request, error: StarletteHTTPException):
    return JSONResponse({"error": str(error.detail)}, status_code=error.status_code)


async def _server_error(request: Request, error: Exception):
    log.error("server error on %s %s: %r", request.method, request.url.path, error)
    return JSONResponse({"error": f"server error ({type(error).__name__}: {error})"}, status_code=500)


EXCEPTION_HANDLERS = {
    RequestProblem: _refused,
    RequestValidationError: _invalid,
    StarletteHTTPException: _http_error,
    Exception: _server_error,
}
router = APIRouter()


@router.get("/health")
async def health() -> Dict[str, str]:
    """Alive (the process answers)."""
    return {"status": "alive"}


@router.get("/ready")
async def ready(request: Request) -> JSONResponse:
    """Ready: the pipeline is loaded and has run once (503 until then)."""
    is_ready = bool(request.app.state.engine.ready)
    return JSONResponse({"ready": is_ready}, status_code=200 if is_ready else 503)


@router.get("/metadata", dependencies=[Depends(authorize)])
async def metadata(request: Request) -> Dict[str, Any]:
    """The pipeline (name, version, components), labels, spans key, threshold range, limits."""
    return request.app.state.engine.metadata()


@router.post(
    "/annotate",
    dependencies=[Depends(authorize)],
    responses={200: {"model": Record, "description": "the record; a list of records for a list"}},
)
async def annotate(request: Request, threshold: Optional[str] = None) -> Response:
    """Entities of one document or a list of them: the records ``annotate`` writes."""
    options: ServeOptions = request.app.state.options
    check_content_type(request.headers.get("content-type"))
    documents, many = read_documents(await read_body(request, options.max_body_bytes), options)
    level = read_threshold(threshold, options)
    engine = ready_engine(request)
    try:
        futures = engine.submit(documents, level)
    except Overloaded as err:
        raise RequestProblem(503, f"server busy: {err}") from None
    records = await answers(request, futures, options.timeout_s)
    if records is None:
        return Response(status_code=CLIENT_GONE)
    return JSONResponse(records if many else records[0])


@router.post("/render", include_in_schema=False, dependencies=[Depends(authorize)])
async def render(request: Request) -> Dict[str, Any]:
    """The page's request: one text drawn with its entities (and grids), and its record."""
    options: ServeOptions = request.app.state.options
    check_content_type(request.headers.get("content-type"))
    body = await read_body(request, options.max_body_bytes)
    documents, _ = read_documents(_text_only(body), options)
    fields = _json_object(body)
    level = read_threshold(None if fields.get("threshold") in (None, "") else str(fields["threshold"]), options)
    engine = ready_engine(request)
    try:
        return await asyncio.wait_for(engine.render(documents[0]["text"], level, bool(fields.get("grid"))), options.timeout_s)
    except asyncio.TimeoutError:
        raise RequestProblem(504, f"not drawn within {options.timeout_s:g} s") from None


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
async def page() -> str:
    return PAGE


async def read_body(request: Request, limit: int) -> bytes:
    """The request's body, refused (413) as soon as it is over ``limit`` bytes."""
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise RequestProblem(413, f"the body has {declared} bytes, more than the limit of {limit}")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise RequestProblem(413, f"the body is over the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


async def answers(request: Request, futures: List[asyncio.Future], timeout: float) -> Optional[List[Any]]:
    """The futures' results; None when the client went away first. Either way, or after
    ``timeout`` seconds (504), what is left of the request is cancelled: nothing is half-answered."""
    gathered = asyncio.gather(*futures)
    gone = asyncio.ensure_future(_client_gone(request))
    try:
        done, _ = await asyncio.wait({gathered, gone}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        if gathered in done:
            return gathered.result()
        gathered.cancel()
        for future in futures:
            future.cancel()
        if gone in done:
            return None
        raise RequestProblem(504, f"not answered within {timeout:g} s; nothing of the request is returned")
    finally:
        gone.cancel()


async def _client_gone(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


def _json_object(body: bytes) -> Dict[str, Any]:
    value = json.loads(body.decode("utf8"))
    if not isinstance(value, dict):
        raise RequestProblem(422, "expected a JSON object with a 'text'")
    return value


def _text_only(body: bytes) -> bytes:
    """The /render body as a document (its text), so that it is checked as /annotate checks one."""
    try:
        value = json.loads(body.decode("utf8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return body  # read_documents names the problem
    return json.dumps({"text": value.get("text")} if isinstance(value, dict) else value).encode("utf8")


def _openapi(app: FastAPI) -> Dict[str, Any]:
    """FastAPI's schema, with /annotate's request body (read by hand, to name each problem)."""
    if app.openapi_schema is None:
        schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
        body = TypeAdapter(AnnotateBody).json_schema(ref_template="#/components/schemas/{model}")
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        components.update(jsonable_encoder(body.pop("$defs", {})))
        schema["paths"]["/annotate"]["post"]["requestBody"] = {
            "required": True, "content": {"application/json": {"schema": body}},
        }  # fmt: skip
        app.openapi_schema = schema
    return app.openapi_schema
