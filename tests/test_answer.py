"""Retrieval and answers over the bundled sample, with the real local model and a real Chroma."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from app.engine.relevance import closeness
from app.engine.service import LISTING_POOL, QAService
from app.providers.extractive import Candidate, _best_sentences, _per_part
from app.providers.prompts import load_prompt
from app.providers.wording import (
    check_citations,
    format_sources,
    is_not_stated,
    is_refusal,
)
from core.errors import ConfigError, EmptyIndexError, IndexNotFoundError, InputError
from core.models import Answer, Filters, Source
from core.tokens import count_tokens
from tests.conftest import assert_citations_real, paper_id_containing

PARAPHRASES = [
    # (question worded unlike the abstract, a phrase only the gold abstract contains)
    (
        "Which optimizers cut the number of gradient and communication rounds versus MARINA?",
        "We develop and analyze DASHA",
    ),
    (
        "Can the accuracy gain of a model ensemble be compressed into one network by distillation?",
        "We formally study how \\emph{ensemble}",
    ),
    (
        "How should a classifier decide which inputs to reject to stay accurate on the rest?",
        "We tackle the problem of Selective Classification",
    ),
    (
        "Is it hard to learn neural nets that respect symmetries with gradient descent?",
        "We study the problem of learning equivariant neural networks",
    ),
    (
        "What helps learned optical flow estimators when trained on synthetic data?",
        "Comprehensive studies of synthetic optical flow datasets",
    ),
    (
        "Training networks without the chain rule of backprop: what alternative is proposed?",
        "While backpropagation (BP) is the mainstream approach",
    ),
]

OUT_OF_CORPUS = [
    "What is the best recipe for a chocolate cake?",
    "Who won the last football world cup?",
    "How do I change the oil in a diesel car engine?",
    "What is the capital of France?",
]


@pytest.mark.parametrize(("question", "phrase"), PARAPHRASES)
def test_paraphrased_questions_find_and_cite_the_right_paper(
    sample_service: QAService, question: str, phrase: str
) -> None:
    gold = paper_id_containing(phrase)
    answer = sample_service.ask(question)
    assert not answer.abstained, answer
    assert gold in [s.paper_id for s in answer.sources[:3]]
    assert gold in [c.paper_id for c in answer.citations]
    assert_citations_real(answer)
    assert answer.timings["total"] > 0 and answer.provider == "extractive"


@pytest.mark.parametrize("question", OUT_OF_CORPUS)
def test_out_of_corpus_questions_abstain_but_still_show_what_was_retrieved(
    sample_service: QAService, question: str
) -> None:
    answer = sample_service.ask(question)
    assert answer.abstained and is_refusal(answer.answer)
    assert answer.citations == [] and answer.cited_sources == []
    assert len(answer.sources) == 5


def test_multi_paper_question_cites_several_papers(sample_service: QAService) -> None:
    answer = sample_service.ask("Which papers study federated learning?")
    assert not answer.abstained
    # the sample has seven abstracts that mention federated learning: a listing lists them all
    assert len(answer.citations) == 7
    for citation in answer.citations:
        source = next(s for s in answer.sources if s.marker == citation.marker)
        assert "federated" in source.text.lower()
    assert_citations_real(answer)


# The misses issue 11 lists, over the bundled sample: (question, a fact the answer must say).
FACTS = [
    ("Which operation maps representations onto simplices in Simplicial Embeddings?", "softmax"),
    (
        "How much more accurate can federated learning models be when training starts from a "
        "pre-trained model instead of from scratch?",
        "40%",
    ),
    (
        "Which training hyperparameter was found to be chronically overlooked in invariant risk "
        "minimization studies?",
        "batch size",
    ),
    ("How many fewer steps than Adam does Sophia need to reach the same perplexity?", "50%"),
]


def assert_answer_shape(answer: Answer) -> None:
    """At most 3 sentences from at most 3 papers, every one cited, none in the papers' voice."""
    sentences = [s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z*-])", answer.answer) if s]
    assert len(sentences) <= 3 and len(answer.citations) <= 3, answer.answer
    assert answer.uncited_sentences == [], answer.uncited_sentences
    assert not re.search(r"(^|[.!?]\s+)(We|Our)\b", answer.answer), answer.answer


@pytest.mark.parametrize(("question", "fact"), FACTS)
def test_the_answer_says_the_fact_asked_for(
    sample_service: QAService, question: str, fact: str
) -> None:
    answer = sample_service.ask(question)
    assert not answer.abstained, answer.sources
    assert fact in answer.answer, answer.answer
    assert_answer_shape(answer)
    assert_citations_real(answer)


