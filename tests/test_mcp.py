"""The MCP server over stdio, driven by the official SDK's own client against a real index."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from core.models import Answer, Paper, Source
from core.settings import Settings
from tests.conftest import EXE, ROOT, assert_citations_real, paper_id_containing

pytestmark = [pytest.mark.slow, pytest.mark.server]


async def session_calls(data_dir: Path, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AQA_", "OPENAI_"))}
    env |= {"AQA_DATA_DIR": str(data_dir), "HF_HUB_OFFLINE": "1"}
    params = StdioServerParameters(command=str(EXE), args=["mcp"], env=env, cwd=ROOT)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = await session.list_tools()
        results: list[Any] = [tools]
        for name, arguments in calls:
            results.append(await session.call_tool(name, arguments))
        return results


def test_an_assistant_asks_searches_and_reads_a_paper(sample_settings: Settings) -> None:
    dasha = paper_id_containing("We develop and analyze DASHA")
    tools, asked, found, paper, missing, refused = asyncio.run(
        session_calls(
            sample_settings.data_dir,
            [
                ("ask", {"question": "What is DASHA?", "k": 3}),
                (
                    "search",
                    {"question": "federated learning", "k": 4, "filters": {"year_from": 2024}},
                ),
                ("get_paper", {"paper_id": dasha}),
                ("get_paper", {"paper_id": "no-such-paper"}),
                ("ask", {"question": "What do honeybees eat?"}),
            ],
        )
    )
    by_name = {t.name: t for t in tools.tools}
    assert set(by_name) == {"ask", "search", "get_paper"}
    ask_schema = by_name["ask"].input_schema
    assert ask_schema["required"] == ["question"]
    assert "description" in ask_schema["properties"]["question"]
    assert by_name["ask"].output_schema is not None  # structured output, typed

    answer = Answer.model_validate(asked.structured_content)
    assert not asked.is_error and not answer.abstained
    assert answer.citations[0].paper_id == dasha
    assert_citations_real(answer)

    sources = [Source.model_validate(s) for s in found.structured_content["result"]]
    assert len(sources) == 4 and all(s.year == 2024 for s in sources)

    assert Paper.model_validate(paper.structured_content).paper_id == dasha
    assert missing.is_error and "No paper with id" in missing.content[0].text
    assert Answer.model_validate(refused.structured_content).abstained
