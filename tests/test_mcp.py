"""The MCP server over stdio, driven by the official SDK's own client against a real index.

The server starts once (it loads the model): one session makes every request, and the tests
read its answers. Which hints `ask` carries is checked in-process, with no model called."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, TextContent, TextResourceContents

from app.fronts.mcp_server import create_server
from core.models import Answer, FeedbackRecord, IndexStats, Paper, Source, Table
from ingest.read import read_paths
from store.feedback import FeedbackStore
from tests.conftest import EXE, ROOT, SAMPLE, assert_citations_real, paper_id_containing

DASHA = "We develop and analyze DASHA"
Test = TypeVar("Test", bound=Callable[..., Any])


def served(test: Test) -> Test:
    """A test that reads the real server's session (it starts a process that loads the model)."""
    return pytest.mark.slow(pytest.mark.server(test))


async def refusal(request: Awaitable[Any]) -> MCPError:
    """The protocol error the server answers a request with."""
    try:
        await request
    except MCPError as exc:
        return exc
    pytest.fail("the request was answered, not refused")


async def one_session(data_dir: Path) -> dict[str, Any]:
    """Every list, call, read and prompt the tests check, in order, in one server session."""
    dasha = paper_id_containing(DASHA)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AQA_", "OPENAI_"))}
    env |= {"AQA_DATA_DIR": str(data_dir), "HF_HUB_OFFLINE": "1"}
    params = StdioServerParameters(command=str(EXE), args=["mcp"], env=env, cwd=ROOT)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        year_2024 = {"year_from": 2024}
        return {
            "tools": await session.list_tools(),
            "asked": await session.call_tool("ask", {"question": "What is DASHA?", "k": 3}),
            "found": await session.call_tool(
                "search", {"question": "federated learning", "k": 4, "filters": year_2024}
            ),
            "paper": await session.call_tool("get_paper", {"paper_id": dasha}),
            "table": await session.call_tool(
                "table",
                {"topic": "federated learning", "columns": ["dataset", "main result"], "rows": 3},
            ),
            "bad_table": await session.call_tool(
                "table", {"papers": ["no-such-paper"], "columns": ["dataset"]}
            ),
            "missing": await session.call_tool("get_paper", {"paper_id": "no-such-paper"}),
            "refused": await session.call_tool("ask", {"question": "What do honeybees eat?"}),
            "templates": await session.list_resource_templates(),
            "read": await session.read_resource(f"paper://{dasha}"),
            "unread": await refusal(session.read_resource("paper://no-such-paper")),
            "resources": await session.list_resources(),
            "stats": await session.read_resource("corpus://stats"),
            "prompts": await session.list_prompts(),
            "overview": await session.get_prompt(
                "literature_overview", {"topic": "federated learning", "years": "2023-2024"}
            ),
            "comparison": await session.get_prompt(
                "compare_methods", {"method_a": "DASHA", "method_b": "MARINA"}
            ),
            "bad_years": await refusal(
                session.get_prompt("literature_overview", {"topic": "GANs", "years": "recent"})
            ),
            "rated": await session.call_tool(
                "feedback",
                {
                    "rating": "down",
                    "question": "What is DASHA?",
                    "answer": "DASHA is a method.",
                    "cited": [dasha],
                    "comment": "It does not say what it improves on.",
                    "filters": {"year_from": 2023},
                },
            ),
            "bad_rating": await session.call_tool(
                "feedback", {"rating": "meh", "question": "What is DASHA?"}
            ),
        }


@pytest.fixture(scope="module")
def seen(index: Path) -> dict[str, Any]:
    """The session, over a copy of the sample index (a rating is written to its data dir)."""
    return asyncio.run(one_session(index))


def text_of(contents: Any) -> str:
    """The text of a one-part resource or prompt message."""
    assert isinstance(contents, TextResourceContents | TextContent)
    return contents.text


@served
def test_an_assistant_asks_searches_and_reads_a_paper(seen: dict[str, Any]) -> None:
    dasha = paper_id_containing(DASHA)
    by_name = {t.name: t for t in seen["tools"].tools}
    assert set(by_name) == {"ask", "search", "table", "get_paper", "feedback"}
    ask_schema = by_name["ask"].input_schema
    assert ask_schema["required"] == ["question"]
    assert "description" in ask_schema["properties"]["question"]
    assert by_name["ask"].output_schema is not None  # structured output, typed

    asked = seen["asked"]
    answer = Answer.model_validate(asked.structured_content)
    assert not asked.is_error and not answer.abstained
    assert answer.citations[0].paper_id == dasha
    assert_citations_real(answer)

    sources = [Source.model_validate(s) for s in seen["found"].structured_content["result"]]
    assert len(sources) == 4 and all(s.year == 2024 for s in sources)

    assert Paper.model_validate(seen["paper"].structured_content).paper_id == dasha
    missing = seen["missing"]
    assert missing.is_error and "No paper with id" in missing.content[0].text
    assert Answer.model_validate(seen["refused"].structured_content).abstained


