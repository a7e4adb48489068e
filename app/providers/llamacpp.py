"""A local GGUF chat model through llama-cpp-python (optional extra: pip install '.[llamacpp]')."""

from __future__ import annotations

import atexit
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

from app.providers.base import ChatProvider
from core.errors import ConfigError, ProviderError
from core.models import Usage
from core.settings import Settings


@contextmanager
def _failing_as_provider_error(model: str) -> Iterator[None]:
    """A failure inside llama.cpp (context overflow, a bad grammar, out of memory) as the
    provider error every front maps, not a raw exception."""
    try:
        yield
    except (ValueError, RuntimeError, OSError, MemoryError) as exc:
        raise ProviderError(
            f"llama.cpp failed while answering with {model}: {exc}. Try a shorter question or "
            "fewer sources (AQA_TOP_K), or another model."
        ) from exc


@lru_cache(maxsize=2)
def _load(path: str) -> Any:
    from llama_cpp import Llama

    model = Llama(model_path=path, n_ctx=4096, verbose=False)
    # free it while the interpreter is intact: llama.cpp's own finaliser fails at shutdown
    atexit.register(model.close)
    return model


class LlamaCppProvider(ChatProvider):
    name = "llamacpp"
    _lock = threading.Lock()  # one llama.cpp context is not safe to share between threads

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        path = settings.llm_model_path
        if path is None or not path.is_file():
            raise ConfigError(
                f"AQA_LLM=llamacpp needs AQA_LLM_MODEL_PATH set to a GGUF file (got {path})."
            )
        try:
            import llama_cpp  # noqa: F401
        except ImportError as exc:
            raise ConfigError(
                "AQA_LLM=llamacpp needs llama-cpp-python: pip install 'abstract-qa[llamacpp]'."
            ) from exc
        self.model = path.name
        try:
            self.llama = _load(str(path))
        except (ValueError, RuntimeError, OSError) as exc:  # llama.cpp: "Failed to load model"
            raise ConfigError(
                f"llama.cpp could not load {path} ({exc}): AQA_LLM_MODEL_PATH must name a GGUF "
                "chat model this llama-cpp-python can read."
            ) from exc

    def stream(self, messages: list[tuple[str, str]], json: bool = False) -> Iterator[str | Usage]:
        chat = [{"role": role, "content": text} for role, text in messages]
        with self._lock, _failing_as_provider_error(str(self.model)):
            for part in self.llama.create_chat_completion(
                messages=chat,
                stream=True,
                temperature=0,
                max_tokens=self.settings.llm_max_tokens,
                response_format={"type": "json_object"} if json else None,
            ):
                text = part["choices"][0]["delta"].get("content")
                if text:
                    yield text
