"""The pure parts of retrieval: fusion variants against hand-computed references, grouping by
paper, merging rankings, the masked exact scan, filters over the stored facets."""

from __future__ import annotations

import numpy as np
import pytest

from app.engine.retrieve import RRF_K, PaperHit, Passage, Ranking, by_paper, fuse, merge_hits, scan
from core.models import Filters
from core.tokens import words
from store.bm25 import BM25Index
from store.records import StoredChunk

DENSE = ["a:0", "b:0", "c:0"]
BM25 = ["c:0", "d:0"]
SIMILARITY = {"a:0": 0.9, "b:0": 0.8, "c:0": 0.7, "d:0": 0.2}
LEXICAL = {"a:0": 0.0, "b:0": 0.0, "c:0": 6.0, "d:0": 3.0}
BOTH = Ranking(DENSE, BM25, SIMILARITY, LEXICAL)


def test_rrf_is_weighted_reciprocal_rank() -> None:
    fused = fuse("rrf", 0.7, BOTH)

    def rr(rank: int) -> float:
        return 1 / (RRF_K + rank)

    assert fused == pytest.approx(
        {
            "a:0": 1.4 * rr(1),
            "b:0": 1.4 * rr(2),
            "c:0": 1.4 * rr(3) + 0.6 * rr(1),
            "d:0": 0.6 * rr(2),
        }
    )


def test_convex_weighs_similarity_and_the_bm25_score_scaled_by_its_maximum() -> None:
    fused = fuse("convex", 0.7, BOTH)
    assert fused == pytest.approx(
        {"a:0": 0.63, "b:0": 0.56, "c:0": 0.7 * 0.7 + 0.3, "d:0": 0.7 * 0.2 + 0.3 * 0.5}
    )
    assert max(fused, key=fused.__getitem__) == "c:0"  # found by both rankers


@pytest.mark.parametrize("fusion", ["rrf", "convex"])
def test_one_ranking_alone_keeps_its_order(fusion: str) -> None:
    for dense, lexical in ((DENSE, []), ([], BM25)):
        fused = fuse(fusion, 0.7, Ranking(dense, lexical, SIMILARITY, LEXICAL))  # type: ignore[arg-type]
        assert sorted(fused, key=lambda c: -fused[c]) == (dense or lexical)


def index(rows: list[tuple[str, str, int | None, str | None, list[str]]]) -> BM25Index:
    """A small BM25 index: (chunk id, text, year, venue, authors) per row, one-hot vectors."""
    records = [
        (
            StoredChunk(
                cid, cid.split(":")[0], text=text, year=year, venue=venue, authors=tuple(authors)
            ),
            np.eye(len(rows), dtype=np.float32)[i],
        )
        for i, (cid, text, year, venue, authors) in enumerate(rows)
    ]
    return BM25Index.build(records, "g1")


ROWS = [
    ("p1:0", "graph neural networks", 2020, "ICLR", ["Ada Lovelace"]),
    ("p1:1", "message passing on graphs", 2020, "ICLR", ["Ada Lovelace"]),
    ("p2:0", "diffusion models for images", 2023, "NeurIPS", ["Alan Turing", "A. Lovelace"]),
    ("p3:0", "bandits with graph feedback", None, None, []),
]


def test_grouping_by_paper_keeps_k_papers_and_caps_their_chunks() -> None:
    bm25 = index(ROWS)
    fused = {"p1:0": 0.9, "p1:1": 0.8, "p2:0": 0.7, "p3:0": 0.6, "p9:4": 0.95}
    # p9:4 was added after the BM25 snapshot: its id names its paper
    assert by_paper(fused, 2, 2, bm25) == {"p9": ["p9:4"], "p1": ["p1:0", "p1:1"]}
    assert by_paper(fused, 3, 1, bm25) == {"p9": ["p9:4"], "p1": ["p1:0"], "p2": ["p2:0"]}


def test_merged_rankings_keep_the_first_place_of_each_paper() -> None:
    def hits(*ids: str) -> list[PaperHit]:
        return [PaperHit(pid, [Passage(StoredChunk(f"{pid}:0", pid))]) for pid in ids]

    merged = merge_hits([hits("b"), hits("c"), hits("a", "b", "d")], 3)
    assert [h.paper_id for h in merged] == ["b", "c", "a"]


