"""Metadata filters: given explicitly, or read from the question ("ICLR 2024 papers on ...")."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from ingest.text import author_query_key

_Y = r"((?:19[5-9]|20\d)\d)"
_NOT_AFTER = (
    r"(?![\w-]|\s*(?:style|-style|samples?|examples?|tokens?|steps?|images?|dimensions?|%))"
)
_RANGE = re.compile(
    rf"\b(?:(?:between|from|in)\s+)?{_Y}\s*(?:-|\u2013|to|and|until)\s*{_Y}{_NOT_AFTER}",
    re.IGNORECASE,
)
_SINCE = re.compile(
    rf"\b(?:(since|after|starting(?: in| from)?)\s+{_Y}|(from)\s+{_Y}\s+(?:onwards?|forwards?|"
    rf"on(?=\s*(?:[,.;:?!]|$))))",
    re.IGNORECASE,
)
_BEFORE = re.compile(rf"\b(before|prior to|until|up to|through)\s+{_Y}\b", re.IGNORECASE)
# one year, only in year phrasing: "in 2019", "a paper from 2017", "2019 papers", "(2019)"
_SINGLE = re.compile(
    rf"\b(?:(?:in|from|during|of the year|published in|year)\s+{_Y}{_NOT_AFTER}|"
    rf"{_Y}\s+(?:papers?|works?|articles?|publications?|proceedings|conference|edition|"
    rf"submissions?)\b)",
    re.IGNORECASE,
)
_DECISIONS = ("oral", "spotlight", "poster", "rejected")
_DECISION = re.compile(
    r"\b(" + "|".join(_DECISIONS) + r")\s+(?:papers?|presentations?|talks?)\b", re.IGNORECASE
)
_NAME = r"(?:[A-Z][\w'\u2019-]*\.?|(?:van|der|de|von|la|le|di|da|del|du)\b)"
_PERSON = rf"([A-Z][\w'\u2019-]*\.?(?:\s+{_NAME}){{0,3}})"  # starts with a capital
_AUTHOR = re.compile(
    rf"\b(?:(?:papers?|works?|articles?|studies)\s+(?:by|from)\s+{_PERSON}|(?:by|authored by|"
    rf"written by|work of|papers of)\s+{_PERSON}|{_PERSON}\s+et\s+al\.?|{_PERSON}(?:'s|\u2019s)\s+"
    rf"(?:work|papers?|research|studies|articles?))"
)
VENUE_ALIASES = {"nips": "neurips"}


class Filters(BaseModel):
    """Which papers may be retrieved. Empty lists and None mean no restriction."""

    year_from: int | None = Field(default=None, description="Earliest year, inclusive.")
    year_to: int | None = Field(default=None, description="Latest year, inclusive.")
    venues: list[str] = Field(default_factory=list, description="Venues, case-insensitive.")
    decisions: list[str] = Field(default_factory=list, description="Decisions, e.g. Oral.")
    authors: list[str] = Field(
        default_factory=list,
        description="Authors, as people write them: case, accents and initials do not matter "
        '("Schölkopf", "Scholkopf", "B. Schölkopf"). A paper passes with any of them.',
    )
    from_question: list[str] = Field(
        default_factory=list, description="Which of the filters were read from the question."
    )

    @property
    def active(self) -> bool:
        return bool(
            self.year_from is not None
            or self.year_to is not None
            or self.venues
            or self.decisions
            or self.authors
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
        if self.authors:
            parts.append("author " + " or ".join(self.authors))
        return ", ".join(parts) or "none"

    def merged_over(self, parsed: Filters) -> Filters:
        """These (explicit) filters, with the question's filling only what was not given."""
        fields = ("year_from", "year_to", "venues", "decisions", "authors")
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

    def without(self, names: Iterable[str]) -> Filters:
        """These filters less the named ones ("year", "venues", "decisions", "authors")."""
        drop = set(names)
        update: dict[str, Any] = {}
        if "year" in drop:
            update |= {"year_from": None, "year_to": None}
        update |= {name: [] for name in ("venues", "decisions", "authors") if name in drop}
        kept = [f for f in self.from_question if f not in drop and f.split("_")[0] not in drop]
        return self.model_copy(update={**update, "from_question": kept})

    def chroma_where(self) -> dict[str, Any] | None:
        """The filters as Chroma's ``where`` (authors cannot be: the caller scans locally)."""
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

    def mask(
        self, facets: dict[str, np.ndarray], authors: Mapping[str, np.ndarray] | None = None
    ) -> np.ndarray | None:
        """A boolean array over BM25 chunks: True where the chunk passes the filters.

        ``facets`` holds one array per facet: ``year`` as integers (-1 when unknown), ``venue``
        and ``decision`` case-folded ("" when unknown); ``authors`` maps an author key
        (`author_keys`) to the rows of that author's chunks."""
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
        if self.authors:
            by_author = np.zeros(len(years), dtype=bool)
            for name in self.authors:
                key = author_query_key(name)
                if key is not None and authors is not None and key in authors:
                    by_author[authors[key]] = True
            keep &= by_author
        return keep


