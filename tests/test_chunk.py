"""Chunking: sentence boundaries, token limits, overlap, spans that point into the abstract."""

from __future__ import annotations

from itertools import pairwise

from core.models import Paper
from core.tokens import count_tokens
from ingest.chunk import chunk_paper, split_spans
from ingest.read import read_paths
from tests.conftest import SAMPLE

LONG = " ".join(f"Sentence number {i} talks about topic {i % 7} at some length." for i in range(80))


def test_spans_respect_the_limit_sentence_boundaries_and_overlap() -> None:
    spans = split_spans(LONG, max_tokens=60, overlap_tokens=20)
    assert len(spans) > 5
    for start, end in spans:
        piece = LONG[start:end]
        assert count_tokens(piece) <= 60
        assert piece.startswith("Sentence") and piece.endswith(".")
    # consecutive chunks overlap by at least one whole sentence, and together cover the text
    for (s1, e1), (s2, _) in pairwise(spans):
        assert s1 < s2 < e1
    assert spans[0][0] == 0 and spans[-1][1] == len(LONG)


def test_a_sentence_longer_than_the_limit_is_cut_at_token_boundaries() -> None:
    text = "word " * 500 + "end."
    spans = split_spans(text.strip(), max_tokens=50, overlap_tokens=10)
    assert all(count_tokens(text[s:e]) <= 51 for s, e in spans)
    assert spans[-1][1] == len(text.strip())


def test_chunks_carry_ids_spans_and_title_context() -> None:
    paper = Paper(paper_id="p/1", title="A Title", abstract=LONG)
    chunks = chunk_paper(paper, max_tokens=120, overlap_tokens=30)
    assert [c.chunk_id for c in chunks] == [f"p/1:{i}" for i in range(len(chunks))]
    for chunk in chunks:
        assert chunk.text == LONG[chunk.start : chunk.end]
        assert chunk.embed_text.startswith("A Title. ")
        assert count_tokens(chunk.embed_text) <= 120
    assert len({c.content_hash for c in chunks}) == len(chunks)


def test_latex_is_normalised_in_the_embedded_text_only() -> None:
    paper = Paper(
        paper_id="x", title="T", abstract=r"We gain 40\% with \emph{SOTA} $\mathcal{O}(n)$ cost."
    )
    (chunk,) = chunk_paper(paper, 300, 48)
    assert chunk.text == paper.abstract
    assert chunk.embed_text == "T. We gain 40% with SOTA O(n) cost."


def test_most_sample_abstracts_stay_one_chunk() -> None:
    papers = read_paths([SAMPLE]).papers
    counts = [len(chunk_paper(p, 300, 48)) for p in papers]
    assert sum(c == 1 for c in counts) > len(counts) / 2


def test_a_sentence_two_chunks_share_is_shown_once() -> None:
    from app.engine.retrieve import joined
    from store.records import StoredChunk

    def chunk(index: int, text: str) -> StoredChunk:
        return StoredChunk(chunk_id=f"p:{index}", paper_id="p", index=index, text=text)

    a = chunk(0, "One sets the task. Two gives the method.")
    b = chunk(1, "Two gives the method. Three reports 40% gains.")
    far = chunk(3, "Five concludes.")
    assert joined([b, a]) == "One sets the task. Two gives the method. Three reports 40% gains."
    assert joined([far, a]) == "One sets the task. Two gives the method. … Five concludes."
