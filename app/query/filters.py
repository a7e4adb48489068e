"""Metadata filters read from the question ("ICLR 2024 papers on ...", "papers by Levine").

The `Filters` record is in `core.models`; the store applies it (`BM25Index.passing`)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from core.models import Filters
from core.text import matching_authors

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


def parse_filters(
    question: str,
    known_venues: Iterable[str],
    known_years: Iterable[int] | None = None,
    known_authors: Mapping[str, Iterable[str]] | None = None,
) -> tuple[Filters, str]:
    """Filters stated in the question, and the question with those phrases taken out.

    A number is a year only in year phrasing ("in 2019", "since 2020", "ICLR 2024", "2019
    papers", "a paper from 2017", "between 2015 and 2017", "before 2018") and only when the
    index holds papers of that year (``known_years``; None: any year). "Batch size of 2048",
    "GPT-2", "2019 style" and "1000 samples" are not filters. An author is read from "papers by
    X", "X's work on", "X et al." when ``known_authors`` (surname keys to the
    indexed names) holds someone of that name (`core.text.same_author`)."""
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
            if matching_authors(name, known_authors):
                found.setdefault("authors", []).append(name)
                cut(m)
    cleaned = " ".join(text.split())
    return Filters(**found), cleaned or question
