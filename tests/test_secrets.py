"""A canary API key never shows up in what the product prints, logs, stores or displays."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from core.settings import Settings, get_settings
from tests.conftest import EXE, ROOT, SAMPLE, free_port

CANARY = "sk-canary-7f3a9c2e5b1d4f6a8e0c"


def leaks(text: str) -> bool:
    """The key, or its distinctive tail (services mask the head), appears in ``text``."""
    return CANARY in text or CANARY[-12:] in text


def test_settings_hold_the_key_but_never_show_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    settings = get_settings()
    assert settings.openai_api_key is not None
    assert settings.openai_api_key.get_secret_value() == CANARY
    for shown in (
        repr(settings),
        str(settings),
        settings.model_dump_json(),
        json.dumps(settings.model_dump(), default=str),
    ):
        assert not leaks(shown)


@pytest.mark.slow
def test_cli_output_debug_logs_and_the_index_never_hold_the_key(
    tmp_path: Path, sample_settings: Settings
) -> None:
    data = tmp_path / "index"
    shutil.copytree(sample_settings.data_dir, data)
    (tmp_path / ".env").write_text(f"OPENAI_API_KEY={CANARY}\n")  # where the README says
    env = {
        **os.environ,
        "AQA_DATA_DIR": str(data),
        "OPENAI_BASE_URL": f"http://127.0.0.1:{free_port()}/v1",  # nobody listens
        "AQA_LLM_MAX_RETRIES": "0",
        "OPENAI_LOG": "debug",  # the openai client's own debug logging
    }
    outputs = []
    for args in (
        ["ingest", str(SAMPLE), "--json"],
        ["stats", "--json"],
        ["ask", "What is DASHA?", "--json"],
        ["ask", "What is DASHA?"],
    ):
        done = subprocess.run(
            [str(EXE), *args], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300
        )
        outputs.append(done)
        assert not leaks(done.stdout + done.stderr), args
    assert outputs[2].returncode != 0 and "Cannot reach" in outputs[2].stderr  # the key was used
    for path in data.rglob("*"):
        if path.is_file():
            assert CANARY.encode() not in path.read_bytes(), path


def protos(node: Any) -> Iterator[Any]:
    if getattr(node, "proto", None) is not None:
        yield node.proto
    for child in getattr(node, "children", {}).values():
        yield from protos(child)


@pytest.mark.slow
def test_the_app_never_displays_the_key(
    monkeypatch: pytest.MonkeyPatch, sample_settings: Settings
) -> None:
    monkeypatch.setenv("AQA_DATA_DIR", str(sample_settings.data_dir))
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{free_port()}/v1")
    monkeypatch.setenv("AQA_LLM_MAX_RETRIES", "0")
    at = AppTest.from_file(str(ROOT / "app" / "ui" / "streamlit_app.py"), default_timeout=180)
    at.run()
    at.chat_input[0].set_value("What is DASHA?").run()
    page = "\n".join(str(p) for p in protos(at._tree))
    assert "Cannot reach" in page, "the provider error is shown"
    assert not leaks(page)
    assert not leaks(repr(at.session_state))


def test_env_files_are_ignored_by_git_and_the_readme_says_where_keys_go() -> None:
    ignored = (ROOT / ".gitignore").read_text().split()
    assert ".env" in ignored
    if (ROOT / ".git").exists():
        check = subprocess.run(["git", "check-ignore", "-q", ".env"], cwd=ROOT)
        assert check.returncode == 0
    readme = (ROOT / "README.md").read_text()
    assert "OPENAI_API_KEY" in readme and ".env" in readme
    example = (ROOT / ".env.example").read_text()
    assert "OPENAI_API_KEY=" in example and "sk-" not in example.replace("sk-...", "")
