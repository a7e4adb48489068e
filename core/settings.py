"""The one settings model. Values come from the environment and `.env`, prefix ``AQA_``.

Every field is documented here and in `.env.example`; an unknown ``AQA_`` variable is an error,
so a typo never falls back silently to a default.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, Field, SecretStr, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from core.errors import ConfigError

ENV_PREFIX = "AQA_"


def _default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(base) / "abstract-qa"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_file=".env",
        env_file_encoding="utf-8",
        extra="forbid",
        validate_default=True,
        populate_by_name=True,
    )

    # --- storage -------------------------------------------------------------------------------
    data_dir: Path = Field(
        default_factory=_default_data_dir,
        description="Where the embedded Chroma index and the BM25 index live.",
    )
    collection: str = Field(
        default="abstracts",
        min_length=3,
        description="Chroma collection name (3+ characters).",
    )
    chroma_host: str | None = Field(
        default=None,
        description="Host of a Chroma server (`chroma run`). Unset: embedded Chroma in data_dir.",
    )
    chroma_port: int = Field(default=8000, description="Port of the Chroma server.")
    chroma_ssl: bool = Field(default=False, description="Use HTTPS to reach the Chroma server.")
    chroma_token: SecretStr | None = Field(
        default=None,
        description="Token sent with every request to the Chroma server (hosted Chroma, or a "
        "proxy that checks it). A secret: never printed.",
    )
    chroma_auth_header: str = Field(
        default="x-chroma-token",
        min_length=1,
        description="Header that carries AQA_CHROMA_TOKEN: `x-chroma-token` (Chroma's own), or "
        "`Authorization` to send it as `Bearer TOKEN`.",
    )

    # --- embeddings and chunking ----------------------------------------------------------------
    embeddings: Literal["local", "openai"] = Field(
        default="local",
        description="`local`: all-MiniLM-L6-v2 from the installed package, offline. "
        "`openai`: the OpenAI embeddings API (needs OPENAI_API_KEY).",
    )
    embedding_model: str | None = Field(
        default=None,
        description="Model name (openai) or sentence-transformers folder (local). "
        "Default: all-MiniLM-L6-v2 (local), text-embedding-3-small (openai).",
    )
    embed_batch_size: int = Field(
        default=16, ge=1, description="Texts per embedding call (16 measured fastest on CPU)."
    )
    chunk_tokens: int | None = Field(
        default=None,
        ge=32,
        description="Largest chunk in tiktoken tokens. Default: fitted to the embedding model's "
        "input window.",
    )
    chunk_overlap_tokens: int = Field(
        default=48, ge=0, description="Tokens of sentence overlap between consecutive chunks."
    )

    # --- answering -------------------------------------------------------------------------------
    llm: Literal["auto", "extractive", "openai", "llamacpp"] = Field(
        default="auto",
        description="Answer provider. `auto`: openai when OPENAI_API_KEY or OPENAI_BASE_URL is "
        "set, otherwise extractive (offline).",
    )
    llm_model: str = Field(default="gpt-4o-mini", description="Model name for the openai provider.")
    openai_api_key: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("AQA_OPENAI_API_KEY", "OPENAI_API_KEY"),
        description="OpenAI key (or any value an OpenAI-compatible server accepts).",
    )
    openai_base_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("AQA_OPENAI_BASE_URL", "OPENAI_BASE_URL"),
        description="Base URL of an OpenAI-compatible server (Ollama, vLLM, llama.cpp).",
    )
    llm_model_path: Path | None = Field(
        default=None, description="GGUF file for the llamacpp provider (pip install '.[llamacpp]')."
    )
    llm_max_tokens: int = Field(default=400, ge=16, description="Longest answer, in tokens.")
    llm_timeout: float = Field(default=60.0, gt=0, description="Seconds before a model call fails.")
    llm_max_retries: int = Field(
        default=3, ge=0, description="Retries with backoff on rate limits and transient errors."
    )
    fusion: Literal["rrf", "convex"] = Field(
        default="convex",
        description="How dense and BM25 rankings combine: reciprocal rank fusion or a weighted "
        "sum of scores (see docs/retrieval.md for the measurement).",
    )
    dense_weight: float = Field(
        default=0.7, ge=0.0, le=1.0, description="Weight of the dense side in the fusion."
    )
    top_k: int = Field(default=5, ge=1, le=100, description="Papers retrieved per question.")
    table_workers: int = Field(
        default=4, ge=1, le=32, description="Rows of an evidence table a chat model fills at once."
    )
    listing_top_k: int = Field(
        default=10,
        ge=1,
        le=100,
        description='Papers retrieved for a listing question ("which papers ...?"), one line '
        "each (see docs/benchmarks.md for the measurement).",
    )
    chunks_per_paper: int = Field(
        default=2,
        ge=1,
        le=10,
        description="Passages kept per paper, so no paper crowds out others.",
    )
    min_relevance: float | None = Field(
        default=None,
        ge=-1.0,
        le=3.0,
        description="Abstain when no source's relevance (cosine similarity + 0.5 x the share of "
        "the question's word weight it holds + 0.5 x the question's similarity to the corpus "
        "mean) reaches this. Unset: fitted to the index size, 0.17 + 0.137 x log10(chunks) "
        "(0.42 for the sample, 0.77 for 22k papers; docs/benchmarks.md).",
    )
    context_tokens: int = Field(
        default=3000, ge=200, description="Token budget for the sources block of a prompt."
    )

    # --- serving --------------------------------------------------------------------------------
    api_host: str = Field(
        default="127.0.0.1",
        description="Where `abstract-qa serve` listens. Beyond loopback, ingest over HTTP needs "
        "AQA_API_TOKEN.",
    )
    api_port: int = Field(default=8000, ge=1, le=65535, description="Port of `abstract-qa serve`.")
    api_token: SecretStr | None = Field(
        default=None,
        description="Bearer token the HTTP API's write endpoints (ingest) require. Never printed.",
    )
    api_max_upload_mb: float = Field(
        default=50.0, gt=0, description="Largest request body the HTTP API reads, in MB."
    )
    max_question_chars: int = Field(
        default=2000, ge=16, description="Longest question the HTTP API and MCP server take."
    )

    @model_validator(mode="before")
    @classmethod
    def _no_unknown_env(cls, data: Any) -> Any:
        known = {ENV_PREFIX + name.upper() for name in cls.model_fields}
        unknown = sorted(k for k in os.environ if k.startswith(ENV_PREFIX) and k not in known)
        if unknown:
            raise ValueError(
                f"unknown setting(s) {', '.join(unknown)}; "
                f"known settings: {', '.join(sorted(known))}"
            )
        return data

    # --- derived ----------------------------------------------------------------------------------
    @property
    def resolved_embedding_model(self) -> str:
        if self.embedding_model:
            return self.embedding_model
        return "all-MiniLM-L6-v2" if self.embeddings == "local" else "text-embedding-3-small"

    @property
    def chroma_dir(self) -> Path:
        return self.data_dir / "chroma"

    @property
    def bm25_dir(self) -> Path:
        return self.data_dir / "bm25"


def get_settings(overrides: Settings | dict[str, Any] | None = None) -> Settings:
    """Settings from env/.env, optionally overridden by a dict, or a ready model passed through."""
    if isinstance(overrides, Settings):
        return overrides
    try:
        return Settings(**(overrides or {}))
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'settings'}: {err['msg']}"
            for err in exc.errors()
        )
        raise ConfigError(f"Invalid settings ({problems}). See .env.example.") from exc
