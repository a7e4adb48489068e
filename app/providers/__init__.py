"""Answer providers behind one interface. Only `get_provider` names them; nothing else imports
a provider module, so the core never depends on a vendor."""

from __future__ import annotations

from ipaddress import ip_address
from urllib.parse import urlsplit

from app.providers.base import ChatProvider, Provider, resolve_llm
from core.settings import Settings
from ingest.embed import Embedder


def get_provider(settings: Settings, embedder: Embedder) -> Provider:
    from app.providers.extractive import ExtractiveProvider

    kind = resolve_llm(settings)
    if kind == "extractive":
        return ExtractiveProvider(embedder)
    chat: ChatProvider
    if kind == "openai":
        from app.providers.openai import OpenAIProvider

        chat = OpenAIProvider(settings)
    else:
        from app.providers.llamacpp import LlamaCppProvider

        chat = LlamaCppProvider(settings)
    chat.evidence = ExtractiveProvider(embedder).evidence
    return chat


def _off_machine(base_url: str | None) -> bool:
    """Whether an OpenAI-compatible endpoint is on another machine: api.openai.com (no base
    URL), or a base URL whose host is not loopback."""
    if not base_url:
        return True  # api.openai.com
    host = urlsplit(base_url).hostname or ""
    if host == "localhost" or host.endswith(".localhost"):
        return False
    try:
        return not ip_address(host).is_loopback
    except ValueError:  # a name other than localhost: assume it resolves elsewhere
        return True


def answers_off_machine(settings: Settings) -> bool:
    """Whether answering sends the question and its sources to a model on another machine."""
    return resolve_llm(settings) == "openai" and _off_machine(settings.openai_base_url)


def embeds_off_machine(settings: Settings) -> bool:
    """Whether a search sends the question to an embedding model on another machine."""
    return settings.embeddings == "openai" and _off_machine(settings.openai_base_url)


__all__ = ["Provider", "answers_off_machine", "embeds_off_machine", "get_provider", "resolve_llm"]