@pytest.mark.parametrize(
    "question",
    [
        "Which reinforcement learning agent first beat professional players at StarCraft II?",
        "What is the XYZZY-3 optimizer?",
        "How do honeybees communicate?",
    ],
)
def test_questions_the_corpus_does_not_answer_are_refused(
    sample_service: QAService, question: str
) -> None:
    answer = sample_service.ask(question)
    # a name no sample abstract mentions ("StarCraft", "XYZZY-3") is said so (issue 37)
    assert answer.abstained and is_refusal(answer.answer), answer.answer


def test_answers_name_the_paper_in_the_third_person(sample_service: QAService) -> None:
    answer = sample_service.ask("How can dynamic time warping be made differentiable?")
    # an untitled paper is named by the method it introduces, not by the acronym it reuses
    assert answer.answer.startswith("DecDTW [1] "), answer.answer
    assert_answer_shape(answer)


def test_a_listing_question_gets_one_cited_line_per_paper(sample_service: QAService) -> None:
    answer = sample_service.ask("Which papers study federated learning?")
    lines = answer.answer.split("\n")
    assert len(lines) == len(answer.citations) >= 5
    markers = [re.findall(r"\[(\d+)\]", line) for line in lines]
    assert all(len(m) == 1 for m in markers) and len({m[0] for m in markers}) == len(lines)
    assert all(line.startswith("- ") for line in lines)


@pytest.mark.parametrize(
    "question", ["Which papers study federated learning?", "What work studies label noise?"]
)
def test_a_listing_lists_the_most_relevant_papers_of_a_deeper_pool(
    sample_service: QAService, question: str
) -> None:
    """A listing wants every paper on its topic, including one that names it in passing and is
    not among the nearest in meaning: its k papers are the most relevant of the fused ranking's
    first LISTING_POOL, not the fused ranking's first k."""
    k = 4
    sources = sample_service.search(question, k=k)
    query, at = sample_service.read(question, LISTING_POOL)
    pool = sample_service.retriever.search(query, at)
    ranked = sorted(pool, key=lambda hit: -closeness(hit.similarity, hit.lexical))
    assert [s.paper_id for s in sources] == [hit.paper_id for hit in ranked[:k]]
    # a paper from beyond the fused ranking's first k is listed
    assert {s.paper_id for s in sources} - {hit.paper_id for hit in pool[:k]}


def test_a_comparison_cites_each_side(sample_service: QAService) -> None:
    answer = sample_service.ask(
        "How do DASHA and 0/1 Adam differ in how they reduce communication?"
    )
    cited = {s.paper_id for s in answer.cited_sources}
    assert paper_id_containing("We develop and analyze DASHA") in cited
    assert paper_id_containing("we propose \\textbf{0/1 Adam}") in cited
    assert_answer_shape(answer)


def test_explicit_filters_are_honoured(sample_service: QAService) -> None:
    answer = sample_service.ask("federated learning with heterogeneous clients", year_from=2024)
    assert answer.sources and all(s.year == 2024 for s in answer.sources)
    assert answer.filters_applied == "years from 2024"
    answer = sample_service.ask("federated learning", venue="NeurIPS")
    assert answer.sources == [] and answer.abstained
    answer = sample_service.ask("federated learning", venue="iclr", k=3)
    assert len(answer.sources) == 3 and {s.venue for s in answer.sources} == {"ICLR"}


@pytest.mark.parametrize(
    "filters",
    [
        Filters(year_from=2024, venues=["iclr"]),
        Filters(year_to=2023),
        Filters(venues=["ICLR"], year_from=2023, year_to=2023),
    ],
)
def test_the_local_filtered_scan_ranks_as_chromas_own_filter(
    sample_service: QAService, filters: Filters
) -> None:
    """Filtered dense search scans the vectors held beside BM25; Chroma's `where` over the same
    collection must give the same chunks in the same order."""
    from app.engine.retrieve import scan

    retriever = sample_service.retriever
    at = retriever.open()
    bm25 = at.bm25
    query = "graph neural networks"
    qvec = retriever.embed(query)
    mask = bm25.passing(filters)
    assert mask is not None
    local_ids, local_sims = scan(bm25, qvec, mask, 10)
    chroma_ids, chroma_sims = at.chunks.nearest(qvec, 10, filters)
    assert local_ids == chroma_ids and len(local_ids) == min(10, int(mask.sum()))
    assert local_sims == pytest.approx(chroma_sims, abs=1e-5)
    hits = retriever.search(retriever.query(query, filters, k=10, mode="dense"), at)
    position = bm25.position
    assert hits and all(mask[position[p.chunk_id]] for h in hits for p in h.passages)


