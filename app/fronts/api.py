"""The HTTP API (`abstract-qa serve`): the library's calls over HTTP, with the same models.

Loopback by default. Ingest over HTTP needs the bearer token of AQA_API_TOKEN when one is set,
and is refused when the server listens beyond loopback without one. Bodies over
AQA_API_MAX_UPLOAD_MB and questions over AQA_MAX_QUESTION_CHARS get a 413 or 422 that says so.
Every error answers with an `ErrorBody` (``detail``, the message; ``error``, a stable code),
but a 422, which keeps FastAPI's validation shape; the OpenAPI schema (/docs) lists each route's
statuses and codes.
"""

from __future__ import annotations

import asyncio
import inspect
import ipaddress
import json
import secrets
import shutil
import sys
import tempfile
import threading
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager
from functools import cache
from itertools import chain, groupby
from pathlib import Path, PurePath
from typing import Annotated, Any, ClassVar, Literal

from fastapi import Depends, FastAPI, File, Form, HTTPException, Query, Request, UploadFile
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ConfigDict, Field, Strict, WithJsonSchema, field_validator
from sse_starlette.sse import EventSourceResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.engine.export import (
    EXPORT_FORMATS,
    MEDIA_TYPES,
    SUFFIXES,
    TABLE_FORMATS,
    TABLE_MEDIA_TYPES,
    TABLE_SUFFIXES,
    ExportFormat,
    TableFormat,
    export,
    export_table,
)
from app.engine.service import QAService
from core.errors import (
    ERRORS,
    AQAError,
    ConfigError,
    IndexMismatchError,
    InputError,
    NoMatchError,
    PaperNotFoundError,
    ProviderError,
    StoreError,
    StoreUnreachableError,
)
from core.models import (
    Answer,
    Feedback,
    FeedbackRecord,
    FilterKind,
    Filters,
    IndexStats,
    IngestReport,
    Mode,
    Paper,
    Source,
    Table,
    TableRequest,
)
from core.settings import Settings, get_settings
from ingest.schemas import FormatName


class AskRequest(BaseModel):
    """A question and the options of `QAService.stream`."""

    # strict: a boolean is not a year nor a k, a number is not a string. FastAPI validates the
    # parsed JSON in Python mode, where a JSON array is a list: a turn's pair takes one as well.
    model_config = ConfigDict(extra="forbid", strict=True)

    question: str = Field(
        min_length=1,
        description="The question, in words: at least one printable character that is not a "
        "space (else a 400), at most AQA_MAX_QUESTION_CHARS characters (else a 422).",
    )
    history: list[Annotated[tuple[str, str], Strict(False)]] = Field(
        default_factory=list, description="Earlier (question, answer) turns, oldest first."
    )
    k: int | None = Field(default=None, ge=1, le=100, description="Papers to retrieve.")
    filters: Filters = Field(
        default_factory=Filters,
        description="Only papers of these years, venues, decisions or authors (all optional; "
        "they win over filters the question states). The same record as an answer's "
        "`filters`.",
    )
    ignore: list[FilterKind] = Field(
        default_factory=list, description="Filters not to read from the question."
    )
    mode: Mode = Field(default="hybrid", description="How retrieval ranks.")

    @field_validator("k", mode="before")
    @classmethod
    def _whole(cls, value: object) -> object:
        """58.0 as the integer 58, as JSON Schema reads it (a strict int takes no float)."""
        return int(value) if isinstance(value, float) and value.is_integer() else value

    def options(self) -> dict[str, Any]:
        """The options of `QAService.stream`: the filters go as the one record they are."""
        return {name: getattr(self, name) for name in type(self).model_fields if name != "question"}


EXPORT_SCHEMAS: dict[ExportFormat, dict[str, Any]] = {
    "markdown": {"type": "string"},
    "bibtex": {"type": "string"},
    "csl-json": {"type": "array", "items": {"type": "object"}},
    "json": {"$ref": "#/components/schemas/Answer"},
}


