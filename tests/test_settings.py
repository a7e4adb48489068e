"""One settings model, documented field by field, and strict about typos."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.errors import ConfigError
from core.settings import Settings, get_settings
from tests.conftest import ROOT


def env_name(field: str) -> str:
    return field.upper() if field.startswith("openai_") else f"AQA_{field.upper()}"


@pytest.mark.parametrize("field", sorted(Settings.model_fields))
def test_every_setting_is_documented(field: str) -> None:
    assert Settings.model_fields[field].description
    assert env_name(field) in (ROOT / ".env.example").read_text()
    assert f"`{env_name(field)}`" in (ROOT / "README.md").read_text()


def test_env_is_read_and_typos_are_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AQA_TOP_K", "7")
    assert get_settings().top_k == 7
    monkeypatch.setenv("AQA_TOP_KK", "3")
    with pytest.raises(ConfigError, match="AQA_TOP_KK"):
        get_settings()
    monkeypatch.delenv("AQA_TOP_KK")
    monkeypatch.setenv("AQA_TOP_K", "zero")
    with pytest.raises(ConfigError, match="top_k"):
        get_settings()


def test_dotenv_file_in_the_working_directory(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("AQA_LLM=extractive\nOPENAI_API_KEY=sk-from-dotenv\n")
    settings = get_settings()
    assert settings.llm == "extractive"
    assert settings.openai_api_key is not None
    assert settings.openai_api_key.get_secret_value() == "sk-from-dotenv"
    assert "sk-from-dotenv" not in repr(settings) and "sk-from-dotenv" not in str(settings)