def parse_filters(
    question: str,
    known_venues: Iterable[str],
    known_years: Iterable[int] | None = None,
    known_authors: Mapping[str, object] | None = None,
) -> tuple[Filters, str]:
    """Filters stated in the question, and the question with those phrases taken out.

    A number is a year only in year phrasing ("in 2019", "since 2020", "ICLR 2024", "2019
    papers", "a paper from 2017", "between 2015 and 2017", "before 2018") and only when the
    index holds papers of that year (``known_years``; None: any year). "Batch size of 2048",
    "GPT-2", "2019 style" and "1000 samples" are not filters. An author is read from "papers by
    X", "X's work on", "X et al." when ``known_authors`` (author keys) holds the name."""
    text = question
    found: dict[str, Any] = {}
    held = set(known_years) if known_years is not None else None

    def ok(low: int, high: int) -> bool:
        """The index holds a paper from ``low`` to ``high``: "since 2048" is no year filter."""
        return held is None or any(low <= year <= high for year in held)

    def cut(match: re.Match[str]) -> None:
        nonlocal text
        text = text.replace(match.group(0), " ", 1)

    venues = []
    for venue in sorted({v for v in known_venues if v and len(v) >= 3}, key=len, reverse=True):
        aliases = [a for a, target in VENUE_ALIASES.items() if target == venue.casefold()]
        for name in [venue, *aliases]:
            if m := re.search(rf"\b{re.escape(name)}\b(?:\s+{_Y}\b)?", text, re.IGNORECASE):
                venues.append(venue)
                if m.group(1) and ok(int(m.group(1)), int(m.group(1))):
                    found["year_from"] = found["year_to"] = int(m.group(1))  # "ICLR 2024"
                cut(m)
                break
    if venues:
        found["venues"] = venues
    if "year_from" in found:
        pass
    elif (m := _RANGE.search(text)) and ok(*sorted(int(g) for g in m.groups() if g)):
        a, b = sorted(int(g) for g in m.groups() if g)
        found["year_from"], found["year_to"] = a, b
        cut(m)
    else:
        if (m := _SINCE.search(text)) and ok(int(m.group(2) or m.group(4)), 9999):
            year = int(m.group(2) or m.group(4))
            found["year_from"] = year + 1 if (m.group(1) or "").lower() == "after" else year
            cut(m)
        if (m := _BEFORE.search(text)) and ok(0, int(m.group(2))):
            year = int(m.group(2))
            found["year_to"] = year - 1 if m.group(1).lower() in ("before", "prior to") else year
            cut(m)
        if "year_from" not in found and "year_to" not in found and (m := _SINGLE.search(text)):
            year = int(next(g for g in m.groups() if g))
            if ok(year, year):
                found["year_from"] = found["year_to"] = year
                cut(m)
    if m := _DECISION.search(text):
        found["decisions"] = [m.group(1).casefold()]
        cut(m)
    if known_authors:
        for m in _AUTHOR.finditer(question):
            name = next(g for g in m.groups() if g).strip(" .")
            key = author_query_key(name)
            if key is not None and key in known_authors:
                found.setdefault("authors", []).append(name)
                cut(m)
    cleaned = " ".join(text.split())
    return Filters(**found), cleaned or question
