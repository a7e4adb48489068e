"""The README's examples as a user pastes them, over the sample index: the Python block, the
shell commands that ask (each must exit 0, and `--json` must print an `Answer`), and the HTTP
request. (The LangChain example runs in tests/test_langchain.py.)"""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from app.fronts.cli import cli
from core.models import Answer
from core.settings import Settings
from tests.conftest import ROOT, assert_citations_real, paper_id_containing

README = (ROOT / "README.md").read_text()
DASHA = "We develop and analyze DASHA"


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, re.S)


def shell_asks() -> list[list[str]]:
    """Every `abstract-qa ask` or `related` line of the README's shell blocks, as arguments."""
    lines = [line for block in blocks("sh") for line in block.replace("\\\n", " ").splitlines()]
    commands = []
    for line in lines:
        words = shlex.split(line, comments=True)
        if words and words[0].endswith("abstract-qa") and words[1] in ("ask", "related"):
            commands.append(words[1:])
    return commands


@pytest.fixture
def sample_env(sample_settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Settings:
    monkeypatch.setenv("AQA_DATA_DIR", str(sample_settings.data_dir))
    return sample_settings


def test_the_readmes_python_example_runs(sample_env: Settings) -> None:
    import app

    block = next(b for b in blocks("python") if b.startswith("from app import ask"))
    namespace: dict[str, Any] = {}
    app._service.cache_clear()
    try:
        exec(block.replace("PAPER_ID", paper_id_containing(DASHA)), namespace)
    finally:
        app._service.cache_clear()
    answer = namespace["answer"]
    assert isinstance(answer, Answer) and not answer.abstained and answer.citations
    assert all(s.year is not None and s.year >= 2023 for s in answer.sources)
    assert_citations_real(answer)
    assert isinstance(namespace["event"], Answer)  # the stream ends with the answer


@pytest.mark.parametrize("command", shell_asks(), ids=" ".join)
def test_the_readmes_shell_commands_run(sample_env: Settings, command: list[str]) -> None:
    args = [paper_id_containing(DASHA) if a == "PAPER_ID" else a for a in command]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    if "--json" in args:
        answer = Answer.model_validate_json(result.stdout)
        assert answer.answer and answer.sources
    else:
        assert result.stdout.strip()


def test_the_readmes_http_request_is_answered(sample_env: Settings) -> None:
    from app.fronts.api import create_app

    [curl] = [b for b in blocks("sh") if b.startswith("curl")]
    body = json.loads(shlex.split(curl.replace("\\\n", " "))[-1])
    with TestClient(create_app()) as client:
        response = client.post("/ask", json=body)
    assert response.status_code == 200, response.text
    answer = Answer.model_validate(response.json())
    assert answer.filters.venues == ["ICLR"] and answer.filters.year_from == 2024
    assert answer.sources and all(s.year == 2024 for s in answer.sources)


def test_the_readme_shows_each_front_asking() -> None:
    """The commands above are what the README shows: none was lost in an edit."""
    asked = [" ".join(c) for c in shell_asks()]
    assert len(asked) >= 7 and any("--json" in c for c in asked)
    assert any(c.startswith("related") for c in asked)
