"""Annotated training questions for the answer selector (issue 37): how data/train/ is made.

Two steps, with blind annotators (helper sessions that never see the answerer) between them:

    # 1. papers no frozen set uses and none held out, in topical groups, each abstract cut
    #    into numbered sentences exactly as the answerer cuts it
    .venv/bin/python bench/trainset.py packets ../shared/data/ml-abstracts.jsonl.gz \
        --out /tmp/aqa-train/packets --packets 8 --papers 210 --seed 37
    # 2. the annotators' files checked and merged into data/train/questions.jsonl
    .venv/bin/python bench/trainset.py merge /tmp/aqa-train/packets --out data/train/questions.jsonl

Evidence tables for the selector's column stage (issue 38) are made the same way: groups of ten
neighbouring papers, none used anywhere (nor in data/train/), from the half of the corpus whose
id's SHA-1 is odd (the frozen table set drew from the even half); an annotator picks 4-8 papers of
a group, 3-5 review columns, and fills every cell; the checked tables are appended:

    .venv/bin/python bench/trainset.py table-packets ../shared/data/ml-abstracts.jsonl.gz \
        --out /tmp/aqa-train/tables --packets 6 --groups 14 --first 4 --seed 38
    .venv/bin/python bench/trainset.py merge-tables /tmp/aqa-train/tables \
        --out data/train/tables.jsonl

An annotator's line names its gold papers, its facts, and for each fact the number of the
sentence that states it (see data/train/README.md for the stored format). ``merge`` keeps a line
only if every paper it names is in its packet, every fact is found in the sentence it names
(matching ignores case and spacing) and its kind is known; it prints what it dropped and why.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import math
import random
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core.text import plain_text, sentence_spans

ROOT = Path(__file__).resolve().parents[1]
KINDS = {"factual", "two-part", "keyword", "multi", "not-stated", "unanswerable", "invented"}
HELDOUT = ROOT.parent / "shared" / "data" / "heldout-papers.txt"


def used_papers() -> set[str]:
    """Every paper a question set or test fixture of the project names: none may be trained on."""
    used: set[str] = set()
    for path in [*(ROOT / "data" / "eval").glob("*.jsonl"), *(ROOT / "tests").rglob("*.jsonl")]:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                record = json.loads(line)
                used.update(record.get("gold", []))
                used.update(record.get("papers", []))  # an evidence table's rows
                if "id" in record and "abstract" in record:
                    used.add(record["id"])
    if HELDOUT.exists():
        used.update(HELDOUT.read_text().split())
    return used


def sentences(abstract: str) -> list[str]:
    text = plain_text(abstract)
    return [text[s:e] for s, e in sentence_spans(text)]


def _neighbours(texts: list[str]) -> Callable[[int, set[int]], list[int]]:
    """Nearest papers by shared rare words (idf-weighted overlap of their word sets)."""
    bags = [set(re.findall(r"[a-z][a-z-]{3,}", t.lower())) for t in texts]
    postings: dict[str, list[int]] = {}
    for i, bag in enumerate(bags):
        for word in bag:
            postings.setdefault(word, []).append(i)
    n = len(bags)
    idf = {w: math.log(n / len(ids)) for w, ids in postings.items() if len(ids) < n / 20}

    def nearest(seed: int, taken: set[int]) -> list[int]:
        scores: dict[int, float] = {}
        for word in bags[seed]:
            if word in idf:
                for other in postings[word]:
                    scores[other] = scores.get(other, 0.0) + idf[word] / math.sqrt(len(bags[other]))
        best = sorted(scores, key=lambda i: -scores[i])[:50]
        return [i for i in best if i != seed and i not in taken]

    return nearest


def _grouped(
    corpus: str,
    keep: Callable[[dict], bool],
    size: int,
    enough: Callable[[list[list[int]]], bool],
    seed: int,
) -> tuple[list[dict], list[list[int]]]:
    """The corpus's papers that ``keep`` accepts, shuffled by ``seed``, and groups of ``size``
    (a random paper and its nearest untaken neighbours; a group short by more than two is
    skipped) until ``enough``."""
    with gzip.open(corpus, "rt", encoding="utf-8") as fh:
        pool = [p for p in map(json.loads, fh) if keep(p)]
    random.Random(seed).shuffle(pool)
    nearest = _neighbours([f"{p['title']} {p['abstract']}" for p in pool])
    taken: set[int] = set()
    groups: list[list[int]] = []
    for first in range(len(pool)):
        if first in taken:
            continue
        group = [first, *nearest(first, taken)[: size - 1]]
        if len(group) < size - 2:
            continue
        taken.update(group)
        groups.append(group)
        if enough(groups):
            break
    return pool, groups


def _write_packets(
    out: Path, pool: list[dict], groups: list[list[int]], count: int, name: Callable[[int], str]
) -> None:
    """``count`` packets, every ``count``-th group in each: a paper a line, its abstract cut into
    numbered sentences as the answerer cuts it."""
    out.mkdir(parents=True, exist_ok=True)
    for k in range(count):
        mine = groups[k::count]
        lines = [
            {
                "group": g,
                **{key: pool[i][key] for key in ("id", "title", "year", "venue")},
                "sentences": {
                    str(n): s for n, s in enumerate(sentences(pool[i]["abstract"]), start=1)
                },
            }
            for g, group in enumerate(mine)
            for i in group
        ]
        path = out / name(k)
        path.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines))
        print(f"{path}: {len(lines)} papers in {len(mine)} groups")


def packets(args: argparse.Namespace) -> None:
    used = used_papers() | (trained_papers() if args.eval else set())
    want = args.packets * args.papers
    pool, groups = _grouped(  # a random paper and its two nearest untaken neighbours
        args.corpus,
        lambda p: p["id"] not in used and len(sentences(p["abstract"])) >= 3,
        3,
        lambda groups: sum(map(len, groups)) >= want,
        args.seed,
    )
    _write_packets(Path(args.out), pool, groups, args.packets, lambda k: f"packet-{k + 1}.jsonl")
    if args.eval:  # a listing question's papers may come from the whole corpus but these
        (Path(args.out) / "excluded-papers.txt").write_text("".join(f"{i}\n" for i in sorted(used)))
        print(f"{len(used)} papers excluded (used, trained on or held out)")


def trained_papers() -> set[str]:
    """Papers data/train/ already annotates: a new table packet offers none of them."""
    taken: set[str] = set()
    for path in (ROOT / "data" / "train").glob("*.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                record = json.loads(line)
                taken.update(record.get("gold", []))
                taken.update(record.get("papers", []))
    return taken


def odd_half(paper_id: str) -> bool:
    return int(hashlib.sha1(paper_id.encode()).hexdigest(), 16) % 2 == 1


def table_packets(args: argparse.Namespace) -> None:
    excluded = used_papers() | trained_papers()
    pool, groups = _grouped(  # a random paper and its nine nearest untaken neighbours
        args.corpus,
        lambda p: (
            p["id"] not in excluded and odd_half(p["id"]) and len(sentences(p["abstract"])) >= 4
        ),
        10,
        lambda groups: len(groups) >= args.packets * args.groups,
        args.seed,
    )
    out = Path(args.out)
    _write_packets(out, pool, groups, args.packets, lambda k: f"tables-{args.first + k}.jsonl")


def merge_tables(args: argparse.Namespace) -> None:
    """Check the annotators' tables (tables-N-answers.jsonl beside tables-N.jsonl) and append the
    good ones to --out; a table with any bad cell is dropped whole, with the reason printed."""
    out = Path(args.out)
    existing = out.read_text(encoding="utf-8").splitlines() if out.exists() else []
    have = {json.loads(line)["batch"] for line in existing if line.strip()}
    added: list[dict] = []
    for packet in sorted(Path(args.packets).glob("tables-*.jsonl")):
        if packet.stem.endswith("-answers") or packet.stem in have:
            continue
        if args.batch and packet.stem != args.batch:
            continue
        answers = packet.with_name(f"{packet.stem}-answers.jsonl")
        if not answers.exists():
            print(f"{answers}: missing", file=sys.stderr)
            continue
        papers = {
            p["id"]: p for p in map(json.loads, packet.read_text(encoding="utf-8").splitlines())
        }
        kept = 0
        for n, line in enumerate(answers.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                table = _checked_table(json.loads(line), papers)
            except (ValueError, KeyError, TypeError) as err:
                print(f"{answers}:{n}: dropped: {err}", file=sys.stderr)
                continue
            table["id"] = f"tt{len(existing) + len(added) + 1:02d}"
            table["batch"] = packet.stem
            added.append(table)
            kept += 1
        print(f"{answers}: {kept} tables kept")
    with out.open("a", encoding="utf-8") as fh:
        fh.writelines(json.dumps(t, ensure_ascii=False) + "\n" for t in added)
    cells = [c for t in added for c in t["cells"]]
    unstated = sum(not c["stated"] for c in cells)
    print(f"{out}: {len(added)} tables added, {len(cells)} cells, {unstated} not stated")


def _checked_table(raw: dict, papers: dict[str, dict]) -> dict:
    topic = str(raw["topic"]).strip()
    ids = list(dict.fromkeys(raw["papers"]))
    columns = list(dict.fromkeys(str(c).strip() for c in raw["columns"]))
    if not topic or not 3 <= len(columns) <= 5 or not 4 <= len(ids) <= 8:
        raise ValueError("a table needs a topic, 4-8 papers and 3-5 columns")
    groups = {papers[i]["group"] if i in papers else None for i in ids}
    if None in groups or len(groups) != 1:
        raise ValueError("papers outside the packet or from more than one group")
    cells: dict[tuple[str, str], dict] = {}
    for cell in raw["cells"]:
        pid, column = cell["paper"], str(cell["column"]).strip()
        if pid not in ids or column not in columns:
            raise ValueError(f"cell outside the table: {pid} / {column}")
        if (pid, column) in cells or not isinstance(cell["stated"], bool):
            raise ValueError(f"{pid} / {column}: given twice, or 'stated' not true or false")
        if not cell["stated"]:
            cells[pid, column] = {"paper": pid, "column": column, "stated": False, "facts": []}
            continue
        sentence = papers[pid]["sentences"].get(str(cell["sentence"]))
        if sentence is None:
            raise ValueError(f"no sentence {cell['sentence']} in {pid}")
        facts = [
            [str(v).strip() for v in (f if isinstance(f, list) else [f])] for f in cell["facts"]
        ]
        if not facts or any(not v or _norm(v) not in _norm(sentence) for f in facts for v in f):
            raise ValueError(f"{pid} / {column}: a fact is not in sentence {cell['sentence']}")
        cells[pid, column] = {
            "paper": pid,
            "column": column,
            "stated": True,
            "facts": facts,
            "evidence": sentence,
        }
    missing = [f"{p} / {c}" for p in ids for c in columns if (p, c) not in cells]
    if missing:
        raise ValueError(f"cells not filled: {', '.join(missing[:3])}")
    return {
        "topic": topic,
        "papers": ids,
        "columns": columns,
        "cells": [cells[p, c] for p in ids for c in columns],
    }


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text.replace("\\", "")).strip().casefold()


def _unique(rows: list[dict]) -> list[dict]:
    """The rows less any whose question repeats an earlier one (ignoring case and spacing)."""
    seen: set[str] = set()
    unique = []
    for row in rows:
        key = _norm(row["question"])
        if key not in seen:
            seen.add(key)
            unique.append(row)
    return unique


def _annotated(folder: Path) -> Iterator[tuple[Path, dict[str, dict], Path, int, str]]:
    """Each annotator's line beside its packet: (packet, its papers by id, the answers file, line
    number, line); a packet whose questions-K.jsonl is missing is reported and skipped."""
    for packet in sorted(folder.glob("packet-*.jsonl")):
        papers = {
            p["id"]: p for p in map(json.loads, packet.read_text(encoding="utf-8").splitlines())
        }
        answers = packet.with_name(packet.name.replace("packet-", "questions-"))
        if not answers.exists():
            print(f"{answers}: missing", file=sys.stderr)
            continue
        for n, line in enumerate(answers.read_text(encoding="utf-8").splitlines(), start=1):
            if line.strip():
                yield packet, papers, answers, n, line


def merge(args: argparse.Namespace) -> None:
    rows: list[dict] = []
    dropped: Counter[str] = Counter()
    for packet, papers, answers, n, line in _annotated(Path(args.packets)):
        try:
            row = _checked(json.loads(line), papers)
        except (ValueError, KeyError, TypeError) as err:
            dropped[str(err).split(":")[0]] += 1
            if args.verbose:
                print(f"{answers}:{n}: {err}", file=sys.stderr)
            continue
        row["id"] = f"t{len(rows) + 1:05d}"
        row["batch"] = packet.stem
        rows.append(row)
    unique = _unique(rows)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in unique))
    kinds = Counter(r["type"] for r in unique)
    print(f"{out}: {len(unique)} questions {dict(kinds)}; dropped {dict(dropped)}")


def merge_eval(args: argparse.Namespace) -> None:
    """A frozen set from packets written with ``packets --eval``: each questions-K.jsonl checked as
    ``merge`` checks it, except that a listing's papers come from the whole corpus (2-8, none
    excluded, each with a phrase of its title or abstract that shows it fits)."""
    folder = Path(args.packets)
    excluded = set((folder / "excluded-papers.txt").read_text().split())
    with gzip.open(args.corpus, "rt", encoding="utf-8") as fh:
        corpus = {p["id"]: p for p in map(json.loads, fh)}
    rows: list[dict] = []
    for packet, papers, answers, n, line in _annotated(folder):
        try:
            raw = json.loads(line)
            row = (
                _checked_listing(raw, corpus, excluded)
                if raw.get("type") == "multi"
                else _checked(raw, papers)
            )
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            print(f"{answers}:{n}: dropped: {err}", file=sys.stderr)
            continue
        rows.append({"id": f"{args.prefix}-{len(rows) + 1:03d}", **row, "batch": packet.stem})
    unique = _unique(rows)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in unique))
    print(f"{out}: {len(unique)} questions {dict(Counter(r['type'] for r in unique))}")


def _checked_listing(raw: dict, corpus: dict[str, dict], excluded: set[str]) -> dict:
    question = str(raw["question"]).strip()
    if len(question) < 8:
        raise ValueError("short question")
    gold = list(dict.fromkeys(raw["gold"]))
    if not 2 <= len(gold) <= 8:
        raise ValueError(f"a listing needs 2-8 papers, not {len(gold)}")
    if bad := [pid for pid in gold if pid not in corpus or pid in excluded]:
        raise ValueError(f"papers not in the corpus or excluded: {bad}")
    why = {e["paper"]: str(e["why"]) for e in raw["evidence"]}
    for pid in gold:
        paper = corpus[pid]
        phrase = _norm(why.get(pid, ""))
        if len(phrase) < 3 or phrase not in _norm(f"{paper['title']} {paper['abstract']}"):
            raise ValueError(f"no phrase of {pid} shows that it fits")
    return {
        "question": question,
        "gold": gold,
        "facts": [],
        "answerable": True,
        "type": "multi",
        "evidence": [{"paper": pid, "sentence": _holding(corpus[pid], why[pid])} for pid in gold],
        "search_terms": [str(t) for t in raw.get("search_terms", [])],
    }


def _holding(paper: dict, phrase: str) -> str:
    """The sentence of the paper's abstract (as the answerer cuts it) that holds ``phrase``, else
    its title when the title does, else the sentence sharing the most of its words."""
    cut = sentences(paper["abstract"])
    held = [s for s in cut if _norm(phrase) in _norm(s)]
    if held:
        return held[0]
    if _norm(phrase) in _norm(paper["title"]) or not cut:
        return str(paper["title"])
    mine = set(_norm(phrase).split())
    return max(cut, key=lambda s: len(mine & set(_norm(s).split())))


def _checked(raw: dict, papers: dict[str, dict]) -> dict:
    kind = raw["type"]
    if kind not in KINDS:
        raise ValueError(f"unknown type: {kind}")
    question = str(raw["question"]).strip()
    if len(question) < 8:
        raise ValueError("short question")
    gold = list(dict.fromkeys(raw.get("gold") or []))
    for pid in gold:
        if pid not in papers:
            raise ValueError(f"gold outside the packet: {pid}")
    facts, evidence = [], []
    for fact in raw.get("facts") or []:
        pid, answer, number = fact["paper"], str(fact["answer"]).strip(), str(fact["sentence"])
        if pid not in gold:
            raise ValueError(f"fact of a paper not in gold: {pid}")
        sentence = papers[pid]["sentences"].get(number)
        if sentence is None:
            raise ValueError(f"no such sentence: {pid} {number}")
        if not answer or _norm(answer) not in _norm(sentence):
            raise ValueError(f"fact not in its sentence: {answer!r}")
        facts.append([answer])
        evidence.append({"paper": pid, "sentence": sentence})
    answerable = kind not in {"not-stated", "unanswerable", "invented"}
    if answerable and not facts:
        raise ValueError("answerable without facts")
    if kind in {"unanswerable", "invented"} and gold:
        raise ValueError("unanswerable with gold")
    if kind == "not-stated" and len(gold) != 1:
        raise ValueError("not-stated needs one paper")
    if kind == "multi" and len(gold) < 2:
        raise ValueError("multi needs two papers")
    row = {
        "question": question,
        "gold": gold,
        "facts": [] if kind == "multi" else facts,
        "answerable": answerable,
        "type": kind,
        "evidence": evidence,
    }
    if kind == "not-stated":
        row["asked"] = str(raw.get("asked", "")).strip()
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="step", required=True)
    for name, run in (("packets", packets), ("table-packets", table_packets)):
        p = sub.add_parser(name)
        p.add_argument("corpus")
        p.add_argument("--out", required=True)
        p.add_argument("--packets", type=int, default=8 if run is packets else 6)
        p.add_argument("--seed", type=int, default=37 if run is packets else 38)
        p.set_defaults(run=run)
        if run is packets:
            p.add_argument("--papers", type=int, default=210)
            p.add_argument(
                "--eval",
                action="store_true",
                help="for a frozen set: also leave out every paper data/train/ annotates",
            )
        else:
            p.add_argument("--groups", type=int, default=14)
            p.add_argument("--first", type=int, default=4, help="the first batch's N (tables-N)")
    for name, run in (("merge", merge), ("merge-tables", merge_tables)):
        m = sub.add_parser(name)
        m.add_argument("packets")
        m.add_argument("--out", required=True)
        m.set_defaults(run=run)
    sub.choices["merge"].add_argument("--verbose", action="store_true")
    m = sub.add_parser("merge-eval", help="a frozen set from packets made with packets --eval")
    m.add_argument("packets")
    m.add_argument("corpus")
    m.add_argument("--out", required=True)
    m.add_argument("--prefix", required=True, help="the questions' id prefix")
    m.set_defaults(run=merge_eval)
    sub.choices["merge-tables"].add_argument(
        "--batch", help="only this batch (tables-N): an annotator checking a draft"
    )
    args = parser.parse_args()
    args.run(args)


if __name__ == "__main__":
    main()
