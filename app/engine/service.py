"""The question-answering service: follow-ups, filters, retrieval, an answer with checked citations.

`QAService` loads the embedding model, opens the store and makes the provider once; every call
reuses them. The UI, the CLI and `app.ask` all go through `QAService.stream`, whose steps are:
read the question (`_read`), retrieve (`_retrieve`), keep the relevant sources (`_relevant`),
let the provider write, and check the citations (`_answer`). Counting questions take
`_counted` instead.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from app.engine.count import count_papers, describe
from app.engine.relevance import closeness, relevance, relevance_threshold, typicality
from app.engine.retrieve import Retriever, merge_hits, to_sources
from app.engine.table import CellFiller, fill_rows, row_of, suggest
from app.providers import Provider, get_provider
from app.providers.base import ChatProvider, History
from app.providers.wording import (
    CANNOT_ANSWER,
    check_citations,
    is_not_mentioned,
    is_not_stated,
    is_refusal,
    not_mentioned,
    subject,
)
from app.query.filters import parse_filters
from app.query.question import (
    comparison_sides,
    count_topic,
    is_count,
    is_listing,
    name_candidates,
)
from app.query.record import Query
from core.errors import (
    EmptyIndexError,
    IndexNotFoundError,
    InputError,
    NoMatchError,
    PaperNotFoundError,
)
from core.models import (
    Answer,
    Feedback,
    FeedbackRecord,
    Filters,
    Mode,
    Paper,
    Source,
    Table,
    TableRequest,
    TableRow,
    Usage,
)
from core.settings import Settings, get_settings
from core.text import english_words
from core.tokens import truncate
from ingest.embed import get_embedder
from store.feedback import FeedbackStore
from store.index import Snapshot

MAX_QUERY_TOKENS = 256  # what retrieval reads of a very long question
# A listing's papers are the most relevant of the fused ranking's first 30 (docs/benchmarks.md,
# "Listings": recall at 10 of 90 exhaustive training listings 0.859 -> 0.885; 50 gave 0.889)
LISTING_POOL = 30


def explicit_filters(filters: Filters | None, given: dict[str, Any]) -> Filters:
    """The filters a caller gave explicitly: the record whole, or (the Python convenience) its
    keywords (`Filters.given`); both at once is an error."""
    if filters is None:
        return Filters.given(**given)
    if any(value is not None for value in given.values()):
        raise TypeError("give the filters as one Filters record or as keywords, not both")
    return filters


def printable(text: str) -> str:
    """Control characters (NUL, escapes pasted from a terminal) and runs of space removed."""
    return " ".join("".join(c if c.isprintable() else " " for c in text).split())


def clean_question(question: str) -> str:
    """The question `printable`; an empty one is an error."""
    question = printable(question)
    if not question:
        raise InputError("The question is empty: type a question about the papers.")
    return question


def checked_request(request: TableRequest) -> TableRequest:
    """The request with its topic and columns `printable`, each column asked once (a column
    holds a letter or digit: `core.models.Column`); no topic (or a blank one) and no ids is the
    404 of a topic no paper matches."""
    columns: list[str] = []
    for text in map(printable, request.columns):
        if text.casefold() not in (c.casefold() for c in columns):  # a repeat is asked once
            columns.append(text)
    topic = printable(request.topic or "") or None
    if not request.papers and topic is None:
        raise NoMatchError("A table needs rows: give a topic to search or paper ids.")
    return request.model_copy(update={"columns": columns, "topic": topic})


@dataclass
class TablePlan:
    """An evidence table's rows, found and not yet filled: `fill` fills them one by one (stop
    whenever: the rows filled so far make a partial `result`)."""

    request: TableRequest
    rows: list[TableRow]
    filters: Filters
    filler: CellFiller
    chat: ChatProvider | None
    workers: int
    provider: str
    model: str | None
    started: float

    def fill(self) -> Iterator[TableRow]:
        """Each row with its cells, in order, as soon as it is filled."""
        return fill_rows(self.rows, self.request.columns, self.filler, self.chat, self.workers)

    @property
    def suggested(self) -> list[str]:
        """Columns the rows' abstracts often answer that the request does not ask."""
        return suggest(self.request.columns, [r.abstract for r in self.rows])

    def result(self, filled: list[TableRow], complete: bool) -> Table:
        """The table of the rows filled (all of them, or those filled before a stop)."""
        return Table(
            topic=self.request.topic,
            columns=list(self.request.columns),
            rows=filled,
            suggested_columns=self.suggested,
            filters=self.filters,
            provider=self.provider,
            model=self.model,
            complete=complete and len(filled) == len(self.rows),
            timings={"total": round(time.perf_counter() - self.started, 4)},
        )


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

    def warm(self) -> None:
        """Load the embedding model, the index and the provider now, so that the first question
        is answered as fast as the next (the app and the servers call this as they start)."""
        self.retriever.embed("warm up the model")
        provider = self.provider
        try:
            at = self.retriever.open()
        except (IndexNotFoundError, EmptyIndexError):  # reported when asked
            return
        # One question through every step, so that nothing loads on the first real one (the
        # tokenizers, the snapshot's derived tables, the model at an answer's shapes): a paper's
        # own title, which retrieval finds. A generative provider is not called for it.
        head = at.chunks.get(at.bm25.chunk_ids[:1])
        title = next(iter(head.values())).plain_title if head else "warm up"
        english_words()  # what misspelt search words are checked against
        if provider.name == "extractive":
            self.ask(title)
        else:
            self.search(title)

    def top_k(self, question: str) -> int:
        """How many papers a question gets when the caller does not say: a listing ("which
        papers ...?") lists more than a single fact needs."""
        return self.settings.listing_top_k if is_listing(question) else self.settings.top_k

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
        filters: Filters | None = None,
        ignore: list[str] | None = None,
        mode: Mode = "hybrid",
        **given: Any,
    ) -> Iterator[str | Answer]:
        """Answer text as it is produced (str pieces), then the full typed `Answer`.

        ``filters``: the `Filters` record every front builds (they win over what the question
        says); as a convenience the keywords ``year_from``, ``year_to``, ``venue``,
        ``decision`` and ``authors`` build it here. ``ignore`` names filters not to read from
        the question ("year", "venues", "decisions", "authors"): the app's one-click removal of
        a filter the question seemed to state."""
        started = time.perf_counter()
        timings: dict[str, float] = {}
        explicit = explicit_filters(filters, given)
        query, at = self._read(question, history or [], explicit, ignore or [], k, mode, timings)
        if is_count(query.standalone):
            yield from self._counted(query, at, started)
            return

        t = time.perf_counter()
        sources = self._retrieve(query, at, timings)
        timings["retrieve"] = time.perf_counter() - t
        t = time.perf_counter()
        threshold, relevant = self._relevant(query, sources, at)
        names, words_ = name_candidates(query.text)
        # one capitalised word the index never saw names something ("the Glimmerfin
        # algorithm"); several at once are a language that capitalises its nouns ("Welche
        # Arbeiten ..."), left to relevance
        unseen = at.bm25.unseen(words_)
        missing = at.unmentioned(names) or (unseen if len(unseen) == 1 else [])
        if missing:  # "the Quokka-SGD optimizer": said so, the closest papers kept as sources
            relevant = []
        reply = self.provider.generate(query, relevant) if relevant else None
        refusal = not_mentioned(missing[0]) if missing else CANNOT_ANSWER
        pieces: list[str] = []
        for piece in reply if reply is not None else [refusal]:
            pieces.append(piece)
            yield piece
        timings["generate"] = time.perf_counter() - t
        answer = self._answer(
            query, "".join(pieces).strip(), sources, threshold, reply.usage if reply else None
        )
        timings["total"] = time.perf_counter() - started
        answer.timings = {key: round(value, 4) for key, value in timings.items()}
        yield answer

    def search(
        self,
        question: str,
        *,
        k: int | None = None,
        filters: Filters | None = None,
        ignore: list[str] | None = None,
        mode: Mode = "hybrid",
        **given: Any,
    ) -> list[Source]:
        """The sources an answer to ``question`` would draw on, each with its relevance, and no
        answer. ``filters`` (or its keywords) as for `stream`."""
        explicit = explicit_filters(filters, given)
        query, at = self._read(question, [], explicit, ignore or [], k, mode, {})
        sources = self._retrieve(query, at, {})
        self._relevant(query, sources, at)
        return sources

    def read(self, question: str, k: int | None = None) -> tuple[Query, Snapshot]:
        """``question`` read as `ask` reads a first question (no history, only its own filters,
        hybrid search), to be searched for ``k`` sources (when None, `top_k`'s: more for a
        listing), and the index it is searched in."""
        return self._read(question, [], Filters(), [], k, "hybrid", {})

    def given(self, question: str) -> tuple[Query, list[Source]]:
        """The question as read and the sources its provider is given (the relevant ones, best
        first): what the answer selector is trained and checked on."""
        query, at = self.read(question)
        return query, self._relevant(query, self._retrieve(query, at, {}), at)[1]

    @property
    def feedback(self) -> FeedbackStore:
        """The users' ratings of answers (SQLite under the data directory)."""
        return FeedbackStore(self.settings.data_dir)

    def rate(self, feedback: Feedback) -> FeedbackRecord:
        """Store a user's rating of an answer, with the fingerprint of the index as it is rated
        (the generation of its last write). Every cited id must be an indexed paper."""
        at = self.retriever.open()
        found = self.retriever.index.stored(at.chunks, feedback.cited)
        indexed = {record.paper_id for record in found.values()}
        if missing := [p for p in feedback.cited if p not in indexed]:
            raise PaperNotFoundError(missing[0])  # a rating names the answer's cited papers
        return self.feedback.add(feedback, at.bm25.generation)

    def paper(self, paper_id: str) -> Paper:
        """The paper with this id, as indexed (its abstract as the corpus gave it)."""
        paper = self.retriever.index.paper(paper_id)
        if paper is None:
            raise PaperNotFoundError(paper_id)
        return paper

    def table(self, request: TableRequest | None = None, **fields: Any) -> Table:
        """An evidence table: the request's columns asked of each of its papers (a topic's most
        relevant, or the ids given). ``fields`` build the `TableRequest` when none is given:
        ``topic``, ``papers``, ``columns``, ``rows``, ``filters``."""
        plan = self.table_plan(request or TableRequest.read(**fields))
        return plan.result(list(plan.fill()), complete=True)

    def table_plan(self, request: TableRequest) -> TablePlan:
        """The table's rows found (each paper with its metadata, no cell yet), ready to be
        filled row by row (`TablePlan.fill`): what the fronts stream and can stop."""
        started = time.perf_counter()
        request = checked_request(request)
        at = self.retriever.open()
        if request.papers:
            found = self.retriever.whole(list(dict.fromkeys(request.papers)), at)
            rows = [row_of(hit.to_source(n)) for n, hit in enumerate(found, start=1)]
            filters = request.filters
        else:
            topic = request.topic or ""
            query, _ = self._read(topic, [], request.filters, [], request.rows, "hybrid", {})
            _, relevant = self._relevant(query, self._retrieve(query, at, {}), at)
            if not relevant:
                raise NoMatchError(
                    f"No indexed paper matches the topic {topic!r}"
                    + (f" ({query.filters.describe()})" if query.filters.active else "")
                    + ": try other words, fewer filters, or give paper ids."
                )
            found = self.retriever.whole([s.paper_id for s in relevant], at)
            by_id = {hit.paper_id: hit for hit in found}
            rows = [
                row_of(by_id[s.paper_id].to_source(s.marker), s.relevance)
                for s in relevant
                if s.paper_id in by_id  # (a paper removed since it was found is left out)
            ]
            filters = query.filters
        chat = self.provider if isinstance(self.provider, ChatProvider) else None
        return TablePlan(
            request=request,
            rows=rows,
            filters=filters,
            filler=CellFiller(self.embedder),
            chat=chat,
            workers=self.settings.table_workers,
            provider=self.provider.name,
            model=self.provider.model,
            started=started,
        )

    def _read(
        self,
        question: str,
        history: History,
        explicit: Filters,
        ignore: list[str],
        k: int | None,
        mode: Mode,
        timings: dict[str, float],
    ) -> tuple[Query, Snapshot]:
        """The question read once: cleaned, made standalone, its filters (explicit ones win)
        and what is left to search, embedded and cut into words; and the index it will be
        answered from (every later step sees this one generation)."""
        t = time.perf_counter()
        question = clean_question(question)
        standalone, usage = self.provider.condense(history, truncate(question, MAX_QUERY_TOKENS))
        timings["condense"] = time.perf_counter() - t
        at = self.retriever.open()
        parsed, cleaned = parse_filters(
            standalone, at.bm25.venues, at.bm25.years, at.bm25.author_rows
        )
        if ignore:
            parsed, cleaned = parsed.without(ignore), standalone  # the phrase stays a topic
        text = cleaned if parsed.active else standalone
        t = time.perf_counter()
        # a misspelt word is searched as the word meant; the vector is the typed question's
        query = self.retriever.query(
            text, explicit.merged_over(parsed), k or self.top_k(standalone), mode, at
        )
        if standalone != text:  # the answer is written to the whole question
            query = replace(
                query,
                standalone_vector=self.retriever.embed(standalone),
                standalone_words=tuple(at.bm25.spelled(standalone)),
            )
        timings["embed_query"] = time.perf_counter() - t
        return replace(query, question=question, standalone=standalone, usage=usage), at

    def _retrieve(self, query: Query, at: Snapshot, timings: dict[str, float]) -> list[Source]:
        """The top ``query.k`` papers; for a listing, the most relevant of a deeper pool; for
        "how do A and B differ?", each side's best paper first, so that both can be cited."""
        if is_listing(query.standalone) and query.mode == "hybrid":
            # "which papers ...?": every paper that names the topic, not only those nearest in
            # meaning; the fused ranking's first LISTING_POOL papers reordered by relevance
            deep = self.retriever.search(replace(query, k=max(LISTING_POOL, query.k)), at, timings)
            ranked = sorted(deep, key=lambda hit: -closeness(hit.similarity, hit.lexical))
            return to_sources(ranked[: query.k])
        hits = self.retriever.search(query, at, timings)
        if sides := comparison_sides(query.text):
            each = [
                self.retriever.query(side, query.filters, query.k, query.mode, at) for side in sides
            ]
            hits = merge_hits(
                [self.retriever.search(side, at)[:1] for side in each] + [hits], query.k
            )
        return to_sources(hits)

    def _relevant(
        self, query: Query, sources: list[Source], at: Snapshot
    ) -> tuple[float, list[Source]]:
        """The relevance threshold for this index, and the sources at or above it (each
        source's relevance is recorded on it)."""
        threshold = relevance_threshold(len(at.bm25.chunk_ids), self.settings.min_relevance)
        typical = typicality(query, at.bm25.centroid)
        for source in sources:
            source.relevance = round(relevance(source, typical), 4)
        return threshold, [s for s in sources if s.relevance >= threshold]

    def _answer(
        self,
        query: Query,
        text: str,
        sources: list[Source],
        threshold: float,
        usage: Usage | None,
    ) -> Answer:
        """The typed answer: the provider's text with its citations checked, or the refusal
        when it refused or cited nothing (refusing beats an unsupported answer)."""
        checked = check_citations(text, sources) if text and not is_refusal(text) else None
        cited = checked is not None and bool(checked.citations)
        refusal = text if is_not_mentioned(text) else CANNOT_ANSWER
        return Answer(
            question=query.question,
            standalone_question=query.standalone,
            answer=checked.text if checked is not None and cited else refusal,
            # "the abstract of X [1] does not state ...": cited, and yet no answer
            abstained=not cited or is_not_stated(checked.text if checked is not None else ""),
            citations=checked.citations if checked is not None else [],
            invalid_citations=checked.invalid if checked is not None else [],
            uncited_sentences=checked.uncited if checked is not None else [],
            sources=sources,
            filters=query.filters,
            min_relevance=threshold,
            provider=self.provider.name,
            model=self.provider.model,
            usage=Usage.total(query.usage, usage),
        )

    def _counted(self, query: Query, at: Snapshot, started: float) -> Iterator[str | Answer]:
        """A counting or trend question: exact counts over the papers that match the topic,
        with the nearest few cited as examples. No provider is asked."""
        topic = self.retriever.query(
            count_topic(query.text), query.filters, query.k, query.mode, at
        )
        counts, ranked = count_papers(topic, at)
        matched = set(ranked)
        hits = self.retriever.search(topic, at)
        sources = to_sources([h for h in hits if h.paper_id in matched])
        text = describe(counts, [(subject(s, i), s.marker) for i, s in enumerate(sources[:3])])
        checked = check_citations(text, sources) if text else None
        answer = Answer(
            question=query.question,
            standalone_question=query.standalone,
            answer=checked.text if checked is not None else CANNOT_ANSWER,
            abstained=checked is None,
            citations=checked.citations if checked is not None else [],
            sources=sources,
            filters=query.filters,
            provider="metadata",
            counts=counts,
            usage=query.usage,
        )
        yield answer.answer
        answer.timings = {"total": round(time.perf_counter() - started, 4)}
        yield answer
