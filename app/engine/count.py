"""Counting and trend questions, answered from metadata: "How has work on X grown since 2015?",
"Which venues publish most on bandits?". The papers that match the topic are counted exactly
by year, venue and decision; no model guesses a number."""

from __future__ import annotations

from collections import Counter

import numpy as np

from app.query.record import Query
from core.models import Counts
from store.index import Snapshot

MIN_SIMILARITY = 0.55
"""A paper matches a topic when one of its chunks holds every word of the topic, or is this
close to it in meaning (cosine similarity of all-MiniLM-L6-v2)."""


def count_papers(topic: Query, at: Snapshot) -> tuple[Counts, list[str]]:
    """The counts for the ``topic`` under its filters, and the matching paper ids, nearest
    first."""
    bm25 = at.bm25
    sims = bm25.vectors @ topic.vector if len(bm25.chunk_ids) else np.zeros(0, dtype=np.float32)
    matched = bm25.holding_all(topic.words) | (sims >= MIN_SIMILARITY)
    mask = bm25.passing(topic.filters)
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
        topic=topic.text,
        rule=(
            f"abstracts holding every word of “{topic.text}”, or within cosine similarity "
            f"{MIN_SIMILARITY:.2f} of it"
            + (f", with the filters {topic.filters.describe()}" if topic.filters.active else "")
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
