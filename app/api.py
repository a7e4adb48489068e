"""The HTTP API (`abstract-qa serve`): the library's calls over HTTP, with the same models.

Loopback by default. Ingest over HTTP needs the bearer token of AQA_API_TOKEN when one is set,
and is refused when the server listens beyond loopback without one. Bodies over
AQA_API_MAX_UPLOAD_MB and questions over AQA_MAX_QUESTION_CHARS get a 413 or 422 that says so.
OpenAPI docs are at /docs.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import secrets
import shutil
import tempfile
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path, PurePath
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, File, HTTPException, Query, Request, UploadFile
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, Field
from sse_starlette.sse import EventSourceResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.service import QAService
from core.errors import AQAError, ConfigError, EmptyIndexError, InputError, ProviderError
from core.models import Answer, IndexStats, IngestReport, Mode, Paper, Source
from core.settings import Settings, get_settings


class AskRequest(BaseModel):
    """A question and the options of `QAService.stream`."""

    model_config = {"extra": "forbid"}

    question: str = Field(min_length=1, description="The question, in words.")
    history: list[tuple[str, str]] = Field(
        default_factory=list, description="Earlier (question, answer) turns, oldest first."
    )
    k: int | None = Field(default=None, ge=1, le=100, description="Papers to retrieve.")
    year_from: int | None = Field(default=None, description="Earliest year, inclusive.")
    year_to: int | None = Field(default=None, description="Latest year, inclusive.")
    venue: list[str] = Field(default_factory=list, description="Venues, case-insensitive.")
    decision: list[str] = Field(default_factory=list, description="Decisions, e.g. Oral.")
    authors: list[str] = Field(default_factory=list, description="Authors, as people write them.")
    ignore: list[Literal["year", "venues", "decisions", "authors"]] = Field(
        default_factory=list, description="Filters not to read from the question."
    )
    mode: Mode = Field(default="hybrid", description="How retrieval ranks.")

    def options(self) -> dict[str, Any]:
        return self.model_dump(exclude={"question"})


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class BodyLimit:
    """Refuses a request body over ``limit`` bytes with a 413, whether or not it says its size."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await self._refuse(send)
            return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:
                raise _TooLarge
            return message

        try:
            await self.app(scope, counted, send)
        except _TooLarge:
            await self._refuse(send)

    async def _refuse(self, send: Send) -> None:
        mb = self.limit / 1e6
        response = JSONResponse(
            {"detail": f"The request body is over {mb:g} MB: send less, or raise "
             "AQA_API_MAX_UPLOAD_MB."}, status_code=413)  # fmt: skip
        await response({"type": "http"}, _no_body, send)


class _TooLarge(Exception):
    pass


async def _no_body() -> Message:
    return {"type": "http.request", "body": b"", "more_body": False}


# module level: FastAPI reads these annotations as strings, in the module's namespace
BEARER = HTTPBearer(auto_error=False)
Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(BEARER)]
Uploads = Annotated[list[UploadFile], File(description="Corpus files to read.")]
STATUS = {InputError: 400, EmptyIndexError: 409, ProviderError: 502, ConfigError: 500}


