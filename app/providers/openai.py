"""OpenAI, or any OpenAI-compatible server (Ollama, vLLM, llama.cpp) through OPENAI_BASE_URL."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import openai
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_openai import ChatOpenAI

from app.providers.base import ChatProvider
from core.errors import ConfigError, ProviderError
from core.models import Usage
from core.settings import Settings

_OPENAI_HOSTS = ("openai.com", "openai.azure.com")


def _is_openai(base_url: str | None) -> bool:
    """Whether requests go to OpenAI's API (or Azure OpenAI) rather than a compatible server.
    ``base_url`` is a full URL, scheme included, as OPENAI_BASE_URL takes it."""
    if base_url is None:
        return True
    host = (urlsplit(base_url).hostname or "").lower()
    return any(host == h or host.endswith("." + h) for h in _OPENAI_HOSTS)


def _length_limit(settings: Settings) -> dict[str, Any]:
    """The reply-length arguments for ChatOpenAI: OpenAI reads ``max_completion_tokens`` (and
    refuses it beside ``max_tokens``); compatible servers that predate it (llama-cpp-python's
    among them) ignore it and write until their context is full, so they get ``max_tokens``
    alone. A per-call ``extra_body`` would replace this one: pass the limit again with it."""
    if _is_openai(settings.openai_base_url):
        return {"max_completion_tokens": settings.llm_max_tokens}
    return {"max_completion_tokens": None, "extra_body": {"max_tokens": settings.llm_max_tokens}}


class OpenAIProvider(ChatProvider):
    name = "openai"

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        if settings.openai_api_key is None and settings.openai_base_url is None:
            raise ConfigError(
                "AQA_LLM=openai needs a key: set OPENAI_API_KEY in .env or the environment, "
                "or OPENAI_BASE_URL for a compatible server, or use AQA_LLM=extractive (offline)."
            )
        self.model = settings.llm_model
        self.where = settings.openai_base_url or "the OpenAI API"
        self.chat = ChatOpenAI(
            model=settings.llm_model,
            api_key=settings.openai_api_key or "not-needed",
            base_url=settings.openai_base_url,
            timeout=settings.llm_timeout,
            max_retries=settings.llm_max_retries,  # the client backs off exponentially
            temperature=0,
            stream_usage=True,
            **_length_limit(settings),
        )

    def stream(self, messages: list[tuple[str, str]], json: bool = False) -> Iterator[str | Usage]:
        # The messages are already filled in: escape braces so LangChain does not re-format them.
        prompt = ChatPromptTemplate.from_messages(
            [(role, text.replace("{", "{{").replace("}", "}}")) for role, text in messages]
        )
        usage = Usage()
        reported = False
        try:
            chat = self.chat.bind(response_format={"type": "json_object"}) if json else self.chat
            for chunk in (prompt | chat).stream({}):
                meta: Any = getattr(chunk, "usage_metadata", None)
                if meta:
                    reported = True
                    usage.prompt_tokens += int(meta.get("input_tokens", 0))
                    usage.completion_tokens += int(meta.get("output_tokens", 0))
                text = StrOutputParser().invoke(chunk)
                if text:
                    yield text
        except openai.LengthFinishReasonError:
            # a JSON reply cut off at AQA_LLM_MAX_TOKENS: what came is kept, as a plain reply cut
            # off there is (the caller reads an unfinished JSON object as unanswered)
            pass
        except openai.AuthenticationError as exc:
            raise ProviderError(
                f"{self.where} rejected the API key ({exc.status_code}); check OPENAI_API_KEY."
            ) from exc
        except openai.RateLimitError as exc:
            raise ProviderError(
                f"{self.where} is rate limiting requests after "
                f"{self.settings.llm_max_retries} retries; wait and try again, or raise "
                "AQA_LLM_MAX_RETRIES."
            ) from exc
        except openai.APITimeoutError as exc:
            raise ProviderError(
                f"{self.where} did not answer within {self.settings.llm_timeout:g}s; "
                "raise AQA_LLM_TIMEOUT or check the server."
            ) from exc
        except openai.APIConnectionError as exc:
            raise ProviderError(
                f"Cannot reach {self.where}: is the server running and OPENAI_BASE_URL right?"
            ) from exc
        except openai.NotFoundError as exc:
            raise ProviderError(
                f"{self.where} has no model {self.model!r}; set AQA_LLM_MODEL to one it serves."
            ) from exc
        except openai.APIError as exc:
            raise ProviderError(f"{self.where} returned an error: {exc}") from exc
        if reported:  # some compatible servers send no usage when streaming
            yield usage
