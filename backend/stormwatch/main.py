"""The FastAPI application: REST API under /api/v1, the built UI at /."""

from __future__ import annotations

import gc
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import asyncpg
import fastapi_offline
from fastapi import Depends, FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import (
    FileResponse,
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    Response,
)
from fastapi.staticfiles import StaticFiles
from sqlalchemy import exc as sa_exc
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp

from stormwatch import __version__
from stormwatch.api.deps import reject_unknown_query
from stormwatch.api.routes import (
    advisors,
    agents,
    alerts,
    analytics,
    audit,
    auth,
    channels,
    export,
    geography,
    health,
    ingest,
    invitations,
    maintenance,
    oidc,
    paths,
    settings,
    silences,
    storage_targets,
    throughput,
    vocabularies,
)
from stormwatch.api.security_headers import SecurityHeaders, policy_for_inline_scripts
from stormwatch.core.config import get_settings
from stormwatch.core.db import get_engine
from stormwatch.core.logging import setup_logging
from stormwatch.observability.api import instrument
from stormwatch.schemas.errors import COMMON
from stormwatch.schemas.ingest import IngestBatch

log = logging.getLogger("stormwatch.api")
API_PREFIX = "/api/v1"
DOCS_URL = "/docs"
# Swagger UI's files as packaged by fastapi-offline: /docs works without reaching a CDN.
DOCS_ASSETS_URL = "/docs-assets"
DOCS_ASSETS_DIR = Path(fastapi_offline.__file__).parent / "static"

ROUTERS = [
    health.router,
    auth.router,
    agents.router,
    ingest.router,
    settings.router,
    invitations.router,
    oidc.router,
    storage_targets.router,
    geography.router,
    paths.router,
    analytics.router,
    advisors.router,
    alerts.router,
    channels.router,
    silences.router,
    maintenance.router,
    throughput.router,
    vocabularies.router,
    audit.router,
    export.router,
]


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    # Everything imported and built so far lives as long as the process: out of the
    # collector's reach, a full collection no longer walks it (100+ ms pauses in analyses).
    gc.collect()
    gc.freeze()
    yield
    await get_engine().dispose()


def _db_unavailable(request: Request, exc: Exception) -> JSONResponse:
    log.warning("database unavailable on %s %s: %s", request.method, request.url.path,
                type(exc).__name__)
    retry = str(get_settings().db_unavailable_retry_after_s)
    return JSONResponse({"detail": "database unavailable, retry later"}, status_code=503,
                        headers={"Retry-After": retry})


def _is_connection_error(exc: BaseException) -> bool:
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, OSError | ConnectionError | TimeoutError
                      | asyncpg.PostgresConnectionError | asyncpg.CannotConnectNowError
                      | asyncpg.InterfaceError | sa_exc.TimeoutError):
            return True
        if isinstance(cur, sa_exc.DBAPIError) and cur.connection_invalidated:
            return True
        if isinstance(cur, asyncpg.PostgresError) and getattr(cur, "sqlstate", "").startswith(
                ("08", "57P")):  # connection exception, operator intervention (shutdown)
            return True
        cur = cur.__cause__ or cur.__context__
    return False


class StormwatchAPI(FastAPI):
    def build_middleware_stack(self) -> ASGIApp:
        # Outside the server-error middleware, so even the 500 it writes has the headers.
        return SecurityHeaders(super().build_middleware_stack(), get_settings())


