"""The MCP server (`abstract-qa mcp`, stdio): assistants and editors ask the index directly.

Tools: `ask` (a cited answer), `search` (the sources only), `table` (an evidence table: the
same short questions asked of many papers), `get_paper` (one paper by id) and
`feedback` (a user's rating of an answer, stored for the evaluation set). Each has typed
arguments with descriptions and returns the library's model as structured output. The reading
tools are annotated read-only and closed-world; `ask` is open-world (and not idempotent) when
its model runs on another machine; `feedback` writes, adding a rating each call. Resources:
`paper://{paper_id}` (one paper, JSON) and `corpus://stats`. Prompts: `literature_overview`
and `compare_methods`, which tell the assistant which tools to call and how to cite. Built on
the official `mcp` SDK; nothing is written to stdout but the protocol.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, ToolAnnotations
from pydantic import Field

from app.engine.service import QAService
from app.providers import answers_off_machine, embeds_off_machine
from core.errors import AQAError, InputError, PaperNotFoundError
from core.models import (
    MAX_COLUMNS,
    MAX_TABLE_ROWS,
    Answer,
    Feedback,
    FeedbackRecord,
    Filters,
    IndexStats,
    Mode,
    Paper,
    Rating,
    Source,
    Table,
    TableRequest,
)
from core.settings import Settings, get_settings

Question = Annotated[str, Field(min_length=1, description="The question, in words.")]
K = Annotated[int | None, Field(ge=1, le=50, description="Papers to retrieve (default 5).")]
Only = Annotated[
    Filters | None,
    Field(description="Only papers of these years, venues, decisions or authors (all optional)."),
]
Retrieval = Annotated[Mode, Field(description="hybrid (default), dense or bm25.")]
PaperId = Annotated[str, Field(description="A paper id, as citations give it.")]

CITE = (
    "Cite every claim by paper id in brackets, e.g. [paper_id]: `search` gives each source's "
    "paper_id, and `ask` cites by [n], which its citations map to paper ids. Cite only what "
    "the tools returned: the abstracts are the evidence, not your memory."
)

YEARS = re.compile(r"(\d{4})?(?:\s*(-|\u2013|to)\s*(\d{4})?)?")


def reads(title: str, open_world: bool = False) -> dict[str, Any]:
    """A read-only tool's title and hints. Open-world (it reaches another machine) also means
    not idempotent: the same call can answer differently."""
    hints = ToolAnnotations(
        title=title,
        read_only_hint=True,
        destructive_hint=False,
        idempotent_hint=not open_world,
        open_world_hint=open_world,
    )
    return {"title": title, "annotations": hints}


def year_filters(years: str) -> dict[str, int]:
    """The `filters` of a tool call for "2023", "2021-2024", "2021-" or "-2023"."""
    match = YEARS.fullmatch(years.strip())
    if not match or not (match[1] or match[3]):
        raise MCPError(INVALID_PARAMS, f"years {years!r}: give 2023, 2021-2024 or 2021-.")
    start, dash, end = match.groups()
    bounds = {"year_from": start, "year_to": end if dash else start}
    return {name: int(year) for name, year in bounds.items() if year}


@contextmanager
def told() -> Iterator[None]:
    """A library error reaches the assistant as the tool's error, its message saying the fix."""
    try:
        yield
    except AQAError as exc:
        raise ToolError(str(exc)) from exc


@contextmanager
def read_told() -> Iterator[None]:
    """A library error on reading a resource: not found (-32602) for a missing paper, with the
    id in the message; any other error's message as the read's error."""
    try:
        yield
    except PaperNotFoundError as exc:
        raise ResourceNotFoundError(str(exc)) from exc
    except AQAError as exc:
        raise ResourceError(str(exc)) from exc


