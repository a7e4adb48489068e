"""The MCP server (`abstract-qa mcp`, stdio): assistants and editors ask the index directly.

Tools: `ask` (a cited answer), `search` (the sources only) and `get_paper` (one paper by id).
Each has typed arguments with descriptions and returns the library's model as structured
output. Built on the official `mcp` SDK; nothing is written to stdout but the protocol.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from app.service import QAService
from core.errors import AQAError, InputError
from core.models import Answer, Filters, Mode, Paper, Source
from core.settings import Settings, get_settings

Question = Annotated[str, Field(min_length=1, description="The question, in words.")]
K = Annotated[int | None, Field(ge=1, le=50, description="Papers to retrieve (default 5).")]
Only = Annotated[
    Filters | None,
    Field(description="Only papers of these years, venues, decisions or authors (all optional)."),
]
Retrieval = Annotated[Mode, Field(description="hybrid (default), dense or bm25.")]


@contextmanager
def told() -> Iterator[None]:
    """A library error reaches the assistant as the tool's error, its message saying the fix."""
    try:
        yield
    except AQAError as exc:
        raise ToolError(str(exc)) from exc


def create_server(
    settings: Settings | dict[str, Any] | None = None, service: QAService | None = None
) -> MCPServer:
    settings = get_settings(settings)
    qa = service or QAService(settings)
    server = MCPServer(
        name="abstract-qa",
        instructions="Answers questions about the indexed research-paper abstracts. Every "
        "claim in an answer cites a source by [n]; citations map to paper ids. An answer "
        "with abstained=true means the abstracts do not answer the question.",
    )

    def options(question: str, filters: Filters | None) -> dict[str, Any]:
        """The filters as `QAService` options, once the question is known to fit."""
        if len(question) > settings.max_question_chars:
            raise InputError(
                f"The question is {len(question)} characters; the limit is "
                f"{settings.max_question_chars} (AQA_MAX_QUESTION_CHARS)."
            )
        given = filters or Filters()
        return {"year_from": given.year_from, "year_to": given.year_to, "venue": given.venues,
                "decision": given.decisions, "authors": given.authors}  # fmt: skip

    @server.tool()
    def ask(
        question: Question, k: K = None, filters: Only = None, mode: Retrieval = "hybrid"
    ) -> Answer:
        """Answer a question from the indexed abstracts, every claim cited to a paper id."""
        with told():
            return qa.ask(question, k=k, mode=mode, **options(question, filters))

    @server.tool()
    def search(question: Question, k: K = None, filters: Only = None) -> list[Source]:
        """The papers (with the passages that matched) an answer would draw on; no answer."""
        with told():
            return qa.search(question, k=k, **options(question, filters))

    @server.tool()
    def get_paper(
        paper_id: Annotated[str, Field(description="A paper id, as citations give it.")],
    ) -> Paper:
        """One paper as indexed: title, authors, year, venue, abstract."""
        with told():
            return qa.paper(paper_id)

    return server


def main() -> None:
    """Load the model and the index, then serve MCP over stdio until the client hangs up."""
    service = QAService(get_settings())
    service.warm()
    create_server(service.settings, service).run("stdio")
