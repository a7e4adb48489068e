"""Reading corpora: JSON Lines, JSON, CSV and the plain sample format, and the files of
reference libraries (BibTeX, RIS, CSL-JSON, Zotero CSV, the arXiv snapshot, OpenAlex, Semantic
Scholar), plain or gzipped.

Every problem becomes a `Problem` naming the file and line; nothing here raises on bad input.
"""

from __future__ import annotations

import codecs
import csv
import gzip
import io
import json
import re
import sys
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from core.models import Paper, Problem
from core.text import derive_title, fingerprint, normalise_for_id
from ingest.bibliography import read_bibtex, read_ris
from ingest.identity import Keys, clean_arxiv_id, clean_doi, group, merge_records, said
from ingest.schemas import LABELS, MAPPERS, RECORD_SCHEMAS, from_zotero_csv, is_zotero, schema_of

FORMATS = {
    ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json", ".csv": "csv", ".txt": "sample",
    ".bib": "bibtex", ".bibtex": "bibtex", ".ris": "ris",
}  # fmt: skip
"""File extensions and the format each is read as (``.json`` and ``.csv`` are looked into:
CSL-JSON, OpenAlex, Semantic Scholar, the arXiv snapshot or Zotero's CSV)."""
SUPPORTED = ", ".join(FORMATS) + " (optionally .gz)"
_HEADER = re.compile(r"^\s*(?P<venue>[^\d]{1,60}?)\s+(?P<year>(?:19|20)\d{2})\b.{0,40}$")
_YEAR = re.compile(r"\b(1[89]\d{2}|20\d{2}|2100)\b")
_INVALID_UTF8 = re.compile("[\udc80-\udcff]")
MAX_ABSTRACT_CHARS = 20_000  # ~5,000 tokens; the longest abstract in 22k ML papers is ~5,000
MAX_ID_CHARS = 256

csv.field_size_limit(min(sys.maxsize, 2**31 - 1))


@dataclass
class ReadResult:
    papers: list[Paper] = field(default_factory=list)
    skipped: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    merged: list[Problem] = field(default_factory=list)
    formats: dict[str, str] = field(default_factory=dict)
    files: int = 0
    keys: dict[str, Keys] = field(default_factory=dict)
    """What says which paper each paper is whose id the corpus did not give (library records
    and id-less ones): ingest gives such a paper the id of an indexed paper it matches."""


Raw = tuple[int, Any]  # (line number, parsed record) or (line number, Problem)


@dataclass
class _Record:
    file: str
    line: int
    raw: Any  # our fields (a dict) or, for a record of our own schema, the record as read
    library: bool  # our fields from a reference library's record (its own key is no id)

    @cached_property
    def fields(self) -> dict[str, Any]:
        """The record's fields by lower-case name ({} when it is no object)."""
        raw = self.raw
        return {str(k).strip().lower(): v for k, v in raw.items()} if isinstance(raw, dict) else {}

    @property
    def pinned(self) -> str | None:
        """The id the corpus gave (ours: ``id``; our own BibTeX export: ``abstractqa-id``)."""
        return _text(self.fields.get("paper_id" if self.library else "id"))


SAMPLE = Path(__file__).resolve().parent / "sample"
"""The bundled sample: 57 ICLR 2023/2024 abstracts, shipped with the package."""


def read_paths(paths: Sequence[str | Path], forced: str | None = None) -> ReadResult:
    """Read every file named or found under a named directory. One paper, one record: records
    of one paper (same DOI, then arXiv id, then title) are merged, the one with the longest
    abstract kept and its missing values taken from the others in the order read; a repeated id
    keeps the first copy. ``forced`` reads every file as that format (a key of
    `schemas.LABELS`) whatever its name."""
    result = ReadResult()
    records: list[_Record] = []
    for path in _expand(paths, result.skipped):
        before = len(result.skipped)
        label, raws = _read_file(path, result.skipped, forced)
        if len(result.skipped) > before and not raws and _file_level(result.skipped[-1]):
            continue
        result.files += 1
        result.formats[str(path)] = label
        for line, raw, schema in raws:
            if isinstance(raw, Problem):
                result.skipped.append(raw)
            else:
                records.append(_Record(str(path), line, raw, schema is not None))
    seen: dict[str, str] = {}
    for record in _one_per_paper(records, result.merged):
        paper = to_paper(
            record.raw, record.file, record.line, result.warnings, library=record.library
        )
        if isinstance(paper, Problem):
            result.skipped.append(paper)
        elif paper.paper_id in seen:
            result.skipped.append(
                Problem(
                    file=record.file,
                    line=record.line,
                    reason=f"duplicate of paper {paper.paper_id!r} first read at "
                    f"{seen[paper.paper_id]}; kept the first",
                )
            )
        else:
            seen[paper.paper_id] = paper.source
            result.papers.append(paper)
            if record.pinned is None:
                result.keys[paper.paper_id] = _keys(paper, None)
    return result


