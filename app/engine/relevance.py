"""How relevant a source is to a question, and the relevance an answer needs."""

from __future__ import annotations

import math

import numpy as np

from app.query.record import Query
from core.models import Source

# How relevance weighs its parts, and how its threshold grows with the index: fitted on the
# 57-paper sample and the 21,958-paper corpus so that every question far from the corpus is
# refused at both sizes with the fewest answerable ones refused (docs/benchmarks.md, "Refusals").
LEXICAL_WEIGHT = 0.5
TYPICALITY_WEIGHT = 0.5
THRESHOLD_BASE = 0.17
THRESHOLD_PER_DECADE = 0.137


def relevance(source: Source, typicality: float) -> float:
    """How well a source answers the question: how close it is (`closeness`), plus how typical
    of the whole corpus the question is (its similarity to the mean chunk vector: a question
    about honeybees is not typical of a machine-learning corpus, whatever passage is nearest)."""
    return closeness(source.score, source.lexical) + TYPICALITY_WEIGHT * typicality


def closeness(similarity: float, lexical: float) -> float:
    """The part of relevance that ranks one question's papers: the cosine similarity of the
    paper's best passage plus the share of the question's distinctive words (idf) it holds."""
    return similarity + LEXICAL_WEIGHT * lexical


def typicality(query: Query, centroid: np.ndarray) -> float:
    """How typical of the corpus the query is: its cosine similarity to the unit mean chunk
    vector (0 for an empty index)."""
    return float(query.vector @ centroid) if len(centroid) else 0.0


def relevance_threshold(chunks: int, fixed: float | None = None) -> float:
    """The relevance an answer needs. The nearest of N unrelated passages is nearer the larger
    N is, so the threshold rises with the log of the index size (0.42 at 65 chunks, 0.77 at
    23,800) unless the settings fix it."""
    if fixed is not None:
        return fixed
    return round(THRESHOLD_BASE + THRESHOLD_PER_DECADE * math.log10(max(chunks, 10)), 4)