def create_app(
    settings: Settings | dict[str, Any] | None = None, service: QAService | None = None
) -> FastAPI:
    """The API over ``service`` (one is made from ``settings`` when not given); the model and
    the index load while the server starts, so the first answer is as fast as the next."""
    settings = get_settings(settings)
    qa = service or QAService(settings)
    writes_open = settings.api_token is not None or is_loopback(settings.api_host)
    ingest_lock = threading.Lock()

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await asyncio.to_thread(qa.warm)
        yield

    api = FastAPI(
        title="abstract-qa",
        summary="Questions over research-paper abstracts, answered with real citations.",
        lifespan=lifespan,
    )
    api.add_middleware(BodyLimit, limit=int(settings.api_max_upload_mb * 1e6))

    @api.exception_handler(AQAError)
    async def library_error(_: Request, exc: AQAError) -> JSONResponse:
        status = next((code for kind, code in STATUS.items() if isinstance(exc, kind)), 500)
        if isinstance(exc, InputError) and str(exc).startswith("No paper with id"):
            status = 404
        return JSONResponse({"detail": str(exc)}, status_code=status)

    def check(request: AskRequest) -> None:
        if len(request.question) > settings.max_question_chars:
            raise HTTPException(
                422,
                detail=[{"loc": ["body", "question"], "type": "too_long",
                         "msg": f"The question is {len(request.question)} characters; the "
                         f"limit is {settings.max_question_chars} (AQA_MAX_QUESTION_CHARS)."}],
            )  # fmt: skip

    def may_write(credentials: Credentials) -> None:
        if not writes_open:
            raise HTTPException(
                403,
                "Ingest over HTTP is off: this server listens beyond loopback without a token. "
                "Set AQA_API_TOKEN and restart.",
            )
        token = settings.api_token
        if token is None:
            return
        given = credentials.credentials if credentials is not None else ""
        if not secrets.compare_digest(given.encode(), token.get_secret_value().encode()):
            raise HTTPException(
                401,
                "Send the token of AQA_API_TOKEN as 'Authorization: Bearer TOKEN'.",
                headers={"WWW-Authenticate": "Bearer"},
            )

    @api.get("/health")
    def health() -> dict[str, str]:
        """Answers once the model and the index are loaded."""
        return {"status": "ok"}

    @api.post("/ask")
    def ask(request: AskRequest) -> Answer:
        """The answer, with its citations checked against its sources."""
        check(request)
        return qa.ask(request.question, **request.options())

    @api.post("/ask/stream", response_class=EventSourceResponse)
    def ask_stream(request: AskRequest) -> EventSourceResponse:
        """Server-sent events: `piece` (answer text as it is written), then `answer` (the
        whole `Answer` as JSON); `error` instead if the question fails."""
        check(request)

        def events() -> Iterator[dict[str, str]]:
            try:
                for event in qa.stream(request.question, **request.options()):
                    if isinstance(event, Answer):
                        yield {"event": "answer", "data": event.model_dump_json()}
                    else:
                        yield {"event": "piece", "data": json.dumps(event)}
            except AQAError as exc:
                yield {"event": "error", "data": json.dumps({"detail": str(exc)})}

        return EventSourceResponse(events())

    @api.post("/search")
    def search(request: AskRequest) -> list[Source]:
        """The sources an answer would draw on, with their relevance; no answer."""
        check(request)
        options = request.options()
        options.pop("history")
        return qa.search(request.question, **options)

    @api.get("/papers/{paper_id:path}/related")
    def related(paper_id: str, k: Annotated[int, Query(ge=1, le=50)] = 5) -> list[Source]:
        """The papers nearest to this one."""
        return qa.related(paper_id, k)

    @api.get("/papers/{paper_id:path}")
    def paper(paper_id: str) -> Paper:
        """A paper as indexed, its abstract as the corpus gave it."""
        return qa.paper(paper_id)

    @api.get("/stats")
    def stats() -> IndexStats:
        """Papers, chunks, venues and years in the index."""
        return qa.retriever.index.stats()

    @api.post("/ingest", dependencies=[Depends(may_write)])
    def ingest(
        files: Annotated[list[UploadFile], File(description="Corpus files")],
    ) -> IngestReport:
        """Add or update papers from uploaded files (JSON Lines, JSON, CSV or the sample
        format, optionally gzipped). Problems name the uploaded file and line."""
        from ingest.pipeline import ingest as run_ingest

        folder = Path(tempfile.mkdtemp(prefix="aqa-upload-"))
        try:
            names: dict[str, str] = {}
            for i, upload in enumerate(files):
                name = PurePath(upload.filename or f"upload-{i}").name or f"upload-{i}"
                target = folder / f"{i:03d}-{name}"
                with target.open("wb") as out:
                    shutil.copyfileobj(upload.file, out)
                names[str(target)] = name
            with ingest_lock:  # one write session at a time
                report = run_ingest([folder], settings)
            for problem in [*report.skipped, *report.warnings]:
                problem.file = names.get(problem.file, PurePath(problem.file).name)
            return report
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    return api
