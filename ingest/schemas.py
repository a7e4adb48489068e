"""Reference-library records mapped to ours: BibTeX and RIS entries, CSL-JSON items, Zotero's
CSV rows, the arXiv metadata snapshot, OpenAlex works and Semantic Scholar papers.

Each mapper takes one parsed record and returns our fields (``title``, ``abstract``,
``authors``, ``year``, ``venue``, ``url``, ``keywords``, ``doi``, ``arxiv_id``) and ``key``, the
name the library gives the entry (for reports). A library's own key is no paper id: the same
paper has another key in every export (see `ingest.identity`).
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal, get_args

from core.text import has_latex, plain_text
from ingest.identity import clean_arxiv_id, clean_doi

Fields = dict[str, Any]

ID_FIELD = "abstractqa-id"
"""The BibTeX field in which our own export carries a paper's id (`paper_id` of our fields):
such an entry ingests back into that paper."""

FormatName = Literal[
    "jsonl", "json", "csv", "sample", "bibtex", "ris", "csl-json", "zotero-csv", "arxiv",
    "openalex", "s2",
]  # fmt: skip

LABELS: dict[str, str] = {
    "jsonl": "JSON Lines",
    "json": "JSON",
    "csv": "CSV",
    "sample": "plain sample format",
    "bibtex": "BibTeX",
    "ris": "RIS",
    "csl-json": "CSL-JSON",
    "zotero-csv": "Zotero CSV",
    "arxiv": "arXiv metadata",
    "openalex": "OpenAlex works",
    "s2": "Semantic Scholar papers",
}
"""Every format `--format` names (`FormatName`), with the words a report uses for it."""
assert set(LABELS) == set(get_args(FormatName))

RECORD_SCHEMAS = ("csl-json", "arxiv", "openalex", "s2")
"""Schemas recognised record by record inside JSON and JSON Lines files."""

_YEAR = re.compile(r"\b(1[89]\d{2}|20\d{2})\b")
_TAG = re.compile(r"<[^>]{1,200}>")
_BLOCK_END = re.compile(r"</(?:jats:)?(?:p|sec|title|div|br)>|<br\s*/?>", re.IGNORECASE)
_HEADING = re.compile(r"<(jats:)?title>\s*Abstract\s*</(jats:)?title>", re.IGNORECASE)


def tex(value: Any) -> str | None:
    """A BibTeX/RIS value as text: LaTeX rendered, case-protecting braces dropped
    (``{BERT}`` -> ``BERT``, ``M{\\"u}ller`` -> ``Müller``); math kept as text."""
    if value is None:
        return None
    text = " ".join(str(value).split())
    if has_latex(text):
        return plain_text(text) or None  # braces of groups go, escaped ones (\{) stay
    return text.replace("{", "").replace("}", "") or None


def _first(record: Mapping[str, Any], *names: str) -> Any:
    for name in names:
        value = record.get(name)
        if isinstance(value, list):
            value = next((v for v in value if v not in (None, "")), None)
        if value not in (None, ""):
            return value
    return None


def _year_in(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    match = _YEAR.search(str(value)) if value is not None else None
    return int(match.group(1)) if match else None


def _flip(name: str) -> str:
    """``Vaswani, Ashish`` -> ``Ashish Vaswani``; ``Doe, Jr., John`` -> ``John Doe Jr.``."""
    parts = [p.strip() for p in name.split(",")]
    if len(parts) == 2 and all(parts):
        return f"{parts[1]} {parts[0]}"
    if len(parts) == 3 and all(parts):
        return f"{parts[2]} {parts[0]} {parts[1]}"
    return name.strip()


def _arxiv(*values: Any) -> str | None:
    return next((a for a in (clean_arxiv_id(v) for v in values if isinstance(v, str)) if a), None)


def _finish(fields: Fields) -> Fields:
    """The identity fields filled from one another: an arXiv DOI names the arXiv id, an arXiv id
    gives a link when there is none."""
    doi = clean_doi(fields.get("doi"))
    arxiv_id = fields.get("arxiv_id") or (clean_arxiv_id(doi) if doi else None)
    fields["doi"], fields["arxiv_id"] = doi, arxiv_id
    if not fields.get("url"):
        if arxiv_id:
            fields["url"] = f"https://arxiv.org/abs/{arxiv_id}"
        elif doi:
            fields["url"] = f"https://doi.org/{doi}"
    fields["authors"] = [a for a in fields.get("authors") or [] if a]
    return fields


# --- BibTeX (bibtexparser's entries) ------------------------------------------------------------
def from_bibtex(key: str, entry_type: str, values: Mapping[str, Any]) -> Fields:
    """One entry: ``values`` maps field names (any case) to strings, ``author`` to name parts
    with ``first``/``von``/``last``/``jr`` lists (bibtexparser's SplitNameParts)."""
    f = {name.lower(): value for name, value in values.items()}
    authors = (
        [_bib_name(n) for n in f.get("author") or []]
        if isinstance(f.get("author"), list)
        else [_flip(a) for a in str(f.get("author") or "").split(" and ")]
    )
    eprint = f.get("eprint") if str(f.get("archiveprefix", "arxiv")).lower() == "arxiv" else None
    return _finish(
        {
            "key": key,
            "title": tex(f.get("title")),
            "abstract": tex(f.get("abstract")),
            "authors": [tex(a) for a in authors],
            "year": _year_in(_first(f, "year", "date")),
            "venue": tex(_first(f, "journal", "journaltitle", "booktitle", "eventtitle")),
            "url": _first(f, "url"),
            "keywords": [
                k for k in (tex(k) for k in re.split(r"[,;]", f.get("keywords") or "")) if k
            ],
            "doi": f.get("doi"),
            "arxiv_id": _arxiv(eprint, f.get("arxiv"), f.get("url"), f.get("journal")),
            "type": entry_type,
            "paper_id": f.get(ID_FIELD),
        }
    )


def _bib_name(parts: Any) -> str:
    words = [*parts.first, *parts.von, *parts.last, *parts.jr]
    name = " ".join(str(w) for w in words)
    return "" if name == "others" else name  # "and others" is BibTeX for "et al."


# --- RIS (rispy's entries) ----------------------------------------------------------------------
def from_ris(entry: Mapping[str, Any]) -> Fields:
    """One record as rispy names its tags: the same field comes under different tags
    (AB/N2, TI/T1, PY/Y1/DA, JO/T2/JF/J2, AU/A1)."""
    urls = entry.get("urls") or []
    return _finish(
        {
            "key": entry.get("id"),
            "title": tex(_first(entry, "title", "primary_title")),
            "abstract": tex(_first(entry, "abstract", "notes_abstract")),
            "authors": [_flip(a) for a in entry.get("authors") or entry.get("first_authors") or []],
            "year": _year_in(_first(entry, "year", "publication_year", "date")),
            "venue": tex(
                _first(
                    entry, "journal_name", "secondary_title", "alternate_title3",
                    "alternate_title1", "alternate_title2",
                )
            ),
            "url": urls[0] if urls else None,
            "keywords": [k for k in (tex(k) for k in entry.get("keywords") or []) if k],
            "doi": entry.get("doi"),
            "arxiv_id": _arxiv(*urls, entry.get("doi")),
        }
    )  # fmt: skip


# --- Zotero's "Export to CSV" -------------------------------------------------------------------
def is_zotero(header: Iterable[str]) -> bool:
    """Whether a CSV header (lower case) is Zotero's: it has its own ``Abstract Note`` and
    ``Item Type`` columns."""
    return {"abstract note", "item type"} <= set(header)


def from_zotero_csv(row: Mapping[str, Any]) -> Fields:
    r = {name.strip().lower(): value for name, value in row.items()}
    tags = ";".join(str(r.get(n) or "") for n in ("manual tags", "automatic tags"))
    return _finish(
        {
            "key": r.get("key"),
            "title": _clean(r.get("title")),
            "abstract": _clean(r.get("abstract note")),
            "authors": [_flip(a) for a in str(r.get("author") or "").split(";")],
            "year": _year_in(_first(r, "publication year", "date")),
            "venue": _clean(_first(r, "publication title", "proceedings title", "conference name")),
            "url": _first(r, "url"),
            "keywords": [t.strip() for t in tags.split(";") if t.strip()],
            "doi": r.get("doi"),
            "arxiv_id": _arxiv(r.get("archive id"), r.get("extra"), r.get("url")),
        }
    )


# --- CSL-JSON (Zotero, Mendeley, pandoc, Crossref) ----------------------------------------------
def from_csl(item: Mapping[str, Any]) -> Fields:
    authors = []
    for person in item.get("author") or []:
        if isinstance(person, Mapping):
            given, family = person.get("given"), person.get("family")
            name = person.get("literal") or " ".join(str(p) for p in (given, family) if p)
            authors.append(str(name))
        elif isinstance(person, str):
            authors.append(person)
    keywords = item.get("keyword") or ""
    return _finish(
        {
            "key": item.get("citation-key") or item.get("id"),
            "title": _clean(_first(item, "title")),
            "abstract": _clean(_first(item, "abstract")),
            "authors": authors,
            "year": _csl_year(item.get("issued")),
            "venue": _clean(_first(item, "container-title", "event-title", "event")),
            "url": _first(item, "URL", "url"),
            "keywords": [k.strip() for k in re.split(r"[,;]", str(keywords)) if k.strip()],
            "doi": _first(item, "DOI", "doi"),
            "arxiv_id": _arxiv(item.get("number"), item.get("note"), item.get("URL")),
        }
    )


def _csl_year(issued: Any) -> int | None:
    if isinstance(issued, Mapping):
        parts = issued.get("date-parts")
        if isinstance(parts, list) and parts and isinstance(parts[0], list) and parts[0]:
            return _year_in(parts[0][0])
        return _year_in(issued.get("raw") or issued.get("literal"))
    return _year_in(issued)


def _clean(value: Any) -> str | None:
    """Text that may carry markup (Crossref's JATS ``<jats:p>``, HTML ``<i>``) or LaTeX (math
    in an abstract) as plain text."""
    if value is None:
        return None
    text = str(value)
    if "<" in text:
        text = _BLOCK_END.sub(" ", _HEADING.sub("", text))
        text = html.unescape(_TAG.sub("", text))
    text = " ".join(text.split())
    return (plain_text(text) if has_latex(text) else text) or None


# --- the arXiv metadata snapshot ----------------------------------------------------------------
def from_arxiv(record: Mapping[str, Any]) -> Fields:
    """Year from the first version's date (``update_date`` is the last change); authors from
    ``authors_parsed``; categories as keywords; hard line breaks joined, LaTeX rendered."""
    versions = record.get("versions") or []
    created = versions[0].get("created") if versions and isinstance(versions[0], Mapping) else None
    arxiv_id = clean_arxiv_id(str(record.get("id") or ""))
    year = _year_in(created)
    if year is None and arxiv_id and re.fullmatch(r"\d{4}\.\d+", arxiv_id):
        year = 2000 + int(arxiv_id[:2])
    parsed = record.get("authors_parsed")
    if isinstance(parsed, list) and parsed:
        authors = [" ".join(p for p in (*n[1:2], n[0], *n[2:3]) if p) for n in parsed if n]
    else:
        authors = [a.strip() for a in re.split(r",| and ", str(record.get("authors") or ""))]
    return _finish(
        {
            "key": record.get("id"),
            "title": tex(record.get("title")),
            "abstract": tex(record.get("abstract")),
            "authors": [tex(a) for a in authors],
            "year": year,
            "venue": "arXiv",
            "keywords": str(record.get("categories") or "").split(),
            "doi": record.get("doi"),
            "arxiv_id": arxiv_id,
        }
    )


# --- OpenAlex works -----------------------------------------------------------------------------
def from_openalex(work: Mapping[str, Any]) -> Fields:
    primary = work.get("primary_location") or {}
    source = (primary.get("source") or {}) if isinstance(primary, Mapping) else {}
    host = work.get("host_venue") or {}
    locations = [loc for loc in work.get("locations") or [] if isinstance(loc, Mapping)]
    pages = [loc.get("landing_page_url") for loc in locations]
    return _finish(
        {
            "key": str(work.get("id") or "").rsplit("/", 1)[-1] or None,
            "title": _clean(_first(work, "title", "display_name")),
            "abstract": _clean(inverted_abstract(work.get("abstract_inverted_index"))),
            "authors": [
                str((a.get("author") or {}).get("display_name") or a.get("raw_author_name") or "")
                for a in work.get("authorships") or []
                if isinstance(a, Mapping)
            ],
            "year": _year_in(_first(work, "publication_year", "publication_date")),
            "venue": _clean(source.get("display_name") or host.get("display_name")),
            "url": (primary.get("landing_page_url") if isinstance(primary, Mapping) else None),
            "keywords": [
                str(k.get("display_name"))
                for k in work.get("keywords") or []
                if isinstance(k, Mapping) and k.get("display_name")
            ],
            "doi": work.get("doi"),
            "arxiv_id": _arxiv(*(p for p in pages if isinstance(p, str) and "arxiv" in p)),
        }
    )


def inverted_abstract(index: Any) -> str | None:
    """OpenAlex's ``{word: [positions]}`` back to text. Words that share a position are all
    kept, in the order the index lists them (a plain position-to-word map would drop some)."""
    if not isinstance(index, Mapping) or not index:
        return None
    placed: list[tuple[int, int, str]] = []
    for order, (word, positions) in enumerate(index.items()):
        for position in positions if isinstance(positions, list) else []:
            if isinstance(position, int):
                placed.append((position, order, str(word)))
    return " ".join(word for _, _, word in sorted(placed)) or None


# --- Semantic Scholar papers --------------------------------------------------------------------
def from_s2(paper: Mapping[str, Any]) -> Fields:
    """The Graph API's camelCase fields or the datasets' lower-case ones."""
    p = {name.lower(): value for name, value in paper.items()}
    ids = {str(k).lower(): v for k, v in (p.get("externalids") or {}).items()}
    venue = p.get("publicationvenue")
    return _finish(
        {
            "key": p.get("paperid") or p.get("corpusid"),
            "title": _clean(p.get("title")),
            "abstract": _clean(p.get("abstract")),
            "authors": [
                str(a.get("name")) for a in p.get("authors") or [] if isinstance(a, Mapping)
            ],
            "year": _year_in(_first(p, "year", "publicationdate")),
            "venue": _clean(
                p.get("venue") or (venue.get("name") if isinstance(venue, Mapping) else None)
            ),
            "url": p.get("url"),
            "keywords": _s2_fields(p),
            "doi": ids.get("doi"),
            "arxiv_id": _arxiv(ids.get("arxiv")),
        }
    )


def _s2_fields(p: Mapping[str, Any]) -> list[str]:
    names: Iterable[Any] = p.get("fieldsofstudy") or [
        f.get("category") for f in p.get("s2fieldsofstudy") or [] if isinstance(f, Mapping)
    ]
    return list(dict.fromkeys(str(n) for n in names if n))


# --- which schema a JSON record has -------------------------------------------------------------
def schema_of(record: Mapping[str, Any]) -> str | None:
    """The library schema a JSON object has, or None for ours (``abstract``, ``title``, ...).
    Only a structure no record of ours has counts: an inverted abstract, S2's ``paperId`` or
    ``externalIds``, arXiv's ``authors_parsed`` or ``versions`` with dates, CSL's ``issued``
    date, ``container-title`` or ``citation-key`` or its authors with ``family`` names."""
    if isinstance(record.get("abstract_inverted_index"), Mapping) or str(
        record.get("id", "")
    ).startswith("https://openalex.org/"):
        return "openalex"
    lower = {str(k).lower(): v for k, v in record.items()}
    if isinstance(lower.get("paperid"), str) or isinstance(lower.get("externalids"), Mapping):
        return "s2"
    versions = record.get("versions")
    if isinstance(record.get("authors_parsed"), list) or (
        isinstance(versions, list)
        and versions
        and all(isinstance(v, Mapping) and "created" in v for v in versions)
    ):
        return "arxiv"
    people = record.get("author")
    if (
        isinstance(record.get("issued"), Mapping)
        or "container-title" in record
        or "citation-key" in record
        or (
            isinstance(people, list)
            and any(isinstance(a, Mapping) and (a.keys() & {"family", "literal"}) for a in people)
        )
    ):
        return "csl-json"
    return None


MAPPERS: dict[str, Callable[[Mapping[str, Any]], Fields]] = {
    "csl-json": from_csl,
    "arxiv": from_arxiv,
    "openalex": from_openalex,
    "s2": from_s2,
    "zotero-csv": from_zotero_csv,
    "ris": from_ris,
}
"""Record mappers by schema (BibTeX entries go through `from_bibtex`, which takes more)."""
