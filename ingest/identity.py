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
from urllib.parse import unquote

from core.text import fingerprint

_DOI = re.compile(
    r"\b(10\.\d{4,9}/[^\s?#]+)", re.IGNORECASE
)  # a URL's ?query or #part is not in it
_DOI_TRAIL = ".,;]}>\"'"
# new-style ids (2007-): 0704.0001 to 2412.12345 (yymm: a month 01-12); old style: hep-th/9901001,
# math/0309136 (written math.AG/0309136 too: the subject class is not part of the id)
_ARXIV_NEW = re.compile(r"(?<![\w.])(\d{2}(?:0[1-9]|1[0-2])\.\d{4,5})(?:v\d+)?(?![\w]|\.\d)")
_ARXIV_OLD = re.compile(
    r"(?<![\w.-])([a-z][a-z-]*)(?:\.[a-z]{2})?/(\d{7})(?:v\d+)?(?!\d)", re.IGNORECASE
)
_ARXIV_DOI = re.compile(r"^10\.48550/arxiv\.(.+)$", re.IGNORECASE)
_MACRO = re.compile(r"\\[A-Za-z]+")
_NOT_KEY = re.compile(r"[^a-z0-9]+")
MIN_TITLE_KEY = 12  # shorter titles ("Introduction", "Editorial") name no one paper


def clean_doi(value: Any) -> str | None:
    """``https://doi.org/10.1/ABC.`` -> ``10.1/abc`` (DOIs are case-insensitive): a resolver,
    percent-escapes, a URL's query and trailing punctuation dropped; a closing parenthesis only
    when it closes none (``10.1061/(ASCE)0733-9399(2002)128:1(3)`` keeps its own)."""
    if not isinstance(value, str):
        return None
    match = _DOI.search(unquote(value))
    if match is None:
        return None
    doi = match.group(1)
    while doi and (doi[-1] in _DOI_TRAIL or (doi[-1] == ")" and doi.count(")") > doi.count("("))):
        doi = doi[:-1]
    return doi.casefold() or None


def clean_arxiv_id(value: Any) -> str | None:
    """``arXiv:1810.04805v2``, ``https://arxiv.org/pdf/1810.04805v2.pdf`` or the arXiv DOI
    ``10.48550/arXiv.1810.04805`` -> ``1810.04805`` (the version dropped); ``math.AG/0309136``
    -> ``math/0309136``."""
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    doi = _ARXIV_DOI.match(clean_doi(text) or "")
    if doi:
        text = doi.group(1)
    new = _ARXIV_NEW.search(text)
    if new:
        return new.group(1)
    old = _ARXIV_OLD.search(text)
    return f"{old.group(1).lower()}/{old.group(2)}" if old else None


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
    """What says which paper a record is. ``pinned`` is an id the corpus gave (our JSONL/CSV
    ``id``); ``library`` marks a reference library's record, whose own key is no id."""

    doi: str | None = None
    arxiv_id: str | None = None
    title: str | None = None
    pinned: str | None = None
    library: bool = False

    @classmethod
    def of(
        cls, doi: Any, arxiv_id: Any, title: Any, pinned: str | None = None, library: bool = False
    ) -> Keys:
        """Keys from raw values: an arXiv DOI (10.48550/arXiv...) counts as the arXiv id."""
        doi = clean_doi(doi)
        arxiv_id = clean_arxiv_id(arxiv_id)
        if doi and _ARXIV_DOI.match(doi):
            arxiv_id, doi = arxiv_id or clean_arxiv_id(doi), None
        title = title_key(title if isinstance(title, str) else None)
        return cls(doi, arxiv_id, title, pinned, library)

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


_DERIVED = re.compile(r"^(?:doi:|arxiv:|t[0-9a-f]{16}$)")


def is_derived(paper_id: str) -> bool:
    """Whether an id is one `Keys.derived_id` makes (not one a corpus gave)."""
    return _DERIVED.match(paper_id) is not None