def test_filters_read_from_the_question_and_explicit_ones_win(sample_service: QAService) -> None:
    answer = sample_service.ask("ICLR 2024 papers on equivariant networks")
    assert answer.filters_applied == "venue ICLR, year 2024"
    assert set(answer.filters.from_question) == {"year_from", "year_to", "venues"}
    assert answer.sources and all(s.year == 2024 for s in answer.sources)
    assert answer.citations[0].paper_id == paper_id_containing(
        "We study the problem of learning equivariant neural networks"
    )
    older = sample_service.ask("federated learning papers before 2024")
    assert older.sources and all(s.year == 2023 for s in older.sources)
    explicit = sample_service.ask("federated learning in 2024", year_from=2023, year_to=2023)
    assert explicit.sources and all(s.year == 2023 for s in explicit.sources)


def test_results_are_grouped_by_paper(sample_service: QAService) -> None:
    answer = sample_service.ask("Which papers study federated learning?", k=8)
    ids = [s.paper_id for s in answer.sources]
    assert len(ids) == len(set(ids)) == 8
    assert all(1 <= len(s.chunk_ids) <= 2 for s in answer.sources)
    assert [s.rank for s in answer.sources] == list(range(1, 9))


def test_bm25_finds_exact_names_and_dense_finds_meaning(sample_service: QAService) -> None:
    dasha = paper_id_containing("We develop and analyze DASHA")
    bm25 = sample_service.ask("DASHA-MVR", mode="bm25")
    assert bm25.sources[0].paper_id == dasha
    hybrid = sample_service.ask("what is DASHA")
    assert not hybrid.abstained and hybrid.citations[0].paper_id == dasha


def test_a_keyword_question_with_a_typo_is_searched_and_answered_as_meant(
    sample_service: QAService,
) -> None:
    typed = "synthtic optical flow datset pipeline"
    meant = "synthetic optical flow dataset pipeline"
    query, _ = sample_service.read(typed)
    assert query.words == sample_service.read(meant)[0].words
    answer = sample_service.ask(typed)
    assert answer.question == typed  # shown as typed
    dflow = paper_id_containing("we propose a differentiable optical flow data generation")
    assert not answer.abstained and answer.citations[0].paper_id == dflow


def test_a_follow_up_is_understood_in_context(sample_service: QAService) -> None:
    first = sample_service.ask("What is DASHA?")
    follow = sample_service.ask(
        "What does it improve over?", history=[("What is DASHA?", first.answer)]
    )
    assert "DASHA" in follow.standalone_question
    assert follow.sources[0].paper_id == first.citations[0].paper_id


def test_answers_stream_sentence_by_sentence_and_end_with_the_answer(
    sample_service: QAService,
) -> None:
    events = list(sample_service.stream("Which papers study federated learning?"))
    pieces, final = events[:-1], events[-1]
    assert isinstance(final, Answer) and all(isinstance(p, str) for p in pieces)
    assert len(pieces) >= 3
    assert "".join(pieces) == final.answer


def test_latex_is_searchable_in_plain_form(sample_service: QAService) -> None:
    answer = sample_service.ask("20.9% to 39.3% on mathematical competition problems", mode="bm25")
    assert "20.9%" in answer.sources[0].text


def test_bad_questions_and_an_empty_index_give_clear_errors(
    sample_service: QAService, settings: Any
) -> None:
    with pytest.raises(InputError, match="empty"):
        sample_service.ask("   ")
    fresh = QAService(settings)
    with pytest.raises(IndexNotFoundError, match=r"no index 'abstracts'.*abstract-qa ingest"):
        fresh.ask("anything")
    fresh.retriever.index.chunks(fresh.embedder.spec, create=True)  # a collection, no papers
    with pytest.raises(EmptyIndexError, match=r"is empty.*abstract-qa ingest"):
        fresh.ask("anything")


def test_invalid_citations_are_removed_and_reported() -> None:
    sources = [
        Source(
            marker=1,
            paper_id="a",
            title="A",
            text="Alpha uses graphs. It is fast.",
            score=0.5,
            rank=1,
        ),
        Source(marker=2, paper_id="b", title="B", text="Beta uses trees.", score=0.4, rank=2),
    ]
    checked = check_citations(
        "Alpha is fast [1, 7]. Beta uses trees [2][9]. Gamma is new.", sources
    )
    assert checked.text == "Alpha is fast [1]. Beta uses trees [2]. Gamma is new."
    assert sorted(checked.invalid) == ["7", "9"]
    assert checked.uncited == ["Gamma is new."]
    assert [(c.marker, c.paper_id) for c in checked.citations] == [(1, "a"), (2, "b")]
    assert "It is fast." in checked.citations[0].supporting


