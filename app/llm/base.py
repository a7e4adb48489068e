"""The provider interface, and what the generative providers share (prompts, follow-ups)."""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Iterator

from app.answer import CANNOT_ANSWER, format_sources
from app.models import Source, Usage
from app.prompts import load_prompt
from app.settings import Settings

History = list[tuple[str, str]]
"""Earlier turns of a conversation: (question, answer) pairs, oldest first."""

_ANAPHORA = re.compile(
    r"\b(it|its|they|them|their|this|that|these|those|the paper|the method|the same|"
    r"the authors|what about|and in|how about)\b",
    re.IGNORECASE,
)


def resolve_llm(settings: Settings) -> str:
    if settings.llm != "auto":
        return settings.llm
    return "openai" if settings.openai_api_key or settings.openai_base_url else "extractive"


class Provider(ABC):
    """Writes an answer from numbered sources, streamed as text pieces."""

    name: str = ""
    model: str | None = None

    def __init__(self) -> None:
        self.usage: Usage | None = None

    @abstractmethod
    def generate(self, question: str, sources: list[Source]) -> Iterator[str]:
        """Text pieces of the answer, citing sources as [n]; CANNOT_ANSWER when they do not."""

    def condense(self, history: History, question: str) -> str:
        """A standalone question for retrieval. Without a model: a follow-up that leans on the
        conversation ("what about its speed?") is joined to the question it follows."""
        if not history or not needs_context(question):
            return question
        return join_follow_up(history, question)


def needs_context(question: str) -> bool:
    return len(question.split()) <= 4 or bool(_ANAPHORA.search(question))


def join_follow_up(history: History, question: str) -> str:
    return f"{question} (following: {history[-1][0]})"


class ChatProvider(Provider):
    """A chat model: the prompt files, the sources block and follow-up rewriting."""

    def __init__(self, settings: Settings) -> None:
        super().__init__()
        self.settings = settings

    def messages(self, question: str, sources: list[Source]) -> list[tuple[str, str]]:
        block, _ = format_sources(sources, self.settings.context_tokens)
        system = load_prompt("answer.system").format(refusal=CANNOT_ANSWER)
        user = load_prompt("answer.user").format(sources=block, question=question)
        return [("system", system), ("user", user)]

    @abstractmethod
    def complete(self, messages: list[tuple[str, str]]) -> Iterator[str]:
        """Stream the model's reply to ``messages``."""

    def generate(self, question: str, sources: list[Source]) -> Iterator[str]:
        yield from self.complete(self.messages(question, sources))

    def condense(self, history: History, question: str) -> str:
        if not history or not needs_context(question):
            return question
        turns = "\n".join(f"User: {q}\nAssistant: {a}" for q, a in history[-3:])
        prompt = load_prompt("condense.user").format(history=turns, question=question)
        usage = self.usage
        rewritten = "".join(self.complete([("user", prompt)])).strip().strip('"')
        self.usage = usage
        first = rewritten.splitlines()[0].strip() if rewritten else ""
        if not first or first.casefold() == question.casefold():
            # the model kept the follow-up as it was: keep its context the simple way
            return join_follow_up(history, question)
        return first