@dataclass
class Group:
    """Records found to be one paper: indexes into the read order, and for each record after
    the first the key (``doi:...``, ``arxiv:...``, ``title:...``) that joined it."""

    members: list[int] = field(default_factory=list)
    why: dict[int, str] = field(default_factory=dict)
    dois: set[str] = field(default_factory=set)
    arxiv_ids: set[str] = field(default_factory=set)
    pinned: set[str] = field(default_factory=set)
    library: bool = False

    def joinable(self, mine: Keys, by: str) -> bool:
        """Never two DOIs or two arXiv ids; a repeated given id is a duplicate (reported as
        such later); by title only when a reference library's record is on one side (our own
        records are told apart by their ids) and not both sides carry given ids."""
        if mine.doi and self.dois and mine.doi not in self.dois:
            return False
        if mine.arxiv_id and self.arxiv_ids and mine.arxiv_id not in self.arxiv_ids:
            return False
        if mine.pinned and mine.pinned in self.pinned:
            return False
        if by == "title":
            return (mine.library or self.library) and not (mine.pinned and self.pinned)
        return True

    def agrees(self, other: Group) -> bool:
        """Whether two groups that one record links may become one paper."""
        return not (
            (self.dois and other.dois and self.dois != other.dois)
            or (self.arxiv_ids and other.arxiv_ids and self.arxiv_ids != other.arxiv_ids)
            or (self.pinned & other.pinned)
        )

    def take(self, i: int, mine: Keys, why: str | None) -> None:
        self.members.append(i)
        if why:
            self.why[i] = why
        self.dois.update([mine.doi] if mine.doi else [])
        self.arxiv_ids.update([mine.arxiv_id] if mine.arxiv_id else [])
        self.pinned.update([mine.pinned] if mine.pinned else [])
        self.library = self.library or mine.library


def group(keys: Sequence[Keys]) -> list[Group]:
    """Records gathered into papers by their DOI, arXiv id and title key (see
    `Group.joinable`). A record that links two papers (a DOI one knows, an arXiv id the other
    knows) makes them one when they agree. Groups come in the order of their first record."""
    groups: list[Group | None] = []
    owner: dict[str, int] = {}  # key -> group, followed through `moved` after a join
    moved: dict[int, int] = {}

    def live(g: int) -> int:
        while g in moved:
            g = moved[g]
        return g

    for i, mine in enumerate(keys):
        matches: list[tuple[int, str]] = []
        for key in mine.all():
            if key not in owner:
                continue
            g = live(owner[key])
            target = groups[g]
            assert target is not None
            if all(g != m for m, _ in matches) and target.joinable(mine, key.partition(":")[0]):
                matches.append((g, key))
        if not matches:
            groups.append(Group())
            home = len(groups) - 1
            why = None
        else:
            home, why = matches[0]
        first = groups[home]
        assert first is not None
        first.take(i, mine, why)
        for g, key in matches[1:]:
            other = groups[g]
            assert other is not None
            if first.agrees(other):
                other.why.setdefault(other.members[0], key)
                first.members.extend(other.members)
                first.why.update(other.why)
                first.dois |= other.dois
                first.arxiv_ids |= other.arxiv_ids
                first.pinned |= other.pinned
                first.library = first.library or other.library
                groups[g], moved[g] = None, home
        for key in mine.all():
            owner.setdefault(key, home)
    out = [paper for paper in groups if paper is not None]
    for paper in out:
        paper.members.sort()
    return sorted(out, key=lambda paper: paper.members[0])


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


def said(key: str) -> str:
    """A key in a report's words: ``DOI 10.1/x``, ``arXiv id 1810.04805``, ``title``."""
    kind, _, value = key.partition(":")
    return {"doi": f"DOI {value}", "arxiv": f"arXiv id {value}"}.get(kind, "title")


@dataclass(frozen=True)
class Indexed:
    """An indexed paper as `adopted` needs it."""

    paper_id: str
    doi: str | None
    arxiv_id: str | None


def adopted(keys: Keys, known: Mapping[str, Sequence[Indexed]]) -> tuple[Indexed, str] | None:
    """The indexed paper a record is (``known`` maps ``doi:...``, ``arxiv:...`` and
    ``title:...`` keys to the indexed papers holding them), with the key that says so: never
    one with another DOI or arXiv id, and by title only one whose id was derived, not given by
    a corpus. Of several papers with a key, the first (by id) that may be it."""
    for key in keys.all():
        for paper in known.get(key, ()):
            if (keys.doi and paper.doi and keys.doi != paper.doi) or (
                keys.arxiv_id and paper.arxiv_id and keys.arxiv_id != paper.arxiv_id
            ):
                continue
            if key.startswith("title:") and not is_derived(paper.paper_id):
                continue
            return paper, key
    return None


def known_keys(
    heads: Iterable[tuple[str, str | None, str | None, str | None]],
) -> dict[str, list[Indexed]]:
    """``(paper_id, doi, arxiv_id, title)`` of indexed papers (title None when it was derived
    from the text) to the keys `adopted` looks up, each key's papers in the order of their ids
    (whatever order the index gave them in)."""
    known: dict[str, list[Indexed]] = {}
    for paper_id, doi, arxiv_id, title in heads:
        keys = Keys.of(doi, arxiv_id, title)
        paper = Indexed(paper_id, keys.doi, keys.arxiv_id)
        for key in keys.all():
            known.setdefault(key, []).append(paper)
    for papers in known.values():
        papers.sort(key=lambda paper: paper.paper_id)
    return known
