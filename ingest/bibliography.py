"""BibTeX and RIS files to records, each with the line its entry starts on; a malformed entry
becomes a `Problem` naming that line and the rest of the file is read.

BibTeX goes through bibtexparser v2 with a pinned parse stack (its defaults may change in a
minor release): field names in lower case, ``@string`` macros resolved, enclosing braces or
quotes removed, authors split into name parts. LaTeX is rendered by our own renderer
(`schemas.tex`), which keeps math as text.
RIS goes through rispy, one record at a time, so that a record's line is known.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from typing import Any

from core.models import Problem
from ingest.schemas import from_bibtex, from_ris

Entry = tuple[int, Any, str | None]

_NOT_PAPERS = {"string", "preamble", "comment"}
_RIS_TAG = re.compile(r"^([A-Z][A-Z0-9])  -(?: (.*))?$")
_WRAPPED = {"AB", "N1", "N2", "TI", "T1", "T2", "T3", "BT", "CT", "ST", "TT", "JF", "JO", "JA",
            "J2", "KW", "AD", "PB", "M1", "M3"}  # fmt: skip
_COUNTER = re.compile(r"^\s*\d+\.\s*$")  # "1." before a record, as rispy and WoS write


def read_bibtex(text: str, name: str) -> Iterator[Entry]:
    import bibtexparser
    from bibtexparser import middlewares as mw

    stack = [
        mw.NormalizeFieldKeys(allow_inplace_modification=True),  # Author, AUTHOR -> author
        mw.ResolveStringReferencesMiddleware(allow_inplace_modification=True),
        mw.RemoveEnclosingMiddleware(allow_inplace_modification=True),
        mw.SeparateCoAuthors(allow_inplace_modification=True),
        mw.SplitNameParts(allow_inplace_modification=True),
    ]
    quiet = logging.getLogger("bibtexparser")
    level, quiet.level = quiet.level, logging.CRITICAL  # failures are reported below, by line
    try:
        library = bibtexparser.parse_string(text, parse_stack=stack)
    except Exception as exc:  # the parser is lenient, yet a hostile file may still break it
        yield 1, Problem(file=name, line=1, reason=f"cannot read this BibTeX file: {exc}"), None
        return
    finally:
        quiet.level = level
    blocks: list[tuple[int, Any, str | None]] = []
    for entry in library.entries:
        if entry.entry_type.lower() in _NOT_PAPERS:
            continue
        values = {f.key: f.value for f in entry.fields}
        line = (entry.start_line or 0) + 1
        try:
            fields = from_bibtex(entry.key, entry.entry_type, values)
        except (TypeError, ValueError, AttributeError) as exc:  # a value of an unusual shape
            blocks.append(
                (line, Problem(file=name, line=line, reason=f"entry {entry.key!r}: {exc}"), None)
            )
            continue
        blocks.append((line, fields, "bibtex"))
    for block in library.failed_blocks:
        line = (block.start_line or 0) + 1
        raw = (block.raw or "").strip()
        first = raw.splitlines()[0][:60] if raw else ""
        kind = type(block).__name__
        reason = (
            f"entry key repeated ({first}); kept the first"
            if kind == "DuplicateBlockKeyBlock"
            else f"malformed BibTeX entry ({first}); fix it and ingest again"
        )
        blocks.append((line, Problem(file=name, line=line, reason=reason), None))
    yield from sorted(blocks, key=lambda b: b[0])


def read_ris(text: str, name: str) -> Iterator[Entry]:
    """Records from ``TY`` to ``ER``. A record whose ``ER`` line is missing ends at the next
    ``TY`` line, a record counter (``2.``), text after a blank line, or the end of the file."""
    import rispy

    lines = text.split("\n")
    record: list[str] = []
    start = 0
    gap = False  # a blank line inside a record: a line without a tag after it is not the record's
    last = ""  # the record's last tag: only a text field wraps onto lines without a tag
    for number, raw in enumerate(lines, start=1):
        line = raw.rstrip("\r").lstrip("\ufeff")
        tag = _RIS_TAG.match(line.rstrip())
        if record and not tag and (_COUNTER.match(line) or (gap and line.strip())):
            yield _ris_record(record, start, name, rispy)
            record = []
        if tag and tag.group(1) == "TY":
            if record:
                yield _ris_record(record, start, name, rispy)
            record, start, gap, last = [line], number, False, "TY"
        elif record:
            if not tag and line.strip() and last not in _WRAPPED:
                reason = f"not a RIS line (no tag, and {last} is no text that wraps); ignored"
                yield number, Problem(file=name, line=number, reason=reason), None
                continue
            record.append(line)
            gap = gap or not line.strip()
            if tag:
                gap, last = False, tag.group(1)
            if tag and tag.group(1) == "ER":
                yield _ris_record(record, start, name, rispy)
                record = []
        elif line.strip() and not _COUNTER.match(line):
            yield (
                number,
                Problem(
                    file=name,
                    line=number,
                    reason="text outside a RIS record (a record starts with a TY line); ignored",
                ),
                None,
            )
    if record:
        yield _ris_record(record, start, name, rispy)


def _ris_record(lines: list[str], start: int, name: str, rispy: Any) -> Entry:
    if not any(_RIS_TAG.match(x.rstrip()) and x.startswith("ER") for x in lines):
        lines = [*lines, "ER  - "]
    try:
        parsed = rispy.loads("\n".join(lines))
    except Exception as exc:  # rispy raises plain exceptions on a malformed record
        return start, Problem(file=name, line=start, reason=f"malformed RIS record: {exc}"), None
    if not parsed:
        return start, Problem(file=name, line=start, reason="malformed RIS record"), None
    return start, from_ris(parsed[0]), "ris"