@served
def test_an_assistant_fills_an_evidence_table(seen: dict[str, Any]) -> None:
    table = Table.model_validate(seen["table"].structured_content)
    assert table.columns == ["dataset", "main result"] and 1 <= len(table.rows) <= 3
    for row in table.rows:
        assert [c.column for c in row.cells] == table.columns
        for cell in row.cells:  # a stated cell quotes its own paper's abstract
            assert not cell.stated or (cell.quote and cell.quote in row.abstract)
    bad = seen["bad_table"]
    assert bad.is_error and "no-such-paper" in bad.content[0].text


@served
def test_every_tool_is_titled_closed_world_offline_and_only_feedback_writes(
    seen: dict[str, Any],
) -> None:
    for tool in seen["tools"].tools:
        hints = tool.annotations
        assert tool.title and hints is not None and hints.title == tool.title
        assert hints.destructive_hint is False and hints.open_world_hint is False, tool.name
        # feedback adds a rating: it writes, and twice is two ratings
        writes = tool.name == "feedback"
        assert hints.read_only_hint is not writes and hints.idempotent_hint is not writes


@served
def test_an_assistant_records_a_users_rating(seen: dict[str, Any], index: Path) -> None:
    rated = seen["rated"]
    assert not rated.is_error
    record = FeedbackRecord.model_validate(rated.structured_content)
    (stored,) = FeedbackStore(index).all()
    assert stored == record
    assert (stored.rating, stored.cited) == ("down", [paper_id_containing(DASHA)])
    assert stored.comment == "It does not say what it improves on."
    assert stored.provider == "extractive" and stored.index
    assert stored.filters.year_from == 2023  # asked again as it was asked
    bad = seen["bad_rating"]
    assert bad.is_error and "rating" in bad.content[0].text


@served
def test_a_client_browses_papers_and_the_corpus(seen: dict[str, Any]) -> None:
    (template,) = seen["templates"].resource_templates
    assert template.uri_template == "paper://{paper_id}"
    assert template.mime_type == "application/json" and template.description

    (read,) = seen["read"].contents
    assert read.mime_type == "application/json"
    paper = Paper.model_validate_json(text_of(read))
    assert paper.paper_id == paper_id_containing(DASHA) and DASHA in paper.abstract

    unread = seen["unread"]
    assert unread.code == INVALID_PARAMS and "'no-such-paper'" in unread.message

    (stats_resource,) = seen["resources"].resources
    assert str(stats_resource.uri) == "corpus://stats"
    assert stats_resource.mime_type == "application/json"
    stats = IndexStats.model_validate_json(text_of(seen["stats"].contents[0]))
    assert stats.papers == len(read_paths([SAMPLE]).papers) and stats.chunks >= stats.papers


@served
def test_the_prompts_tell_the_assistant_which_tools_to_call(seen: dict[str, Any]) -> None:
    arguments = {
        p.name: {a.name: a.required for a in p.arguments or []} for p in seen["prompts"].prompts
    }
    assert arguments == {
        "literature_overview": {"topic": True, "years": False},
        "compare_methods": {"method_a": True, "method_b": True},
    }
    assert all(p.title and p.description for p in seen["prompts"].prompts)

    (overview,) = seen["overview"].messages
    text = text_of(overview.content)
    assert overview.role == "user"
    assert '`search` with question "federated learning"' in text and "`ask`" in text
    assert '"year_from": 2023, "year_to": 2024' in text and "paper id" in text

    (comparison,) = seen["comparison"].messages
    text = text_of(comparison.content)
    assert "`search`" in text and "How does DASHA compare with MARINA?" in text
    assert "paper id" in text

    bad_years = seen["bad_years"]
    assert bad_years.code == INVALID_PARAMS and "'recent'" in bad_years.message


@pytest.mark.parametrize(
    ("configured", "asks_out", "searches_out"),
    [
        ({}, False, False),  # extractive, offline
        ({"llm": "llamacpp"}, False, False),
        ({"llm": "openai", "openai_base_url": "http://localhost:11434/v1"}, False, False),
        ({"llm": "openai", "openai_base_url": "http://[::1]:8080/v1"}, False, False),
        ({"llm": "openai", "openai_base_url": "https://llm.example.org/v1"}, True, False),
        ({"openai_api_key": "sk-test"}, True, False),  # auto: api.openai.com
        # remote embeddings: every search sends the question out, whoever answers it
        ({"llm": "extractive", "embeddings": "openai", "openai_api_key": "sk-test"}, True, True),
    ],
)
def test_a_tool_is_open_world_only_when_it_sends_the_question_off_the_machine(
    configured: dict[str, str], asks_out: bool, searches_out: bool
) -> None:
    """The server is built and listed in-process: no model is loaded and none is called."""
    tools = {t.name: t.annotations for t in asyncio.run(create_server(configured).list_tools())}
    for name, out in (("ask", asks_out), ("search", searches_out), ("get_paper", False)):
        hints = tools[name]
        assert hints is not None and hints.read_only_hint and hints.destructive_hint is False
        assert hints.open_world_hint is out and hints.idempotent_hint is not out, name