def create_server(
    settings: Settings | dict[str, Any] | None = None, service: QAService | None = None
) -> MCPServer:
    settings = get_settings(settings)
    qa = service or QAService(settings)
    # a question leaves the machine when a remote model answers it or embeds it for the search
    searches_out = embeds_off_machine(qa.settings)
    answers_out = searches_out or answers_off_machine(qa.settings)
    server = MCPServer(
        name="abstract-qa",
        instructions="Answers questions about the indexed research-paper abstracts. Every "
        "claim in an answer cites a source by [n]; citations map to paper ids. An answer "
        "with abstained=true means the abstracts do not answer the question.",
    )

    def fits(question: str) -> str:
        if len(question) > settings.max_question_chars:
            raise InputError(
                f"The question is {len(question)} characters; the limit is "
                f"{settings.max_question_chars} (AQA_MAX_QUESTION_CHARS)."
            )
        return question

    @server.tool(**reads("Ask the papers", open_world=answers_out))
    def ask(
        question: Question, k: K = None, filters: Only = None, mode: Retrieval = "hybrid"
    ) -> Answer:
        """Answer a question from the indexed abstracts, every claim cited to a paper id."""
        with told():
            return qa.ask(fits(question), k=k, mode=mode, filters=filters)

    @server.tool(**reads("Search the papers", open_world=searches_out))
    def search(question: Question, k: K = None, filters: Only = None) -> list[Source]:
        """The papers (with the passages that matched) an answer would draw on; no answer."""
        with told():
            return qa.search(fits(question), k=k, filters=filters)

    @server.tool(**reads("Tabulate papers", open_world=answers_out))
    def table(
        columns: Annotated[
            list[str],
            Field(
                min_length=1,
                max_length=MAX_COLUMNS,
                description='Short questions asked of every paper: ["dataset", "main result"].',
            ),
        ],
        topic: Annotated[
            str | None, Field(description="A question or keywords: its papers are the rows.")
        ] = None,
        papers: Annotated[
            list[str] | None, Field(description="Paper ids to use as rows instead of a topic.")
        ] = None,
        rows: Annotated[
            int, Field(ge=1, le=MAX_TABLE_ROWS, description="Papers a topic gives.")
        ] = 10,
        filters: Only = None,
    ) -> Table:
        """An evidence table: each column asked of every paper, each cell the span of that
        paper's own abstract that answers (with its sentence and a confidence) or "not stated"
        (stated=false). Cite a cell by its row's paper_id."""
        with told():
            request = TableRequest(
                topic=topic,
                columns=columns,
                papers=papers or [],
                rows=rows,
                filters=filters or Filters(),
            )
            return qa.table(request)

    @server.tool(**reads("Read a paper"))
    def get_paper(paper_id: PaperId) -> Paper:
        """One paper as indexed: title, authors, year, venue, abstract."""
        with told():
            return qa.paper(paper_id)

    @server.tool(
        title="Rate an answer",
        annotations=ToolAnnotations(
            title="Rate an answer",
            read_only_hint=False,
            destructive_hint=False,
            idempotent_hint=False,
            open_world_hint=False,
        ),
    )
    def feedback(
        rating: Annotated[Rating, Field(description="up: the answer was right; down: it was not.")],
        question: Question,
        answer: Annotated[str, Field(description="The answer's text, as `ask` gave it.")] = "",
        standalone_question: Annotated[
            str | None,
            Field(description="The answer's `standalone_question` (a follow-up resolved)."),
        ] = None,
        filters: Annotated[
            Filters | None, Field(description="The answer's `filters` (as `ask` returned them).")
        ] = None,
        cited: Annotated[
            list[str] | None,
            Field(description="The paper ids the answer cites (its cited sources)."),
        ] = None,
        abstained: Annotated[bool, Field(description="The answer's `abstained`.")] = False,
        comment: Annotated[
            str | None, Field(max_length=4000, description="Why, in the user's words.")
        ] = None,
    ) -> FeedbackRecord:
        """Record the user's verdict on an answer `ask` gave, when they say it helped or was
        wrong: the team's evaluation set grows from these ratings."""
        with told():
            return qa.rate(
                Feedback(
                    rating=rating,
                    comment=comment,
                    question=question,
                    standalone_question=standalone_question,
                    answer=answer,
                    cited=cited or [],
                    filters=filters or Filters(),
                    abstained=abstained,
                    provider=qa.provider.name,
                    model=qa.provider.model,
                )
            )

    @server.resource(
        "paper://{paper_id}",
        name="paper",
        title="Paper",
        description="One indexed paper as JSON: title, authors, year, venue, URL, keywords, "
        "decision and the abstract as the corpus gave it. The id is a citation's paper_id "
        "(percent-encode a / in it).",
        mime_type="application/json",
    )
    def paper(paper_id: str) -> Paper:
        with read_told():
            return qa.paper(paper_id)

    @server.resource(
        "corpus://stats",
        name="stats",
        title="Corpus statistics",
        description="What the index holds, as JSON: papers and chunks, papers per venue and per "
        "year, and the embedding model that built it.",
        mime_type="application/json",
    )
    def stats() -> IndexStats:
        with read_told():
            return qa.retriever.index.stats()

    @server.prompt(title="Literature overview")
    def literature_overview(
        topic: Annotated[str, Field(min_length=1, description="The topic, in a few words.")],
        years: Annotated[
            str | None, Field(description="Only these years: 2023, 2021-2024 or 2021-.")
        ] = None,
    ) -> str:
        """An overview of what the indexed papers say on a topic, grouped by approach, cited."""
        filters = year_filters(years) if years else {}
        within = f" ({years.strip()})" if years else ""
        given = f", filters {json.dumps(filters)}" if filters else ""
        return (
            f"Write a literature overview of {topic}{within} from the indexed abstracts, using "
            "the abstract-qa tools.\n\n"
            f'1. Call `search` with question "{topic}", k 15{given}, to see which papers the '
            "index holds on it. If none is on the topic, say so and stop.\n"
            f'2. Call `ask` with question "What are the main approaches to {topic}?"{given}, '
            "and once more for any open question the papers raise. An answer with "
            "abstained=true means the abstracts do not say: report that, do not fill it in.\n"
            "3. Call `get_paper` for any paper you describe beyond its matched passage.\n\n"
            "Structure the overview as: a summary paragraph; one section per approach or "
            "theme, each paper in a sentence on what it does and finds; trends across years "
            f"and venues; open problems; then the papers cited (id, title, year, venue). {CITE}"
        )

    @server.prompt(title="Compare two methods")
    def compare_methods(
        method_a: Annotated[str, Field(min_length=1, description="The first method's name.")],
        method_b: Annotated[str, Field(min_length=1, description="The second method's name.")],
    ) -> str:
        """A side-by-side comparison of two named methods from the indexed papers, cited."""
        return (
            f"Compare {method_a} and {method_b} from the indexed abstracts, using the "
            "abstract-qa tools.\n\n"
            f'1. Call `search` with question "{method_a}", k 8, and again with "{method_b}", '
            "to find the papers that propose, use or evaluate each.\n"
            f'2. Call `ask` with question "How does {method_a} compare with {method_b}?", '
            f'then "What are the limitations of {method_a}?" and the same for {method_b}. '
            "An answer with abstained=true means the abstracts do not say.\n"
            "3. Call `get_paper` for a paper whose full abstract you need.\n\n"
            "If the index has no paper on one of the methods, say so rather than describing it "
            "from memory. Structure the result as: a two-sentence verdict; a table with one row "
            "each for the problem addressed, the key idea, assumptions or requirements, "
            "reported results and limitations, and one column per method; when to choose "
            f"which; then the papers cited (id, title, year). {CITE}"
        )

    return server


def main() -> None:
    """Load the model and the index, then serve MCP over stdio until the client hangs up."""
    service = QAService(get_settings())
    service.warm()
    create_server(service.settings, service).run("stdio")
