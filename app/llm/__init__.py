"""Answer providers behind one interface. Only `get_provider` names them; nothing else imports
a provider module, so the core never depends on a vendor."""

from __future__ import annotations

from app.llm.base import Provider, resolve_llm
from core.settings import Settings
from ingest.embed import Embedder


def get_provider(settings: Settings, embedder: Embedder) -> Provider:
    kind = resolve_llm(settings)
    if kind == "extractive":
        from app.llm.extractive import ExtractiveProvider

        return ExtractiveProvider(embedder)
    if kind == "openai":
        from app.llm.openai import OpenAIProvider

        return OpenAIProvider(settings)
    from app.llm.llamacpp import LlamaCppProvider

    return LlamaCppProvider(settings)


__all__ = ["Provider", "get_provider", "resolve_llm"]
