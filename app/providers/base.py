"""The provider interface, and what the generative providers share (prompts, follow-ups).

A call returns a `Reply`: its text pieces as they come, and the tokens that call used once it
has been read. Usage belongs to the call, never to the provider, which the app shares between
users asking at the same time.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator

from app.providers.prompts import load_prompt
from app.providers.wording import CANNOT_ANSWER, format_sources
from app.query.record import Query
from core.models import Source, Usage
from core.settings import Settings

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


class Reply:
    """One call's output: iterate for the text pieces; ``usage`` is known once they are read
    (None when the provider reports none)."""

    def __init__(self, parts: Iterable[str | Usage]) -> None:
        self._parts = iter(parts)
        self.usage: Usage | None = None

    def __iter__(self) -> Iterator[str]:
        for part in self._parts:
            if isinstance(part, Usage):
                self.usage = Usage.total(self.usage, part)
            elif part:
                yield part

    def text(self) -> str:
        return "".join(self)


class Provider(ABC):
    """Writes an answer from numbered sources, streamed as text pieces."""

    name: str = ""
    model: str | None = None

    @abstractmethod
    def generate(self, query: Query, sources: list[Source]) -> Reply:
        """The answer to ``query`` (its standalone question), citing sources as [n];
        CANNOT_ANSWER when they do not answer it."""

    def condense(self, history: History, question: str) -> tuple[str, Usage | None]:
        """A standalone question for retrieval, and the tokens that took. Without a model: a
        follow-up that leans on the conversation ("what about its speed?") is joined to the
        question it follows."""
        if not history or not needs_context(question):
            return question, None
        return join_follow_up(history, question), None


def needs_context(question: str) -> bool:
    return len(question.split()) <= 4 or bool(_ANAPHORA.search(question))


def join_follow_up(history: History, question: str) -> str:
    return f"{question} (following: {history[-1][0]})"


class ChatProvider(Provider):
    """A chat model: the prompt files, the sources block and follow-up rewriting."""

    evidence: Callable[[Query, list[Source]], dict[int, list[str]]] | None = None
    """The sentences of each source most likely to answer (the answer selector's), marked first
    in the sources block so that a small model sees the evidence first (`get_provider`)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def messages(
        self, question: str, sources: list[Source], evidence: dict[int, list[str]] | None = None
    ) -> list[tuple[str, str]]:
        block, _ = format_sources(sources, self.settings.context_tokens, evidence)
        system = load_prompt("answer.system").format(refusal=CANNOT_ANSWER)
        user = load_prompt("answer.user").format(sources=block, question=question)
        return [("system", system), ("user", user)]

    @abstractmethod
    def stream(self, messages: list[tuple[str, str]], json: bool = False) -> Iterator[str | Usage]:
        """The model's reply to ``messages`` as text pieces, and its usage when reported;
        with ``json``, the reply is constrained to one JSON object."""

    def complete(self, messages: list[tuple[str, str]], json: bool = False) -> Reply:
        return Reply(self.stream(messages, json))

    def generate(self, query: Query, sources: list[Source]) -> Reply:
        marked = self.evidence(query, sources) if self.evidence is not None else None
        return self.complete(self.messages(query.asked, sources, marked))

    def condense(self, history: History, question: str) -> tuple[str, Usage | None]:
        if not history or not needs_context(question):
            return question, None
        turns = "\n".join(f"User: {q}\nAssistant: {a}" for q, a in history[-3:])
        prompt = load_prompt("condense.user").format(history=turns, question=question)
        reply = self.complete([("user", prompt)])
        rewritten = reply.text().strip().strip('"')
        first = rewritten.splitlines()[0].strip() if rewritten else ""
        if not first or first.casefold() == question.casefold():
            # the model kept the follow-up as it was: keep its context the simple way
            return join_follow_up(history, question), reply.usage
        return first, reply.usage