def _keys(paper: Paper | dict[str, Any], pinned: str | None, library: bool = False) -> Keys:
    if isinstance(paper, Paper):
        title = None if paper.title_derived else paper.title
        return Keys.of(paper.doi, paper.arxiv_id, title, pinned, library)
    return Keys.of(paper.get("doi"), paper.get("arxiv_id"), paper.get("title"), pinned, library)


def _one_per_paper(records: list[_Record], merged: list[Problem]) -> list[_Record]:
    """Records of one paper as one record (see `identity.group`), each merge reported."""
    keys = [_keys(r.fields, r.pinned, library=r.library) for r in records]
    out = []
    for grouped in group(keys):
        if len(grouped.members) == 1:
            out.append(records[grouped.members[0]])
            continue
        # kept: the record whose id the corpus gave, else the longest usable abstract (exports
        # often cut or drop it); the others only fill what it lacks
        order = sorted(grouped.members, key=lambda i: _rank(records[i]))
        first = records[order[0]]
        members = [records[i] for i in order]
        for i in order[1:]:
            why = said(grouped.why.get(i, grouped.why.get(order[0], "title:")))
            merged.append(
                Problem(
                    file=records[i].file,
                    line=records[i].line,
                    reason=f"same paper (by {why}) as {first.file}:{first.line}; merged into it",
                )
            )
        raw = merge_records([m.fields for m in members])
        # a library paper unless the kept record is ours with an id of its own
        library = first.library or (first.pinned is None and any(m.library for m in members))
        out.append(_Record(first.file, first.line, raw, library))
    return out


def _rank(record: _Record) -> tuple[bool, int]:
    """Sorts first: a record with a given id, then the longer usable abstract."""
    abstract = record.fields.get("abstract")
    usable = isinstance(abstract, str) and 0 < len(abstract.strip()) <= MAX_ABSTRACT_CHARS
    return record.pinned is None, -len(abstract) if usable and isinstance(abstract, str) else 1


def _file_level(problem: Problem) -> bool:
    return problem.line is None


def _expand(paths: Sequence[str | Path], skipped: list[Problem]) -> Iterator[Path]:
    for given in paths:
        path = Path(given)
        if path.is_dir():
            files = sorted(
                p
                for p in path.rglob("*")
                if p.is_file()
                and not any(part.startswith(".") for part in p.relative_to(path).parts)
            )
            yield from files
        elif path.exists():
            yield path
        else:
            skipped.append(Problem(file=str(path), reason="no such file or directory"))


def _format_of(path: Path) -> tuple[str | None, bool]:
    suffixes = [s.lower() for s in path.suffixes]
    gz = bool(suffixes) and suffixes[-1] == ".gz"
    if gz:
        suffixes = suffixes[:-1]
    return (FORMATS.get(suffixes[-1]) if suffixes else None), gz


Entry = tuple[int, Any, str | None]  # (line, our fields / a record of ours / Problem, schema)


