"""Answers and evidence tables taken out: Markdown for notes, BibTeX and CSL-JSON for a reference
manager, JSON as the API gives an `Answer` (or a `Table`), CSV and Excel for a table.

BibTeX is written with bibtexparser (the library ingest reads it with), keys author-year-word
made unique; each entry carries the paper's id (``abstractqa-id``), so that the file ingests
back into the same papers.
"""

from __future__ import annotations

import csv
import io
import json
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from typing import Literal, TypeVar, get_args

from core.errors import InputError
from core.models import Answer, Paper, Table, TableRow
from core.text import FUNCTION_WORDS, plain_text
from ingest.schemas import ID_FIELD

F = TypeVar("F", bound=str)
ExportFormat = Literal["markdown", "bibtex", "csl-json", "json"]
EXPORT_FORMATS: tuple[ExportFormat, ...] = get_args(ExportFormat)
SUFFIXES: dict[str, ExportFormat] = {
    ".csl.json": "csl-json",
    ".md": "markdown",
    ".markdown": "markdown",
    ".bib": "bibtex",
    ".json": "json",
}
"""File endings and the format each is written in (the longest ending that matches)."""
MEDIA_TYPES: dict[ExportFormat, str] = {
    "markdown": "text/markdown; charset=utf-8",
    "bibtex": "application/x-bibtex; charset=utf-8",
    "csl-json": "application/vnd.citationstyles.csl+json",
    "json": "application/json",
}
"""Each format's media type (HTTP, the app's downloads)."""


def format_for(filename: str) -> ExportFormat:
    """The export format a file's name asks for."""
    return _by_suffix(filename, SUFFIXES, "export format")


def _by_suffix(filename: str, suffixes: Mapping[str, F], what: str) -> F:
    """The format of the first ending in ``suffixes`` that ``filename`` has (longest first)."""
    name = filename.lower()
    for suffix, fmt in suffixes.items():
        if name.endswith(suffix):
            return fmt
    raise InputError(
        f"cannot tell the {what} of {filename!r}: end its name in " + ", ".join(suffixes)
    )


def papers_of(
    answers: Sequence[Answer], paper: Callable[[str], Paper], everything: bool
) -> list[Paper]:
    """The papers the answers cite (or, ``everything``, all their sources), each once, in the
    order they first appear."""
    ids: dict[str, None] = {}
    for answer in answers:
        shown = answer.sources if everything else answer.cited_sources
        ids.update(dict.fromkeys(s.paper_id for s in shown))
    return [paper(paper_id) for paper_id in ids]


def export(
    answers: Sequence[Answer],
    fmt: ExportFormat,
    paper: Callable[[str], Paper],
    everything: bool = False,
) -> str:
    """The answers (one, or a conversation) as text in ``fmt``; ``paper`` looks a paper up by
    id (`QAService.paper`)."""
    if fmt == "json":
        dumped = [a.model_dump(mode="json") for a in answers]
        return json.dumps(dumped[0] if len(dumped) == 1 else dumped, indent=2, ensure_ascii=False)
    papers = papers_of(answers, paper, everything)
    if fmt == "bibtex":
        return bibtex(papers)
    if fmt == "csl-json":
        return csl_json(papers)
    return markdown(answers, {p.paper_id: p for p in papers})


def markdown(answers: Sequence[Answer], papers: dict[str, Paper]) -> str:
    """Each question, its answer with the citation markers, and for each cited paper its title,
    authors, venue, year, links and the sentences that support the answer."""
    parts = []
    for answer in answers:
        parts += [f"## {answer.question}", "", answer.answer, ""]
        supporting = {c.marker: c.supporting for c in answer.citations}
        for source in answer.cited_sources:
            found = papers[source.paper_id]
            line = f"[{source.marker}] **{plain_text(found.title)}**"
            who = ", ".join(found.authors[:6]) + (" et al." if len(found.authors) > 6 else "")
            where = ", ".join(str(x) for x in (found.venue, found.year) if x)
            line += "".join(f". {x}" for x in (who, where) if x) + "."
            links = [u for u in (found.url, found.doi_url, found.arxiv_url) if u]
            line += "".join(f" <{u}>" for u in dict.fromkeys(links))
            parts.append(line)
            parts += [f"   > {s}" for s in supporting.get(source.marker, [])]
            parts.append("")
    return "\n".join(parts).rstrip() + "\n"