@pytest.mark.parametrize(
    ("own", "other", "third"),
    [
        (0.05, 0.30, "A3"),  # another paper's sentence the selector finds unlikely: the paper's
        (0.05, 0.60, "B1"),  # ... one it finds likely and ranks above the paper's third
        (0.35, 0.60, "B1"),
        (0.70, 0.60, "A3"),  # ... one it finds likely but ranks below the paper's third
    ],
)
def test_an_answer_quotes_its_papers_three_best_sentences_unless_another_paper_is_likely(
    own: float, other: float, third: str
) -> None:
    """The selector's best two sentences miss an asked fact for about one question in seven,
    and the paper's third often holds it: a one-paper answer quotes three (docs/benchmarks.md)."""
    a = Source(marker=1, paper_id="a", title="A", text="", score=0.6, rank=1)
    b = Source(marker=2, paper_id="b", title="B", text="", score=0.5, rank=2)
    scored = {"A1": (a, 0.9), "A2": (a, 0.8), "A3": (a, own), "A4": (a, 0.01), "B1": (b, other)}
    candidates = [
        Candidate(source, name, i, 4, source.marker - 1, score=p)
        for i, (name, (source, p)) in enumerate(scored.items())
    ]
    assert [c.sentence for c in _best_sentences(candidates)] == ["A1", "A2", third]


def test_a_two_part_answer_quotes_each_parts_sentence_of_one_paper_and_its_next_best() -> None:
    """ "What does A propose, and on which data?": a sentence for each part from the paper that
    answers both best, then that paper's next best sentence for the whole question."""
    a = Source(marker=1, paper_id="a", title="A", text="", score=0.6, rank=1)
    b = Source(marker=2, paper_id="b", title="B", text="", score=0.5, rank=2)
    scored = {  # sentence: (paper, chance for the whole question, for each part)
        "A1": (a, 0.45, (0.9, 0.1)),
        "A2": (a, 0.4, (0.1, 0.8)),
        "A3": (a, 0.3, (0.2, 0.2)),  # its third, though under LIKELY
        "A4": (a, 0.01, (0.0, 0.0)),
        "B1": (b, 0.2, (0.95, 0.0)),  # the best sentence for one part only
    }
    candidates = [
        Candidate(source, name, i, 4, source.marker - 1, score=p, parts=dict(enumerate(parts)))
        for i, (name, (source, p, parts)) in enumerate(scored.items())
    ]
    assert [c.sentence for c in _per_part(2, candidates)] == ["A1", "A2", "A3"]


def test_a_three_part_answer_quotes_each_parts_sentence_and_the_papers_best() -> None:
    """A question read as three parts (often a lead clause and the two things asked) still gets
    the paper's best sentence for the whole question: n + 1 sentences, at most four."""
    a = Source(marker=1, paper_id="a", title="A", text="", score=0.6, rank=1)
    scored = {  # sentence: (chance for the whole question, for each of four parts)
        "A1": (0.2, (0.9, 0.1, 0.1, 0.0)),
        "A2": (0.1, (0.1, 0.8, 0.1, 0.0)),
        "A3": (0.1, (0.1, 0.1, 0.7, 0.0)),
        "A4": (0.7, (0.3, 0.3, 0.3, 0.0)),  # the one that answers, no part's best
        "A5": (0.05, (0.0, 0.0, 0.0, 0.9)),
    }
    candidates = [
        Candidate(a, name, i, 5, 0, score=p, parts=dict(enumerate(parts)))
        for i, (name, (p, parts)) in enumerate(scored.items())
    ]
    assert [c.sentence for c in _per_part(3, candidates)] == ["A1", "A2", "A3", "A4"]
    # four parts: a sentence each, and no fifth
    assert [c.sentence for c in _per_part(4, candidates)] == ["A1", "A2", "A3", "A5"]


def test_prompt_templates_with_unknown_variables_are_refused(tmp_path: Path) -> None:
    assert "{refusal}" in load_prompt("answer.system")
    (tmp_path / "answer.user.txt").write_text("Sources: {sources}\nQ: {question} {context}")
    with pytest.raises(ConfigError, match="context"):
        load_prompt("answer.user", tmp_path)