def _read_file(path: Path, skipped: list[Problem], forced: str | None) -> tuple[str, list[Entry]]:
    """How the file was read (words for the report) and its records."""
    name = str(path)
    fmt, gz = _format_of(path)
    if forced is not None:
        fmt = forced
    if fmt is None:
        skipped.append(
            Problem(
                file=name,
                reason=f"unsupported file type; expected {SUPPORTED}, or name the format with "
                "--format",
            )
        )
        return "", []
    try:
        data = path.read_bytes()
        if gz:
            data = gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as exc:
        skipped.append(Problem(file=name, reason=f"cannot read the file: {exc}"))
        return "", []
    if not data.strip():
        skipped.append(Problem(file=name, reason="empty file"))
        return "", []
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            data = data.decode("utf-16").encode("utf-8")
        except UnicodeDecodeError as exc:
            skipped.append(Problem(file=name, reason=f"not valid UTF-16: {exc.reason}"))
            return "", []
    if b"\x00" in data[:65536]:
        skipped.append(Problem(file=name, reason="binary file (contains NUL bytes), not text"))
        return "", []
    # Bytes that are not UTF-8 survive as surrogates; `to_paper` re-reads those records alone.
    text = data.decode("utf-8-sig", errors="surrogateescape")
    if fmt == "bibtex":
        return LABELS["bibtex"], list(read_bibtex(text, name))
    if fmt == "ris":
        return LABELS["ris"], list(read_ris(text, name))
    if fmt == "sample":
        return LABELS["sample"], [(n, r, None) for n, r in _parse_sample(text, name)]
    if fmt in ("csv", "zotero-csv"):
        # a named format is read as named; only a .csv found by its name is looked into
        zotero = {"zotero-csv": True, "csv": False if forced else None}[fmt]
        return _tabular(text, name, zotero)
    # JSON of any schema: the container from the content, the schema record by record
    container = "jsonl" if fmt == "jsonl" else _container(text)
    parsed = _parse_jsonl(text, name) if container == "jsonl" else _parse_json(text, name)
    want = fmt if fmt in RECORD_SCHEMAS else None
    look = want is None and forced is None  # `--format json` means ours, as named
    entries: list[Entry] = []
    for line, raw in parsed:
        for item in _unwrapped(raw):
            if not isinstance(item, dict):  # a Problem, or no object: reported as it is
                entries.append((line, item, None))
                continue
            schema = want or (schema_of(item) if look else None)
            entries.append(_mapped(item, schema, name, line))
    schemas = Counter(s for _, r, s in entries if not isinstance(r, Problem))
    top = schemas.most_common(1)[0][0] if schemas else None
    return LABELS[top] if top else LABELS[container], entries


def _mapped(item: dict[str, Any], schema: str | None, name: str, line: int) -> Entry:
    """A JSON record as our fields (its schema's mapper), or the problem of a value of a shape
    the schema does not have (``authorships`` as text, a number for ``issued``)."""
    if schema is None:
        return line, item, None
    try:
        return line, MAPPERS[schema](item), schema
    except (AttributeError, TypeError, ValueError, KeyError, IndexError) as exc:
        reason = f"not a {LABELS[schema]} record as its format has it ({type(exc).__name__}: {exc})"
        return line, Problem(file=name, line=line, reason=reason), None


def _container(text: str) -> str:
    """``json`` (one value) or ``jsonl`` (one value a line), from the content."""
    start = text.lstrip()
    if start.startswith("["):
        return "json"
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        return "jsonl" if exc.msg == "Extra data" else "json"
    return "json"


def _unwrapped(raw: Any) -> list[Any]:
    """An API response's list of records (OpenAlex ``results``, Semantic Scholar ``data``, a
    CSL ``items`` list) as the records; anything else as itself."""
    if isinstance(raw, dict) and "abstract" not in raw:
        for name in ("results", "data", "items"):
            value = raw.get(name)
            if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
                return list(value)
    return [raw]


def _tabular(text: str, name: str, zotero: bool | None) -> tuple[str, list[Entry]]:
    """A CSV file: Zotero's export when ``zotero`` says so, or (None) when its header has
    Zotero's own columns."""
    rows = list(_parse_csv(text, name, zotero))
    header = rows[0][1] if rows and isinstance(rows[0][1], _Header) else None
    rows = rows[1:] if header is not None else rows
    zotero = zotero or (zotero is None and header is not None and is_zotero(header.names))
    entries: list[Entry] = [
        (line, from_zotero_csv(row) if zotero and isinstance(row, dict) else row,
         "zotero-csv" if zotero and isinstance(row, dict) else None)
        for line, row in rows
    ]  # fmt: skip
    return LABELS["zotero-csv" if zotero else "csv"], entries