def create_app() -> FastAPI:
    settings = get_settings()
    setup_logging(settings.log_level)
    app = StormwatchAPI(
        title="Stormwatch API",
        version=__version__,
        description="Latency of the public cloud: mesh RTT, object storage, throughput. "
        "People authenticate with the session cookie (and X-CSRF-Token on writes), REST "
        "clients with `Authorization: Bearer swk_...` API keys, agents with their own token.",
        openapi_url=f"{API_PREFIX}/openapi.json",
        docs_url=None,  # served by _mount_docs from local assets
        redoc_url=None,
        lifespan=lifespan,
    )
    for router in ROUTERS:
        app.include_router(router, prefix=API_PREFIX, responses=COMMON,
                           dependencies=[Depends(reject_unknown_query)])

    async def infrastructure_error(request: Request, exc: Exception) -> JSONResponse:
        if _is_connection_error(exc):
            return _db_unavailable(request, exc)
        log.error("unhandled %s on %s %s", type(exc).__name__, request.method, request.url.path,
                  exc_info=exc)
        return JSONResponse({"detail": "internal error"}, status_code=500)

    # Registered per class (not on Exception) so the response is sent without the
    # server-error middleware re-raising and dropping the keep-alive connection.
    for exc_class in (OSError, sa_exc.DBAPIError, sa_exc.TimeoutError, asyncpg.PostgresError,
                      asyncpg.InterfaceError):
        app.add_exception_handler(exc_class, infrastructure_error)  # type: ignore[arg-type]

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        # FastAPI answers 400 to a body it cannot decode (not UTF-8, not JSON): bad input
        # is a 422 at the body, like every other invalid field.
        if exc.status_code == 400 and exc.detail == "There was an error parsing the body":
            return JSONResponse({"detail": [{"loc": ["body"], "msg": "the body is not valid "
                                             "UTF-8 JSON", "type": "json_invalid"}]},
                                status_code=422)
        return await http_exception_handler(request, exc)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [{"loc": list(e.get("loc", ())), "msg": e.get("msg", ""),
                   "type": e.get("type", "")} for e in exc.errors()]
        return JSONResponse({"detail": errors}, status_code=422)

    instrument(app)
    _mount_docs(app)
    _mount_ui(app, settings.frontend_dist)
    _document_hand_parsed_bodies(app)
    return app


def _document_hand_parsed_bodies(app: FastAPI) -> None:
    """Adds the models of bodies that routes parse themselves to the schema's components."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = generate()
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        for model in (IngestBatch,):
            doc = model.model_json_schema(ref_template="#/components/schemas/{model}")
            components.update(doc.pop("$defs", {}))
            components[model.__name__] = doc
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


def _mount_docs(app: FastAPI) -> None:
    """Swagger UI at /docs with its script, style sheet and icon from this server."""
    app.mount(DOCS_ASSETS_URL, StaticFiles(directory=DOCS_ASSETS_DIR), name="docs-assets")
    oauth2_redirect = f"{DOCS_URL}/oauth2-redirect"

    @app.get(DOCS_URL, include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return _with_own_inline_scripts(get_swagger_ui_html(
            openapi_url=f"{root}{app.openapi_url}", title=f"{app.title} - Swagger UI",
            oauth2_redirect_url=f"{root}{oauth2_redirect}",
            swagger_js_url=f"{root}{DOCS_ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{DOCS_ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=f"{root}{DOCS_ASSETS_URL}/favicon.png",
            swagger_ui_parameters=app.swagger_ui_parameters))

    @app.get(oauth2_redirect, include_in_schema=False)
    async def swagger_ui_redirect() -> HTMLResponse:
        return _with_own_inline_scripts(get_swagger_ui_oauth2_redirect_html())


def _with_own_inline_scripts(page: HTMLResponse) -> HTMLResponse:
    """Swagger UI's pages start it with an inline script: their policy allows that script by
    its hash (and nothing else inline), instead of 'unsafe-inline'."""
    page.headers["Content-Security-Policy"] = policy_for_inline_scripts(bytes(page.body).decode())
    return page


def _mount_ui(app: FastAPI, dist: Path) -> None:
    index = dist / "index.html"
    dist_root = dist.resolve()
    if (dist / "assets").is_dir():
        app.mount("/assets", StaticFiles(directory=dist / "assets"), name="assets")

    @app.get("/{path:path}", include_in_schema=False, response_model=None)
    async def spa(path: str) -> FileResponse | PlainTextResponse | JSONResponse:
        if path.startswith("api/"):
            return JSONResponse({"detail": "Not Found"}, status_code=404)
        candidate = (dist / path).resolve()  # noqa: ASYNC240 - a stat, not I/O worth a thread
        if path and candidate.is_file() and dist_root in candidate.parents:
            return FileResponse(candidate)
        if index.is_file():
            return FileResponse(index)
        return PlainTextResponse(
            "Stormwatch API is running. The UI is not built yet: run `make run` "
            "(it builds frontend/) or see /docs for the API.", status_code=200)


app = create_app()
