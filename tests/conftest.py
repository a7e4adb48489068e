"""Every test runs against its own data directory and a clean AQA_/OPENAI_ environment."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app.settings import Settings, get_settings

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "data" / "sample"
SHARED_CORPUS = ROOT.parent / "shared" / "data" / "ml-abstracts.jsonl.gz"


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for key in list(os.environ):
        if key.startswith(("AQA_", "OPENAI_")):
            monkeypatch.delenv(key)
    data_dir = tmp_path / "aqa-data"
    monkeypatch.setenv("AQA_DATA_DIR", str(data_dir))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)  # so no developer's .env is read
    return data_dir


@pytest.fixture
def settings(isolated_env: Path) -> Settings:
    return get_settings()