def _parse_jsonl(text: str, name: str) -> Iterator[Raw]:
    # Only \n ends a record: str.splitlines() would also split at U+2028 inside a JSON string.
    for number, line in enumerate(_lines(text), start=1):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line)
        except json.JSONDecodeError as exc:
            yield number, Problem(file=name, line=number, reason=f"malformed JSON: {exc.msg}")


def _lines(text: str) -> list[str]:
    return [line.removesuffix("\r") for line in text.split("\n")]


def _parse_json(text: str, name: str) -> Iterator[Raw]:
    decoder = json.JSONDecoder()
    pos = _skip_ws(text, 0)
    if not text.startswith("[", pos):
        try:
            yield _line_of(text, pos), json.loads(text)
        except json.JSONDecodeError as exc:
            yield (
                exc.lineno,
                Problem(file=name, line=exc.lineno, reason=f"malformed JSON: {exc.msg}"),
            )
        return
    pos = _skip_ws(text, pos + 1)
    while pos < len(text) and text[pos] != "]":
        try:
            record, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            yield (
                exc.lineno,
                Problem(
                    file=name,
                    line=exc.lineno,
                    reason=f"malformed JSON: {exc.msg}; rest of file not read",
                ),
            )
            return
        yield _line_of(text, pos), record
        pos = _skip_ws(text, end)
        if text.startswith(",", pos):
            pos = _skip_ws(text, pos + 1)
        elif not text.startswith("]", pos):
            line = _line_of(text, pos)
            yield (
                line,
                Problem(
                    file=name,
                    line=line,
                    reason="malformed JSON: expected ',' or ']'; rest not read",
                ),
            )
            return


def _skip_ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


@dataclass
class _Header:
    names: list[str]


def _parse_csv(text: str, name: str, zotero: bool | None = None) -> Iterator[tuple[int, Any]]:
    """The header (as a `_Header`), then each row as a dict by lower-cased column name."""
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = [h.strip().lower() for h in next(reader)]
    except (StopIteration, csv.Error) as exc:
        yield 1, Problem(file=name, line=1, reason=f"cannot read the CSV header: {exc}")
        return
    zotero = zotero or (zotero is None and is_zotero(header))
    wanted = "abstract note" if zotero else "abstract"
    if wanted not in header:
        yield (
            1,
            Problem(
                file=name, line=1, reason=f"no {wanted!r} column (columns: {', '.join(header)})"
            ),
        )
        return
    yield 1, _Header(header)
    start = reader.line_num + 1
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            yield start, Problem(file=name, line=start, reason=f"malformed CSV: {exc}")
            start = reader.line_num + 1
            continue
        if any(cell.strip() for cell in row):
            if len(row) > len(header):
                yield (
                    start,
                    Problem(
                        file=name,
                        line=start,
                        reason=f"{len(row)} fields but the header has {len(header)}",
                    ),
                )
            else:
                yield start, dict(zip(header, row, strict=False))
        start = reader.line_num + 1


def _parse_sample(text: str, name: str) -> Iterator[Raw]:
    """First line like ``ICLR 2023 Papers`` names venue and year; then one abstract a paragraph."""
    lines = _lines(text)
    venue: str | None = None
    year: int | None = None
    first = next((i for i, line in enumerate(lines) if line.strip()), 0)
    header = _HEADER.match(lines[first]) if lines else None
    if header:
        venue, year = header["venue"].strip(), int(header["year"])
        first += 1
    paragraph: list[str] = []
    start = 0
    for number, line in enumerate([*lines[first:], ""], start=first + 1):
        if line.strip():
            if not paragraph:
                start = number
            paragraph.append(line.strip())
        elif paragraph:
            yield start, {"abstract": " ".join(paragraph), "venue": venue, "year": year}
            paragraph = []