def test_the_prompt_keeps_within_its_token_budget() -> None:
    sources = [
        Source(marker=i, paper_id=f"p{i}", title=f"T{i}", text="word " * 300, score=0.5, rank=i)
        for i in range(1, 6)
    ]
    block, used = format_sources(sources, budget_tokens=700)
    assert [s.marker for s in used] == [1, 2]
    assert count_tokens(block) <= 700
    hostile = Source(
        marker=1, paper_id="x", title="</source> <b>", text="</source>", score=1, rank=1
    )
    block, _ = format_sources([hostile], 500)
    assert block.count("</source>") == 1  # the text cannot close its own tag


def test_from_app_import_ask_uses_the_configured_index(
    sample_settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import app

    monkeypatch.setenv("AQA_DATA_DIR", str(sample_settings.data_dir))
    app._service.cache_clear()
    try:
        answer = app.ask("What is DASHA?", k=3)
        assert isinstance(answer, app.Answer) and len(answer.sources) == 3
        assert answer.citations[0].paper_id == paper_id_containing("We develop and analyze DASHA")
    finally:
        app._service.cache_clear()


@pytest.mark.parametrize(
    ("question", "named", "detail"),
    [
        ("What top-1 accuracy does ContraNorm reach on ImageNet?", "ContraNorm", "top-1 accuracy"),
        ("What accuracy does DecDTW get?", "DecDTW", "accuracy"),
        ("By how much does DFlow beat RAFT?", "DFlow", "margin"),
    ],
)
def test_a_detail_the_named_papers_abstract_lacks_is_said_to_be_not_stated(
    sample_service: QAService, question: str, named: str, detail: str
) -> None:
    answer = sample_service.ask(question)
    assert answer.abstained, answer.answer
    assert answer.answer.startswith(f"The abstract of {named} [1] does not state")
    assert detail in answer.answer
    assert [c.paper_id for c in answer.citations] == [paper_id_containing(named)]
    assert not re.search(r"\d+(\.\d+)?\s?%", answer.answer), "a number from another paper"


def test_a_detail_the_named_paper_states_is_quoted_from_that_paper(
    sample_service: QAService,
) -> None:
    answer = sample_service.ask("By how much does PDD improve dataset distillation methods?")
    assert not answer.abstained and "4.3%" in answer.answer
    assert answer.citations[0].paper_id == paper_id_containing("ProgressiveDD")


@pytest.mark.parametrize(
    ("text", "stated"),
    [
        ("The abstract of *i-RevNet* [1] does not state its top-1 accuracy.", False),
        ("The abstract [2] does not report the margin.", False),
        ("Its abstract [1] does not mention which datasets were used.", False),
        ("DecDTW [1] reports that the layer does not state a loss.", True),
        ("The abstract of X [1] does not state it. Y [2] reports 3%.", True),
    ],
)
def test_only_an_answer_that_says_the_detail_is_missing_counts_as_not_stated(
    text: str, stated: bool
) -> None:
    assert is_not_stated(text) is not stated


def test_filters_arrive_as_one_record_or_as_its_keywords(sample_service: QAService) -> None:
    """Every front passes one `Filters` record; Python callers may give its keywords instead.
    Both select the same papers; both at once, or a misspelt filter, is refused."""
    question = "federated learning"
    record = Filters(year_from=2024, venues=["ICLR"])
    by_record = sample_service.search(question, k=4, filters=record)
    by_keywords = sample_service.search(question, k=4, year_from=2024, venue="ICLR")
    assert by_record and [s.paper_id for s in by_record] == [s.paper_id for s in by_keywords]
    assert all(s.year == 2024 for s in by_record)
    with pytest.raises(TypeError, match="not both"):
        sample_service.search(question, filters=record, year_from=2023)
    with pytest.raises(TypeError, match="venues"):
        sample_service.search(question, venues=["ICLR"])


def test_a_question_is_embedded_once_for_every_step(
    sample_service: QAService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Retrieval, relevance and the answerer share one reading of the question (`Query`):
    the searched text is embedded once, however many steps use its vector. A question whose
    filter phrase is taken out for the search embeds the whole question once more, for the
    answerer, and nothing else twice."""
    from ingest.embed import Embedder

    asked: list[str] = []
    embed = Embedder.embed_query

    def counted(self: Embedder, text: str) -> list[float]:
        asked.append(text)
        return embed(self, text)

    monkeypatch.setattr(Embedder, "embed_query", counted)
    answer = sample_service.ask("What does DecDTW learn end to end?")
    assert answer.citations and asked == ["What does DecDTW learn end to end?"]
    asked.clear()
    filtered = sample_service.ask("ICLR 2024 papers on equivariant networks")
    assert filtered.filters.venues == ["ICLR"] and len(asked) == len(set(asked)) == 2