def exported(formats: tuple[ExportFormat, ...], what: str) -> dict[int | str, dict[str, Any]]:
    """The documented 200 of an export route: one media type per format."""
    content = {MEDIA_TYPES[f].split(";")[0]: {"schema": EXPORT_SCHEMAS[f]} for f in formats}
    return {200: {"description": what, "content": content}}


TABLE_SCHEMAS: dict[TableFormat, dict[str, Any]] = {
    "csv": {"type": "string"},
    "markdown": {"type": "string"},
    "xlsx": {"type": "string", "format": "binary"},
    "json": {"$ref": "#/components/schemas/Table"},
    "bibtex": {"type": "string"},
}


def tabled(what: str) -> dict[int | str, dict[str, Any]]:
    """The documented 200 of the table export: one media type per format."""
    content = {
        TABLE_MEDIA_TYPES[f].split(";")[0]: {"schema": TABLE_SCHEMAS[f]} for f in TABLE_FORMATS
    }
    return {200: {"description": what, "content": content}}


def download(text: str, fmt: ExportFormat, name: str) -> Response:
    suffix = next(s for s, f in SUFFIXES.items() if f == fmt)
    headers = {"Content-Disposition": f'attachment; filename="{name}{suffix}"'}
    return Response(text, media_type=MEDIA_TYPES[fmt], headers=headers)


class ErrorBody(BaseModel):
    """The body of every error response but a 422 (FastAPI's validation shape)."""

    detail: str = Field(description="What went wrong, and what to do about it.")
    error: str = Field(description="A stable code: each status lists the ones it carries.")