@pytest.mark.parametrize(
    ("filters", "rows"),
    [
        (Filters(), None),
        (Filters(year_from=2021), ["p2:0"]),
        (Filters(year_to=2020), ["p1:0", "p1:1"]),  # an unknown year passes no year filter
        (Filters(venues=["iclr", "Other"]), ["p1:0", "p1:1"]),
        (Filters(authors=["Lovelace"]), ["p1:0", "p1:1", "p2:0"]),
        (Filters(authors=["A. Lovelace"], year_from=2021), ["p2:0"]),
        (Filters(authors=["Nobody"]), []),
    ],
)
def test_filters_over_the_stored_facets(filters: Filters, rows: list[str] | None) -> None:
    bm25 = index(ROWS)
    mask = bm25.passing(filters)
    if rows is None:
        assert mask is None
    else:
        assert mask is not None and [bm25.chunk_ids[i] for i in np.flatnonzero(mask)] == rows


def test_the_masked_scan_is_exact_and_ordered() -> None:
    bm25 = index(ROWS)
    query = np.array([0.1, 0.5, 0.3, 0.9], dtype=np.float32)
    mask = np.array([True, True, True, False])
    assert scan(bm25, query, mask, 2) == (["p1:1", "p2:0"], pytest.approx([0.5, 0.3]))
    assert scan(bm25, query, np.zeros(4, dtype=bool), 2) == ([], [])


@pytest.mark.parametrize("passing", [1, 3, 10, 40])
def test_narrow_and_broad_masks_scan_the_same_way(passing: int) -> None:
    """A narrow mask reads only its rows, a broad one the whole matrix: same exact answer."""
    rng = np.random.default_rng(passing)
    rows = [(f"p{i}:0", f"text {i}", 2020, "ICLR", []) for i in range(40)]
    bm25 = index(rows)
    bm25.vectors = rng.normal(size=(40, 16)).astype(np.float32)
    query = rng.normal(size=16).astype(np.float32)
    mask = np.zeros(40, dtype=bool)
    mask[rng.choice(40, passing, replace=False)] = True
    sims = bm25.vectors @ query
    expected = sorted(np.flatnonzero(mask), key=lambda i: -sims[i])[:5]
    ids, got = scan(bm25, query, mask, 5)
    assert ids == [bm25.chunk_ids[i] for i in expected]
    assert got == pytest.approx([float(sims[i]) for i in expected], abs=1e-5)


def test_bm25_scores_and_coverage_read_the_same_words() -> None:
    bm25 = index(ROWS)
    scores = bm25.scores(words(["graphs"])[0])
    assert [bm25.chunk_ids[i] for i in np.flatnonzero(scores)] == ["p1:0", "p1:1", "p3:0"]
    assert bm25.holding_all(words(["graph feedback"])[0]).tolist() == [False, False, False, True]
    query = words(["graph diffusion"])[0]
    assert bm25.coverage(query, ["a graph", "graph diffusion", "nothing"])[1] == 1.0
    assert bm25.unseen(["XYZZY", "Diffusion"]) == ["XYZZY"]


def test_a_misspelt_search_word_is_searched_as_the_indexed_word_meant() -> None:
    """Keyword questions carry typos ("difusion models benchmakrs"); a typo matches no chunk and
    weighs the most in lexical coverage, so it used to sink the right paper's relevance."""
    bm25 = index(ROWS)
    assert bm25.spelled("difusion modles for imgaes") == words(["diffusion models for images"])[0]
    assert bm25.spelled("bandits with graph feedbakc") == words(["bandits with graph feedback"])[0]
    # a misspelt stopword is dropped, not read as another word ("thier" is not "tier")
    assert bm25.spelled("thier graph feedback") == words(["graph feedback"])[0]
    # searched as typed: a capitalised name, an English word ("modes" is not "models"), a word
    # of three letters, one nothing indexed is one edit from, a word with an accent
    for typed in ("Difusion", "modes", "grp", "quokkasgd", "difusiön"):
        assert bm25.spelled(f"{typed} models") == words([f"{typed} models"])[0]
    text = "message passing on graph neural networks"
    assert bm25.spelled(text) == words([text])[0]


def test_the_word_meant_is_reached_by_the_likeliest_edit_then_the_commonest() -> None:
    rows = [
        ("a:0", "early stopping of training", None, None, []),
        *[(f"s{i}:0", f"storing weights {i}", None, None, []) for i in range(6)],
        ("x:0", "gradient boosting with xgboost", None, None, []),
    ]
    bm25 = index(rows)
    # "stoping" is "stopping" with a letter dropped, though more chunks hold "storing"
    assert bm25.spelled("stoping rule") == words(["stopping rule"])[0]
    # a word English does not know is meant only if enough chunks hold it
    assert bm25.spelled("xgbost") == words(["xgbost"])[0]
