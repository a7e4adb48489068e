"""The question-answering service: follow-ups, filters, retrieval, an answer with checked citations.

`QAService` loads the embedding model, the Chroma client and the provider once; every call reuses
them. The UI, the CLI and `app.ask` all go through `QAService.stream`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from app.answer import (
    CANNOT_ANSWER,
    check_citations,
    is_refusal,
    relevance,
    relevance_threshold,
    subject,
    to_sources,
)
from app.count import count_papers, describe
from app.errors import InputError
from app.filters import Filters, parse_filters
from app.llm import Provider, get_provider
from app.llm.base import History
from app.models import Answer, Source
from app.question import comparison_sides, count_topic, is_count
from app.retrieve import Mode, PaperHit, Retriever, merge_hits
from app.settings import Settings, get_settings
from ingest.chunk import encoding
from ingest.embed import get_embedder

MAX_QUERY_TOKENS = 256  # what retrieval reads of a very long question


class QAService:
    def __init__(self, settings: Settings | dict[str, Any] | None = None) -> None:
        self.settings = get_settings(settings)
        self.embedder = get_embedder(self.settings)
        self.retriever = Retriever(self.settings, self.embedder)
        self._provider: Provider | None = None

    @property
    def provider(self) -> Provider:
        if self._provider is None:
            self._provider = get_provider(self.settings, self.embedder)
        return self._provider

    def related(self, paper_id: str, k: int = 5) -> list[Source]:
        """The ``k`` papers nearest to ``paper_id`` in the index ("more like this")."""
        return to_sources(self.retriever.related(paper_id, k))

    def ask(self, question: str, **options: Any) -> Answer:
        """The full answer at once; see `stream` for the options."""
        for event in self.stream(question, **options):
            if isinstance(event, Answer):
                return event
        raise AssertionError("stream ended without an answer")  # pragma: no cover

    def stream(
        self,
        question: str,
        *,
        history: History | None = None,
        k: int | None = None,
        year_from: int | None = None,
        year_to: int | None = None,
        venue: str | list[str] | None = None,
        decision: str | list[str] | None = None,
        authors: str | list[str] | None = None,
        ignore: list[str] | None = None,
        mode: Mode = "hybrid",
    ) -> Iterator[str | Answer]:
        """Answer text as it is produced (str pieces), then the full typed `Answer`.

        ``authors`` filters by author (names as people write them); ``ignore`` names filters
        not to read from the question ("year", "venues", "decisions", "authors"): the app's
        one-click removal of a filter the question seemed to state."""
        started = time.perf_counter()
        timings: dict[str, float] = {}
        # control characters (NUL, escapes pasted from a terminal) say nothing: drop them
        question = " ".join("".join(c if c.isprintable() else " " for c in question).split())
        if not question:
            raise InputError("The question is empty: type a question about the papers.")
        tokens = encoding().encode(question, disallowed_special=())
        query = question
        if len(tokens) > MAX_QUERY_TOKENS:
            query = encoding().decode(tokens[:MAX_QUERY_TOKENS])

        provider = self.provider
        provider.usage = None
        t = time.perf_counter()
        standalone = provider.condense(history or [], query)
        timings["condense"] = time.perf_counter() - t

        explicit = Filters(
            year_from=year_from,
            year_to=year_to,
            venues=[venue] if isinstance(venue, str) else list(venue or []),
            decisions=[decision] if isinstance(decision, str) else list(decision or []),
            authors=[authors] if isinstance(authors, str) else list(authors or []),
        )
        col = self.retriever.open()  # once per question: both steps below use it
        parsed, cleaned = parse_filters(
            standalone,
            self.retriever.known_venues(col),
            self.retriever.known_years(col),
            self.retriever.known_authors(col),
        )
        if ignore:
            parsed, cleaned = parsed.without(ignore), standalone  # the phrase stays a topic
        filters = explicit.merged_over(parsed)
        search_text = cleaned if parsed.active else standalone

        t = time.perf_counter()
        k = k or self.settings.top_k
        if is_count(standalone):
            yield from self._counted(question, standalone, search_text, filters, k, col, started)
            return

        def search(text: str) -> list[PaperHit]:
            return self.retriever.search(
                text,
                filters,
                k=k,
                chunks_per_paper=self.settings.chunks_per_paper,
                mode=mode,
                timings=timings,
                col=col,
            )

        hits = search(search_text)
        if sides := comparison_sides(search_text):
            # "how do A and B differ?": each side's best paper, so both can be cited
            hits = merge_hits([search(side)[:1] for side in sides] + [hits], k)
        timings["retrieve"] = time.perf_counter() - t
        sources = to_sources(hits)

        t = time.perf_counter()
        typical, chunks = self.retriever.typicality(search_text, col)
        threshold = relevance_threshold(chunks, self.settings.min_relevance)
        for source in sources:
            source.relevance = round(relevance(source, typical), 4)
        relevant = [s for s in sources if s.relevance >= threshold]
        if self.retriever.unseen_names(search_text, col):
            # a question about a name no abstract holds ("the XYZZY-3 optimizer") is not
            # answered from the papers that happen to be closest
            relevant = []
        pieces: list[str] = []
        if relevant:
            for piece in provider.generate(standalone, relevant):
                pieces.append(piece)
                yield piece
        else:
            pieces.append(CANNOT_ANSWER)
            yield CANNOT_ANSWER
        timings["generate"] = time.perf_counter() - t
        text = "".join(pieces).strip()

        answer = Answer(
            question=question,
            standalone_question=standalone,
            answer=CANNOT_ANSWER,
            abstained=True,
            sources=sources,
            filters=filters.model_dump(),
            filters_applied=filters.describe(),
            min_relevance=threshold,
            provider=provider.name,
            model=provider.model,
            usage=provider.usage,
        )
        if text and not is_refusal(text):
            checked = check_citations(text, sources)
            cited = {c.marker for c in checked.citations}
            if cited:
                answer.answer = checked.text
                answer.abstained = False
                answer.citations = checked.citations
                answer.invalid_citations = checked.invalid
                answer.uncited_sentences = checked.uncited
                for source in sources:
                    source.cited = source.marker in cited
            else:
                # Nothing the model said is tied to a source: refusing beats an unsupported answer.
                answer.invalid_citations = checked.invalid
                answer.uncited_sentences = checked.uncited
        timings["total"] = time.perf_counter() - started
        answer.timings = {key: round(value, 4) for key, value in timings.items()}
        yield answer

    def _counted(
        self,
        question: str,
        standalone: str,
        search_text: str,
        filters: Filters,
        k: int,
        col: Any,
        started: float,
    ) -> Iterator[str | Answer]:
        """A counting or trend question: exact counts over the papers that match the topic,
        with the nearest few cited as examples. No provider is asked."""
        topic = count_topic(search_text)
        counts, ranked = count_papers(self.retriever, topic, filters, col)
        matched = set(ranked)
        hits = [
            h for h in self.retriever.search(topic, filters, k=k, col=col) if h.paper_id in matched
        ]
        sources = to_sources(hits)
        text = describe(counts, [(subject(s, i), s.marker) for i, s in enumerate(sources[:3])])
        answer = Answer(
            question=question,
            standalone_question=standalone,
            answer=text or CANNOT_ANSWER,
            abstained=not text,
            sources=sources,
            filters=filters.model_dump(),
            filters_applied=filters.describe(),
            provider="metadata",
            counts=counts,
        )
        if text:
            checked = check_citations(text, sources)
            answer.answer, answer.citations = checked.text, checked.citations
            for source in sources:
                source.cited = any(c.marker == source.marker for c in checked.citations)
        yield answer.answer
        answer.timings = {"total": round(time.perf_counter() - started, 4)}
        yield answer