def to_paper(
    raw: Any, file: str, line: int, warnings: list[Problem], *, library: bool = False
) -> Paper | Problem:
    """One record to a `Paper`, or the reason it cannot be one. A ``library`` record (our
    fields from a reference library's) has no id of its own: it gets its DOI, arXiv id or
    title's (`identity.Keys.derived_id`)."""

    def problem(reason: str) -> Problem:
        return Problem(file=file, line=line, reason=reason)

    if not isinstance(raw, dict):
        return problem(f"expected an object with an 'abstract', got {type(raw).__name__}")
    record = {str(k).strip().lower(): v for k, v in raw.items()}
    abstract = record.get("abstract")
    if abstract is None or (isinstance(abstract, str) and not abstract.strip()):
        key, title = _text(record.get("key")), _text(record.get("title"))
        named = ", ".join(x for x in (key and f"entry {key!r}", title and f"{title!r}") if x)
        return problem(f"no abstract ({named})" if named and library else "no abstract")
    if not isinstance(abstract, str):
        return problem(f"abstract is {type(abstract).__name__}, not text")
    if _INVALID_UTF8.search(json.dumps(record, ensure_ascii=False, default=str)):
        # A file that mixes encodings: this record is most likely Windows-1252 (or Latin-1).
        record = _redecode(record)
        abstract = record["abstract"]
        warnings.append(problem("not valid UTF-8; read as Windows-1252 (re-save as UTF-8)"))
    abstract = abstract.strip()
    if len(abstract) > MAX_ABSTRACT_CHARS:
        return problem(
            f"abstract is {len(abstract):,} characters, over the {MAX_ABSTRACT_CHARS:,} an "
            "abstract can have (a whole paper?); shorten it to its abstract"
        )
    raw_id = record.get("paper_id" if library else "id")
    given_id = _text(raw_id)
    if raw_id is not None and raw_id != "" and given_id is None:
        warnings.append(problem(f"id {raw_id!r} is not text; an id was made from the abstract"))
    if given_id is not None and len(given_id) > MAX_ID_CHARS:
        return problem(f"id is {len(given_id):,} characters, over {MAX_ID_CHARS}")
    title = _text(record.get("title"))
    doi, arxiv_id = clean_doi(record.get("doi")), clean_arxiv_id(record.get("arxiv_id"))
    derived = _keys(record, None).derived_id() if library else None
    paper_id = given_id or derived or "h" + fingerprint(normalise_for_id(abstract))
    made = derive_title(abstract) if library or not title else None
    # an export of ours writes an untitled paper's made-up title: it is still made up
    untitled = made is not None and (not title or title == made)
    return Paper(
        paper_id=paper_id,
        title=made if untitled and made is not None else title or "",
        title_derived=untitled,
        abstract=abstract,
        authors=_names(record.get("authors")),
        year=_year(record.get("year"), problem, warnings),
        venue=_text(record.get("venue")),
        url=_text(record.get("url")),
        keywords=_names(record.get("keywords")),
        decision=_text(record.get("decision")),
        doi=doi,
        arxiv_id=arxiv_id,
        source=f"{file}:{line}",
    )


def _redecode(value: Any) -> Any:
    """Strings whose undecodable bytes were kept as surrogates, decoded as Windows-1252 (or,
    for the five bytes it leaves undefined, Latin-1)."""
    if isinstance(value, str):
        if not _INVALID_UTF8.search(value):
            return value
        raw = value.encode("utf-8", "surrogateescape")
        try:
            return raw.decode("cp1252")
        except UnicodeDecodeError:
            return raw.decode("latin-1")
    if isinstance(value, list):
        return [_redecode(v) for v in value]
    if isinstance(value, dict):
        return {k: _redecode(v) for k, v in value.items()}
    return value


def _text(value: Any) -> str | None:
    if value is None or isinstance(value, dict | list):
        return None
    text = " ".join(str(value).split())
    return text or None


def _names(value: Any) -> list[str]:
    if value is None:
        return []
    items: Iterable[Any]
    if isinstance(value, list):
        items = value
    else:
        text = str(value)
        items = text.split(";") if ";" in text else text.split(",")
    return [name for name in (_text(item) for item in items) if name]


def _year(value: Any, problem: Any, warnings: list[Problem]) -> int | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        match = None
    elif isinstance(value, int | float) and float(value).is_integer():
        match = _YEAR.fullmatch(str(int(value)))
    else:
        match = _YEAR.search(str(value))
    if match:
        return int(match.group(1))
    warnings.append(problem(f"year {value!r} is not a year; stored without one"))
    return None