def cite_keys(papers: Sequence[Paper]) -> list[str]:
    """Keys like ``vaswani2017attention``: the first author's family name, the year, the
    title's first word that says something; ``a``, ``b``... make repeats unique."""
    keys: list[str] = []
    seen: dict[str, int] = {}
    for p in papers:
        family = p.authors[0].split()[-1] if p.authors else "anon"
        words = [w for w in re.findall(r"[^\W_]+", plain_text(p.title).lower())]
        word = next((w for w in words if w not in FUNCTION_WORDS and len(w) > 2), "paper")
        base = _ascii(f"{family}{p.year or ''}{word}")
        n = seen.get(base, 0)
        seen[base] = n + 1
        keys.append(base if n == 0 else f"{base}{chr(ord('a') + n - 1) if n < 27 else n}")
    return keys


def _ascii(text: str) -> str:
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return re.sub(r"[^a-z0-9]", "", folded.lower()) or "paper"


def bibtex(papers: Sequence[Paper]) -> str:
    import bibtexparser
    from bibtexparser.model import Entry, Field

    library = bibtexparser.Library()
    for key, p in zip(cite_keys(papers), papers, strict=True):
        fields = {
            "title": p.title,
            "author": " and ".join(_bib_name(a) for a in p.authors),
            "year": str(p.year) if p.year else None,
            "booktitle": p.venue,
            "abstract": p.abstract,
            "doi": p.doi,
            "eprint": p.arxiv_id,
            "archiveprefix": "arXiv" if p.arxiv_id else None,
            "url": p.url,
            "keywords": ", ".join(p.keywords) or None,
            ID_FIELD: p.paper_id,
        }
        entry_type = "inproceedings" if p.venue else "misc"
        library.add(Entry(entry_type, key, [Field(k, v) for k, v in fields.items() if v]))
    return str(bibtexparser.write_string(library))


def _bib_name(name: str) -> str:
    """``Ashish Vaswani`` -> ``Vaswani, Ashish``; a one-word name as it is."""
    parts = name.split()
    return f"{parts[-1]}, {' '.join(parts[:-1])}" if len(parts) > 1 else name


def csl_json(papers: Sequence[Paper]) -> str:
    return json.dumps([csl(p) for p in papers], indent=2, ensure_ascii=False)


def csl(p: Paper) -> dict[str, object]:
    """A paper as a CSL-JSON item (the fields Zotero and pandoc read)."""
    item: dict[str, object] = {
        "id": p.paper_id,
        "type": "paper-conference" if p.venue else "article",
        "title": plain_text(p.title),
        "author": [_csl_name(a) for a in p.authors],
        "abstract": plain_text(p.abstract),
    }
    if p.year:
        item["issued"] = {"date-parts": [[p.year]]}
    optional = {"container-title": p.venue, "DOI": p.doi, "URL": p.url or p.arxiv_url}
    item |= {k: v for k, v in optional.items() if v}
    if p.keywords:
        item["keyword"] = ", ".join(p.keywords)
    if p.arxiv_id:
        item["number"] = f"arXiv:{p.arxiv_id}"
    return item


def _csl_name(name: str) -> dict[str, str]:
    parts = name.split()
    if len(parts) < 2:
        return {"literal": name}
    return {"family": parts[-1], "given": " ".join(parts[:-1])}


# --- evidence tables ---------------------------------------------------------------------------

