"""Metadata filters: given explicitly, or read from the question ("ICLR 2024 papers on ...")."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

_Y = r"((?:19[5-9]|20\d)\d)"
_RANGE = re.compile(
    rf"\b(?:(?:between|from|in)\s+)?{_Y}\s*(?:-|\u2013|to|and|until)\s*{_Y}\b", re.IGNORECASE
)
_SINCE = re.compile(rf"\b(since|after|from|starting(?: in)?)\s+{_Y}\b", re.IGNORECASE)
_BEFORE = re.compile(rf"\b(before|prior to|until|up to|through|by)\s+{_Y}\b", re.IGNORECASE)
_SINGLE = re.compile(rf"\b(?:in\s+)?{_Y}\b", re.IGNORECASE)
_DECISIONS = ("oral", "spotlight", "poster", "rejected")
_DECISION = re.compile(
    r"\b(" + "|".join(_DECISIONS) + r")\s+(?:papers?|presentations?|talks?)\b", re.IGNORECASE
)
VENUE_ALIASES = {"nips": "neurips"}


class Filters(BaseModel):
    """Which papers may be retrieved. Empty lists and None mean no restriction."""

    year_from: int | None = Field(default=None, description="Earliest year, inclusive.")
    year_to: int | None = Field(default=None, description="Latest year, inclusive.")
    venues: list[str] = Field(default_factory=list, description="Venues, case-insensitive.")
    decisions: list[str] = Field(default_factory=list, description="Decisions, e.g. Oral.")
    from_question: list[str] = Field(
        default_factory=list, description="Which of the filters were read from the question."
    )

    @property
    def active(self) -> bool:
        return bool(
            self.year_from is not None or self.year_to is not None or self.venues or self.decisions
        )

    def describe(self) -> str:
        parts = []
        if self.venues:
            parts.append("venue " + " or ".join(self.venues))
        if self.year_from is not None and self.year_from == self.year_to:
            parts.append(f"year {self.year_from}")
        elif self.year_from is not None and self.year_to is not None:
            parts.append(f"years {self.year_from} to {self.year_to}")
        elif self.year_from is not None:
            parts.append(f"years from {self.year_from}")
        elif self.year_to is not None:
            parts.append(f"years up to {self.year_to}")
        if self.decisions:
            parts.append("decision " + " or ".join(self.decisions))
        return ", ".join(parts) or "none"

    def merged_over(self, parsed: Filters) -> Filters:
        """These (explicit) filters, with the question's filling only what was not given."""
        fields = ("year_from", "year_to", "venues", "decisions")
        merged: dict[str, Any] = {}
        used: list[str] = []
        years_given = self.year_from is not None or self.year_to is not None
        for name in fields:
            mine, theirs = getattr(self, name), getattr(parsed, name)
            explicit = years_given if name.startswith("year") else bool(mine)
            merged[name] = mine if explicit else theirs
            if not explicit and theirs not in (None, []):
                used.append(name)
        return Filters(**merged, from_question=used)

    def chroma_where(self) -> dict[str, Any] | None:
        clauses: list[dict[str, Any]] = []
        if self.year_from is not None:
            clauses.append({"year": {"$gte": self.year_from}})
        if self.year_to is not None:
            clauses.append({"year": {"$lte": self.year_to}})
        if self.venues:
            clauses.append({"venue_key": {"$in": [v.casefold() for v in self.venues]}})
        if self.decisions:
            clauses.append({"decision_key": {"$in": [d.casefold() for d in self.decisions]}})
        if not clauses:
            return None
        return clauses[0] if len(clauses) == 1 else {"$and": clauses}

    def mask(self, facets: dict[str, np.ndarray]) -> np.ndarray | None:
        """A boolean array over BM25 chunks: True where the chunk passes the filters.

        ``facets`` holds one array per facet: ``year`` as integers (-1 when unknown), ``venue``
        and ``decision`` case-folded ("" when unknown)."""
        if not self.active:
            return None
        years = facets["year"]
        keep = np.ones(len(years), dtype=bool)
        if self.year_from is not None or self.year_to is not None:
            keep &= years >= 0
            if self.year_from is not None:
                keep &= years >= self.year_from
            if self.year_to is not None:
                keep &= years <= self.year_to
        for name, wanted in (("venue", self.venues), ("decision", self.decisions)):
            if wanted:
                keep &= np.isin(facets[name], [w.casefold() for w in wanted])
        return keep


def parse_filters(question: str, known_venues: Iterable[str]) -> tuple[Filters, str]:
    """Filters stated in the question, and the question with those phrases taken out."""
    text = question
    found: dict[str, Any] = {}

    def cut(match: re.Match[str]) -> None:
        nonlocal text
        text = text.replace(match.group(0), " ", 1)

    if m := _RANGE.search(text):
        a, b = (int(g) for g in m.groups() if g)
        found["year_from"], found["year_to"] = min(a, b), max(a, b)
        cut(m)
    else:
        if m := _SINCE.search(text):
            year = int(m.group(2))
            found["year_from"] = year + 1 if m.group(1).lower() == "after" else year
            cut(m)
        if m := _BEFORE.search(text):
            year = int(m.group(2))
            found["year_to"] = year - 1 if m.group(1).lower() in ("before", "prior to") else year
            cut(m)
        if not found and (m := _SINGLE.search(text)):
            found["year_from"] = found["year_to"] = int(m.group(1))
            cut(m)
    venues = []
    for venue in sorted({v for v in known_venues if v and len(v) >= 3}, key=len, reverse=True):
        aliases = [a for a, target in VENUE_ALIASES.items() if target == venue.casefold()]
        names = [venue, *aliases]
        for name in names:
            if m := re.search(rf"\b{re.escape(name)}\b", text, re.IGNORECASE):
                venues.append(venue)
                cut(m)
                break
    if venues:
        found["venues"] = venues
    if m := _DECISION.search(text):
        found["decisions"] = [m.group(1).casefold()]
        cut(m)
    cleaned = " ".join(text.split())
    return Filters(**found), cleaned or question
