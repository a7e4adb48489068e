"""Counting and trend questions, answered from metadata: "How has work on X grown since 2015?",
"Which venues publish most on bandits?". The papers that match the topic are counted exactly
by year, venue and decision; no model guesses a number."""

from __future__ import annotations

from collections import Counter

import numpy as np

from app.engine.retrieve import Retriever
from core.models import Counts, Filters
from store.index import Snapshot

MIN_SIMILARITY = 0.55
"""A paper matches a topic when one of its chunks holds every word of the topic, or is this
close to it in meaning (cosine similarity of all-MiniLM-L6-v2)."""


def count_papers(
    retriever: Retriever, topic: str, filters: Filters, at: Snapshot | None = None
) -> tuple[Counts, list[str]]:
    """The counts for ``topic`` under ``filters``, and the matching paper ids, nearest first."""
    bm25 = (at or retriever.open()).bm25
    qvec = retriever.embed(topic)
    sims = bm25.vectors @ qvec if len(bm25.chunk_ids) else np.zeros(0, dtype=np.float32)
    matched = bm25.holding_all(topic) | (sims >= MIN_SIMILARITY)
    mask = bm25.passing(filters)
    if mask is not None:
        matched &= mask
    best: dict[str, tuple[float, int]] = {}
    for row in np.flatnonzero(matched):
        paper = str(bm25.facets["paper_id"][row])
        if paper not in best or sims[row] > best[paper][0]:
            best[paper] = (float(sims[row]), int(row))
    rows = [row for _, row in best.values()]
    facets = bm25.facets

    def tally(name: str) -> Counter[str]:
        return Counter(str(facets[name][r]) for r in rows if facets[name][r] not in (None, ""))

    years = tally("year")
    counts = Counts(
        topic=topic,
        rule=(
            f"abstracts holding every word of “{topic}”, or within cosine similarity "
            f"{MIN_SIMILARITY:.2f} of it"
            + (f", with the filters {filters.describe()}" if filters.active else "")
        ),
        min_similarity=MIN_SIMILARITY,
        papers=len(best),
        by_year=dict(sorted(years.items())),
        by_venue=dict(tally("venue").most_common()),
        by_decision=dict(tally("decision").most_common()),
    )
    ranked = sorted(best, key=lambda p: -best[p][0])
    return counts, ranked


def describe(counts: Counts, examples: list[tuple[str, int]]) -> str:
    """The counts as one cited sentence: ``examples`` are (how to name a paper, its marker)."""
    if counts.papers == 0:
        return ""
    parts = [f"{counts.papers} paper{'s' if counts.papers != 1 else ''} in the index match "
             f"“{counts.topic}” ({counts.rule})"]  # fmt: skip
    if counts.by_year:
        parts.append("by year " + ", ".join(f"{y}: {n}" for y, n in counts.by_year.items()))
    if counts.by_venue:
        top = list(counts.by_venue.items())[:3]
        parts.append("most at " + ", ".join(f"{v} ({n})" for v, n in top))
    if examples:
        named = [f"{name} [{marker}]" for name, marker in examples]
        parts.append("for example " + ", ".join(named))
    return "; ".join(parts) + "."