TableFormat = Literal["csv", "markdown", "xlsx", "json", "bibtex"]
TABLE_FORMATS: tuple[TableFormat, ...] = get_args(TableFormat)
TABLE_SUFFIXES: dict[str, TableFormat] = {
    ".csv": "csv",
    ".md": "markdown",
    ".markdown": "markdown",
    ".xlsx": "xlsx",
    ".json": "json",
    ".bib": "bibtex",
}
TABLE_MEDIA_TYPES: dict[TableFormat, str] = {
    "csv": "text/csv; charset=utf-8",
    "markdown": "text/markdown; charset=utf-8",
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "json": "application/json",
    "bibtex": "application/x-bibtex; charset=utf-8",
}
ROW_FIELDS = ("paper_id", "title", "authors", "year", "venue", "url")


def table_format_for(filename: str) -> TableFormat:
    """The table export format a file's name asks for."""
    return _by_suffix(filename, TABLE_SUFFIXES, "table format")


def export_table(table: Table, fmt: TableFormat) -> bytes:
    """The table as a file's bytes: CSV and Excel a line per paper (each column's answer, then
    its quote and confidence), Markdown the answers, JSON the record, BibTeX the rows' papers."""
    if fmt == "json":
        return table.model_dump_json(indent=2).encode()
    if fmt == "bibtex":
        return bibtex([row_paper(r) for r in table.rows]).encode()
    if fmt == "markdown":
        return table_markdown(table).encode()
    grid = table_grid(table)
    if fmt == "xlsx":
        return _xlsx(grid)
    out = io.StringIO()
    csv.writer(out).writerows(grid)
    return out.getvalue().encode()


def table_grid(table: Table) -> list[list[object]]:
    """The table as a header and a line per paper: its metadata, then for each column the
    answer, the quote and the confidence."""
    header: list[object] = [*ROW_FIELDS]
    for column in table.columns:
        header += [column, f"{column} (quote)", f"{column} (confidence)"]
    lines: list[list[object]] = [header]
    for row in table.rows:
        line: list[object] = [
            row.paper_id,
            row.title,
            "; ".join(row.authors),
            row.year or "",
            row.venue or "",
            row.url or "",
        ]
        for cell in row.cells:
            line += [cell.text, cell.quote, cell.confidence]
        lines.append(line)
    return lines


def _xlsx(grid: list[list[object]]) -> bytes:
    from openpyxl import Workbook

    book = Workbook()
    sheet = book.active
    assert sheet is not None  # a new workbook has its one sheet
    sheet.title = "table"
    for line in grid:
        sheet.append([_cell_value(v) for v in line])
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def _cell_value(value: object) -> object:
    """What a spreadsheet cell may hold: text that starts like a formula is kept as text."""
    if isinstance(value, str):
        value = "".join(c for c in value if c.isprintable() or c in "\t\n")
        return f"'{value}" if value[:1] in ("=", "+", "-", "@") else value
    return value


def table_markdown(table: Table) -> str:
    """A Markdown table: a line per paper (its title linked), a column per question; "not
    stated" in italics."""

    def esc(text: str) -> str:
        return " ".join(text.replace("\\", "\\\\").replace("|", "\\|").split())

    head = ["Paper", *table.columns]
    parts = []
    if table.topic:
        parts += [f"## {esc(table.topic)}", ""]
    parts += ["| " + " | ".join(esc(h) for h in head) + " |", "|" + "---|" * len(head)]
    for row in table.rows:
        where = ", ".join(str(x) for x in (row.venue, row.year) if x)
        name = f"[{esc(row.title)}]({row.url})" if row.url else esc(row.title)
        cells = [esc(c.text) if c.stated else "_not stated_" for c in row.cells]
        parts.append("| " + " | ".join([f"{name} ({where})" if where else name, *cells]) + " |")
    return "\n".join(parts) + "\n"


def row_paper(row: TableRow) -> Paper:
    """A row as the paper it shows (for BibTeX)."""
    return Paper(
        paper_id=row.paper_id,
        title=row.title,
        abstract=row.abstract,
        authors=row.authors,
        year=row.year,
        venue=row.venue,
        url=row.url,
        decision=row.decision,
        doi=row.doi,
        arxiv_id=row.arxiv_id,
    )