class APIError(HTTPException):
    """A refusal of the HTTP layer itself (the library's failures are `AQAError`s), answered
    with an `ErrorBody` as they are; each kind names its ``code`` and ``http_status``."""

    code: ClassVar[str]
    http_status: ClassVar[int]

    def __init__(self, detail: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(self.http_status, detail, headers)


class Unauthorized(APIError):
    """The bearer token of AQA_API_TOKEN is missing or wrong."""

    code = "unauthorized"
    http_status = 401


class IngestOff(APIError):
    """Writing over HTTP (ingest, feedback) is off: the server listens beyond loopback without
    AQA_API_TOKEN."""

    code = "ingest_off"
    http_status = 403


class BodyTooLarge(APIError):
    """The request body is over AQA_API_MAX_UPLOAD_MB."""

    code = "body_too_large"
    http_status = 413


class FrameworkError(APIError):
    """FastAPI's own refusal: a body it cannot parse (or an unknown path, 404, or method, 405)."""

    code = "http_error"
    http_status = 400


Documented = type[AQAError] | type[APIError]
INDEX: tuple[Documented, ...] = (
    *(error for error in ERRORS if issubclass(error, StoreError)),
    ConfigError,  # a setting the store or the embedding model cannot work with
)
"""What a route that opens the index may meet."""
BODY: tuple[Documented, ...] = (FrameworkError, BodyTooLarge)
"""What a route that reads a body may meet, besides a 422."""


def described(error: Documented) -> str:
    return " ".join((inspect.getdoc(error) or "").split())


def responses(*errors: Documented) -> dict[int | str, dict[str, Any]]:
    """A route's OpenAPI `responses` for ``errors``: an `ErrorBody` per status, described by
    the code and docstring of each error answered with it."""
    by_status: dict[int, list[Documented]] = {}
    for error in errors:
        by_status.setdefault(error.http_status, []).append(error)
    return {
        status: {
            "model": ErrorBody,
            "description": "\n".join(f"- `{e.code}`: {described(e)}" for e in kinds),
        }
        for status, kinds in sorted(by_status.items())
    }


@cache
def printable_class() -> str:
    """A regex class of the characters `clean_question` keeps (Python's printable ones, spaces
    aside), as ranges of literal characters: the one spelling of every code point that Python's,
    Rust's and ECMAScript's regexes share."""

    def literal(code: int) -> str:
        return "\\" + chr(code) if chr(code) in "\\[]^-" else chr(code)

    def kept(code: int) -> bool:
        return chr(code).isprintable() and not chr(code).isspace()

    def span(run: list[int]) -> str:
        return literal(run[0]) if len(run) == 1 else f"{literal(run[0])}-{literal(run[-1])}"

    runs = (list(run) for keep, run in groupby(range(sys.maxunicode + 1), kept) if keep)
    return "[" + "".join(span(run) for run in runs) + "]"


def error_response(
    status: int, code: str, detail: str, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(ErrorBody(detail=detail, error=code).model_dump(), status, headers)


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
        detail = (
            f"The request body is over {self.limit / 1e6:g} MB: send less, or raise "
            "AQA_API_MAX_UPLOAD_MB."
        )
        response = error_response(BodyTooLarge.http_status, BodyTooLarge.code, detail)
        await response({"type": "http"}, _no_body, send)


class _TooLarge(Exception):
    pass


async def _no_body() -> Message:
    return {"type": "http.request", "body": b"", "more_body": False}


# module level: FastAPI reads these annotations as strings, in the module's namespace
BEARER = HTTPBearer(auto_error=False)
Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(BEARER)]
# `format: binary` beside OpenAPI 3.1's content type: older tools, and schemathesis' negative
# cases, take only it for "any bytes" (a file cannot have the wrong JSON type)
BINARY = {"type": "string", "format": "binary", "contentMediaType": "application/octet-stream"}
Upload = Annotated[UploadFile, WithJsonSchema(BINARY)]
Uploads = Annotated[list[Upload], File(min_length=1, description="Corpus files to read.")]


async def no_blank_format(request: Request) -> None:
    """FastAPI reads an empty form field as absent, so ``format=`` would quietly mean `auto`;
    the schema's enum refuses it, and so does the server (a 422 naming the field)."""
    if (await request.form()).get("format") == "":
        raise RequestValidationError(
            [{"loc": ("body", "format"), "type": "enum", "input": "",
              "msg": "format is empty: give one of the formats listed, or leave the field "
              "out (or send `auto`) to tell each file's format by its name and content."}]
        )  # fmt: skip


def write_guard(settings: Settings) -> tuple[list[Any], tuple[Documented, ...]]:
    """The writing routes' dependencies (ingest, feedback) and the refusals they document: the
    bearer token when one is set (only then does the schema declare the scheme), none on
    loopback without one, and writes off beyond loopback without one."""
    if settings.api_token is not None:
        expected = settings.api_token.get_secret_value().encode()

        def token_given(credentials: Credentials) -> None:
            given = credentials.credentials.encode() if credentials is not None else b""
            if not secrets.compare_digest(given, expected):
                raise Unauthorized(
                    "Send the token of AQA_API_TOKEN as 'Authorization: Bearer TOKEN'.",
                    {"WWW-Authenticate": "Bearer"},
                )

        return [Depends(token_given)], (Unauthorized,)
    if is_loopback(settings.api_host):
        return [], ()

    def ingest_off() -> None:
        raise IngestOff(
            "Writing over HTTP (ingest, feedback) is off: this server listens beyond loopback "
            "without a token. Set AQA_API_TOKEN and restart."
        )

    return [Depends(ingest_off)], (IngestOff,)


def create_app(
    settings: Settings | dict[str, Any] | None = None, service: QAService | None = None
) -> FastAPI:
    """The API over ``service`` (one is made from ``settings`` when not given); the model and
    the index load while the server starts, so the first answer is as fast as the next."""
    settings = get_settings(settings)
    qa = service or QAService(settings)
    guard, refusals = write_guard(settings)
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
        return error_response(exc.http_status, exc.code, str(exc))

    @api.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = exc.code if isinstance(exc, APIError) else FrameworkError.code
        return error_response(exc.status_code, code, exc.detail, exc.headers)

    def check(request: AskRequest) -> None:
        if len(request.question) > settings.max_question_chars:
            raise RequestValidationError(
                [{"loc": ("body", "question"), "type": "too_long",
                  "msg": f"The question is {len(request.question)} characters; the limit is "
                  f"{settings.max_question_chars} (AQA_MAX_QUESTION_CHARS)."}]
            )  # fmt: skip

    asking = responses(InputError, *INDEX, ProviderError, *BODY)

    @api.get("/health")
    def health() -> dict[str, str]:
        """Answers once the model and the index are loaded."""
        return {"status": "ok"}

    @api.post("/ask", responses=asking)
    def ask(request: AskRequest) -> Answer:
        """The answer, with its citations checked against its sources."""
        check(request)
        return qa.ask(request.question, **request.options())

    @api.post("/ask/stream", response_class=EventSourceResponse, responses=asking)
    def ask_stream(request: AskRequest) -> EventSourceResponse:
        """Server-sent events: `piece` (answer text as it is written), then `answer` (the
        whole `Answer` as JSON). A failure before the first piece answers with its status, as
        /ask does; one after it, with an `error` event (an `ErrorBody` as JSON)."""
        check(request)
        stream = qa.stream(request.question, **request.options())
        first = next(stream)

        def events() -> Iterator[dict[str, str]]:
            try:
                for event in chain([first], stream):
                    if isinstance(event, Answer):
                        yield {"event": "answer", "data": event.model_dump_json()}
                    else:
                        yield {"event": "piece", "data": json.dumps(event)}
            except AQAError as exc:
                body = ErrorBody(detail=str(exc), error=exc.code)
                yield {"event": "error", "data": body.model_dump_json()}

        return EventSourceResponse(events())

    @api.post("/search", responses=asking)
    def search(request: AskRequest) -> list[Source]:
        """The sources an answer would draw on, with their relevance; no answer."""
        check(request)
        options = request.options()
        options.pop("history")
        return qa.search(request.question, **options)

    @api.post(
        "/ask/export",
        response_model=None,
        responses=exported(EXPORT_FORMATS, "The answer in the format asked for.") | asking,
    )
    def ask_export(
        request: AskRequest,
        format: Annotated[ExportFormat, Query(description="What to write.")] = "markdown",
        all_sources: Annotated[
            bool, Query(description="BibTeX/CSL-JSON: every source, not only the cited ones.")
        ] = False,
    ) -> Response:
        """The answer written out: Markdown (the answer with its markers, then each cited
        paper's title, authors, venue, year, links and supporting sentences), BibTeX or
        CSL-JSON of the cited papers (every source with `all_sources`), or the `Answer` as
        JSON."""
        check(request)
        answer = qa.ask(request.question, **request.options())
        return download(export([answer], format, qa.paper, all_sources), format, "answer")

    tabling = responses(InputError, PaperNotFoundError, NoMatchError, *INDEX, ProviderError, *BODY)

    @api.post("/table", responses=tabling)
    def table(request: TableRequest) -> Table:
        """An evidence table: each column (a short question: "dataset", "main result") asked of
        every row's paper, the rows being the topic's most relevant `rows` papers or the
        `papers` ids given. Each cell is the span of that paper's own abstract that answers,
        the sentence it came from (`quote`, with its offsets in the row's `abstract`) and a
        `confidence`, or "not stated" (`stated` false). Also `suggested_columns`."""
        return qa.table(request)

    @api.post("/table/stream", response_class=EventSourceResponse, responses=tabling)
    def table_stream(request: TableRequest) -> EventSourceResponse:
        """Server-sent events: a `row` event (a `TableRow` as JSON) as each row is filled,
        then `table` (the whole `Table`). A failure after the first row is an `error` event."""
        plan = qa.table_plan(request)

        def events() -> Iterator[dict[str, str]]:
            filled = []
            try:
                for row in plan.fill():
                    filled.append(row)
                    yield {"event": "row", "data": row.model_dump_json()}
                yield {"event": "table", "data": plan.result(filled, True).model_dump_json()}
            except AQAError as exc:
                body = ErrorBody(detail=str(exc), error=exc.code)
                yield {"event": "error", "data": body.model_dump_json()}

        return EventSourceResponse(events())

    @api.post(
        "/table/export",
        response_model=None,
        responses=tabled("The table in the format asked for.") | tabling,
    )
    def table_export(
        request: TableRequest,
        format: Annotated[TableFormat, Query(description="What to write.")] = "csv",
    ) -> Response:
        """The table written out: CSV or Excel (a line per paper: its metadata, then each
        column's answer, quote and confidence), Markdown, the `Table` as JSON, or BibTeX of the
        rows' papers."""
        suffix = next(s for s, f in TABLE_SUFFIXES.items() if f == format)
        return Response(
            export_table(qa.table(request), format),
            media_type=TABLE_MEDIA_TYPES[format],
            headers={"Content-Disposition": f'attachment; filename="table{suffix}"'},
        )

    @api.post(
        "/feedback",
        status_code=201,
        dependencies=guard,
        responses=responses(PaperNotFoundError, *INDEX, *BODY, *refusals),
    )
    def feedback(request: Feedback) -> FeedbackRecord:
        """Rate an answer: thumbs up or down, an optional comment, and the answer as `/ask`
        gave it (`Feedback.of` in Python builds this from an `Answer`; every cited id must be
        an indexed paper). Ratings become regression questions, so this write is guarded as
        ingest is. Stored under the server's data directory; `abstract-qa feedback export`
        turns the ratings into a question file."""
        return qa.rate(request)

    @api.get("/papers/{paper_id:path}/related", responses=responses(PaperNotFoundError, *INDEX))
    def related(paper_id: str, k: Annotated[int, Query(ge=1, le=50)] = 5) -> list[Source]:
        """The papers nearest to this one."""
        return qa.related(paper_id, k)

    @api.get("/papers/{paper_id:path}", responses=responses(PaperNotFoundError, *INDEX))
    def paper(paper_id: str) -> Paper:
        """A paper as indexed, its abstract as the corpus gave it."""
        return qa.paper(paper_id)

    @api.get("/stats", responses=responses(*INDEX))
    def stats() -> IndexStats:
        """Papers, chunks, venues and years in the index."""
        return qa.retriever.index.stats()

    @api.post(
        "/ingest",
        dependencies=[*guard, Depends(no_blank_format)],
        responses=responses(
            IndexMismatchError, StoreUnreachableError, ConfigError, *BODY, *refusals
        ),
    )
    def ingest(
        files: Uploads,
        format: Annotated[  # a form has no null: "auto" is the default
            Literal["auto", FormatName],
            Form(
                description="Read every file as this format, whatever its name; `auto` tells "
                "it by the file's name and content."
            ),
        ] = "auto",
    ) -> IngestReport:
        """Add or update papers from uploaded files: JSON Lines, JSON, CSV, the sample format,
        BibTeX, RIS, CSL-JSON, Zotero CSV, the arXiv snapshot, OpenAlex or Semantic Scholar,
        optionally gzipped; the format is told by the file's name and content unless `format`
        names it. Problems name the uploaded file and line."""
        from ingest.pipeline import beside_queries
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
                forced = None if format == "auto" else format
                report = beside_queries(lambda: run_ingest([folder], settings, forced=forced))
            for problem in [*report.skipped, *report.warnings, *report.merged]:
                problem.file = names.get(problem.file, PurePath(problem.file).name)
            report.formats = {
                names.get(file, PurePath(file).name): label
                for file, label in report.formats.items()
            }
            return report
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    # what this server takes as a question, which its settings and its Python decide: `check`
    # enforces the length, the service turns a question with nothing printable down with a 400
    question = api.openapi()["components"]["schemas"]["AskRequest"]["properties"]["question"]
    question |= {"maxLength": settings.max_question_chars, "pattern": printable_class()}
    return api
