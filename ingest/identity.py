"""Which paper a record is: DOIs and arXiv ids in their canonical forms, a title key, and the
merging of records that name the same paper (by DOI, then arXiv id, then title).

A reference library exports the same paper under different keys (a BibTeX key, a Zotero item
URI, a RIS ``ID``), so those keys are not identity; a DOI, an arXiv id and the title are.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from core.text import fingerprint

_DOI = re.compile(r"\b(10\.\d{4,9}/\S+)", re.IGNORECASE)
_DOI_TRAIL = ".,;)]}>\"'"
# new-style ids (2007-): 0704.0001 to 2412.12345; old style: hep-th/9901001, math.AG/0309136
_ARXIV_NEW = re.compile(r"(?<![\w.])(\d{4}\.\d{4,5})(?:v\d+)?(?![\w.])")
_ARXIV_OLD = re.compile(r"(?<![\w.-])([a-z-]+(?:\.[A-Z]{2})?/\d{7})(?:v\d+)?\b")
_ARXIV_DOI = re.compile(r"^10\.48550/arxiv\.(.+)$", re.IGNORECASE)
_MACRO = re.compile(r"\\[A-Za-z]+")
_NOT_KEY = re.compile(r"[^a-z0-9]+")
MIN_TITLE_KEY = 12  # shorter titles ("Introduction", "Editorial") name no one paper


def clean_doi(value: Any) -> str | None:
    """``https://doi.org/10.1/ABC.`` -> ``10.1/abc``: DOIs are case-insensitive."""
    if not isinstance(value, str):
        return None
    match = _DOI.search(value.replace("%2F", "/").replace("%2f", "/"))
    if match is None:
        return None
    return match.group(1).rstrip(_DOI_TRAIL).casefold() or None


def clean_arxiv_id(value: Any) -> str | None:
    """``arXiv:1810.04805v2``, ``https://arxiv.org/abs/1810.04805`` or the arXiv DOI
    ``10.48550/arXiv.1810.04805`` -> ``1810.04805`` (the version dropped)."""
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    doi = _ARXIV_DOI.match(clean_doi(text) or "")
    if doi:
        text = doi.group(1)
    match = _ARXIV_NEW.search(text) or _ARXIV_OLD.search(text)
    return match.group(1) if match else None


def title_key(title: str | None) -> str | None:
    """Letters and digits of a title, case, accents, LaTeX macros, braces and punctuation
    dropped: ``{BERT}: Pre-training`` and ``BERT: pre-training`` give one key. Cheap (no LaTeX
    parse), so an index's titles can be keyed at every ingest."""
    if not title:
        return None
    text = unicodedata.normalize("NFKD", _MACRO.sub("", title)).casefold()
    key = _NOT_KEY.sub("", text)
    return key if len(key) >= MIN_TITLE_KEY else None


@dataclass
class Keys:
    """What says which paper a record is. ``pinned`` ids were given by the corpus itself (our
    JSONL/CSV ``id``): two different pinned ids are two papers unless a DOI or arXiv id says
    otherwise."""

    doi: str | None = None
    arxiv_id: str | None = None
    title: str | None = None
    pinned: str | None = None

    @classmethod
    def of(cls, doi: Any, arxiv_id: Any, title: Any, pinned: str | None = None) -> Keys:
        """Keys from raw values: an arXiv DOI (10.48550/arXiv...) counts as the arXiv id."""
        doi = clean_doi(doi)
        arxiv_id = clean_arxiv_id(arxiv_id)
        if doi and _ARXIV_DOI.match(doi):
            arxiv_id, doi = arxiv_id or clean_arxiv_id(doi), None
        return cls(doi, arxiv_id, title_key(title if isinstance(title, str) else None), pinned)

    def derived_id(self) -> str | None:
        """The id a paper has in every export: its DOI, else its arXiv id, else its title's."""
        if self.doi:
            return f"doi:{self.doi}"
        if self.arxiv_id:
            return f"arxiv:{self.arxiv_id}"
        return f"t{fingerprint(self.title)}" if self.title else None

    def all(self) -> list[str]:
        return [
            f"{kind}:{value}"
            for kind, value in (("doi", self.doi), ("arxiv", self.arxiv_id), ("title", self.title))
            if value
        ]


@dataclass
class Group:
    """Records found to be one paper: indexes into the read order, the first is kept."""

    members: list[int] = field(default_factory=list)
    why: dict[int, str] = field(default_factory=dict)  # member -> the key it matched on


def group(keys: Sequence[Keys]) -> list[Group]:
    """Records in read order gathered into papers: a record joins the first earlier paper that
    shares its DOI, else its arXiv id, else its title key; never when they have different DOIs
    or arXiv ids, nor by title alone when both have pinned ids."""
    groups: list[Group] = []
    owner: dict[str, int] = {}  # key -> group
    facts: list[Keys] = []  # what each group knows so far
    for i, mine in enumerate(keys):
        target: int | None = None
        matched = ""
        for key in mine.all():
            g = owner.get(key)
            if g is not None and _compatible(facts[g], mine, key):
                target, matched = g, key
                break
        if target is None:
            groups.append(Group(members=[i]))
            facts.append(Keys(mine.doi, mine.arxiv_id, mine.title, mine.pinned))
            target = len(groups) - 1
        else:
            groups[target].members.append(i)
            groups[target].why[i] = matched
            known = facts[target]
            known.doi = known.doi or mine.doi
            known.arxiv_id = known.arxiv_id or mine.arxiv_id
            known.title = known.title or mine.title
            known.pinned = known.pinned or mine.pinned
        for key in mine.all():
            owner.setdefault(key, target)
    return groups


def _compatible(known: Keys, mine: Keys, key: str) -> bool:
    if known.doi and mine.doi and known.doi != mine.doi:
        return False
    if known.arxiv_id and mine.arxiv_id and known.arxiv_id != mine.arxiv_id:
        return False
    if known.pinned and mine.pinned:  # the same id is a duplicate, told apart later
        return known.pinned != mine.pinned and not key.startswith("title:")
    return True


def merge_records(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One record from several of the same paper: the first one's values, each missing value
    (an empty abstract, no DOI, no venue...) taken from the next record that has it."""
    out: dict[str, Any] = dict(records[0])
    for record in records[1:]:
        for name, value in record.items():
            if _empty(out.get(name)) and not _empty(value):
                out[name] = value
    return out


def _empty(value: Any) -> bool:
    return value is None or (isinstance(value, str | list | dict) and not value)


def adopted(keys: Keys, known: Mapping[str, str]) -> str | None:
    """The id an indexed paper with the same DOI, arXiv id or title already has (``known``
    maps ``doi:...``, ``arxiv:...`` and ``title:...`` keys to paper ids)."""
    return next((known[key] for key in keys.all() if key in known), None)


def known_keys(heads: Iterable[tuple[str, str | None, str | None, str | None]]) -> dict[str, str]:
    """``(paper_id, doi, arxiv_id, title)`` of indexed papers (title None when it was derived
    from the text) to the keys `adopted` looks up; the first paper keeps a shared key."""
    known: dict[str, str] = {}
    for paper_id, doi, arxiv_id, title in heads:
        for key in Keys.of(doi, arxiv_id, title).all():
            known.setdefault(key, paper_id)
    return known
