"""Annotated training questions for the answer selector (issue 37): how data/train/ is made.

Two steps, with blind annotators (helper sessions that never see the answerer) between them:

    # 1. papers no frozen set uses and none held out, in topical groups, each abstract cut
    #    into numbered sentences exactly as the answerer cuts it
    .venv/bin/python bench/trainset.py packets ../shared/data/ml-abstracts.jsonl.gz \
        --out /tmp/aqa-train/packets --packets 8 --papers 210 --seed 37
    # 2. the annotators' files checked and merged into data/train/questions.jsonl
    .venv/bin/python bench/trainset.py merge /tmp/aqa-train/packets --out data/train/questions.jsonl

An annotator's line names its gold papers, its facts, and for each fact the number of the
sentence that states it (see data/train/README.md for the stored format). ``merge`` keeps a line
only if every paper it names is in its packet, every fact is found in the sentence it names
(matching ignores case and spacing) and its kind is known; it prints what it dropped and why.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import random
import re
import sys
from collections import Counter
from collections.abc import Callable
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


def packets(args: argparse.Namespace) -> None:
    used = used_papers()
    with gzip.open(args.corpus, "rt", encoding="utf-8") as fh:
        papers = [json.loads(line) for line in fh]
    pool = [p for p in papers if p["id"] not in used and len(sentences(p["abstract"])) >= 3]
    rng = random.Random(args.seed)
    rng.shuffle(pool)
    nearest = _neighbours([f"{p['title']} {p['abstract']}" for p in pool])
    taken: set[int] = set()
    groups: list[list[int]] = []
    want = args.packets * args.papers
    for seed in range(len(pool)):  # a random paper and its two nearest untaken neighbours
        if seed in taken:
            continue
        group = [seed, *nearest(seed, taken)[:2]]
        taken.update(group)
        groups.append(group)
        if sum(map(len, groups)) >= want:
            break
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for k in range(args.packets):
        mine = groups[k :: args.packets]
        lines = []
        for g, group in enumerate(mine):
            for i in group:
                p = pool[i]
                lines.append(
                    {
                        "group": g,
                        "id": p["id"],
                        "title": p["title"],
                        "year": p["year"],
                        "venue": p["venue"],
                        "sentences": {
                            str(n): s for n, s in enumerate(sentences(p["abstract"]), start=1)
                        },
                    }
                )
        path = out / f"packet-{k + 1}.jsonl"
        path.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines))
        print(f"{path}: {len(lines)} papers in {len(mine)} groups")


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text.replace("\\", "")).strip().casefold()


def merge(args: argparse.Namespace) -> None:
    folder = Path(args.packets)
    rows: list[dict] = []
    dropped: Counter[str] = Counter()
    for packet in sorted(folder.glob("packet-*.jsonl")):
        papers = {
            p["id"]: p for p in map(json.loads, packet.read_text(encoding="utf-8").splitlines())
        }
        answers = packet.with_name(packet.name.replace("packet-", "questions-"))
        if not answers.exists():
            print(f"{answers}: missing", file=sys.stderr)
            continue
        for n, line in enumerate(answers.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
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
    seen: set[str] = set()
    unique = []
    for row in rows:
        key = _norm(row["question"])
        if key not in seen:
            seen.add(key)
            unique.append(row)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in unique))
    kinds = Counter(r["type"] for r in unique)
    print(f"{out}: {len(unique)} questions {dict(kinds)}; dropped {dict(dropped)}")


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
    p = sub.add_parser("packets")
    p.add_argument("corpus")
    p.add_argument("--out", required=True)
    p.add_argument("--packets", type=int, default=8)
    p.add_argument("--papers", type=int, default=210)
    p.add_argument("--seed", type=int, default=37)
    p.set_defaults(run=packets)
    m = sub.add_parser("merge")
    m.add_argument("packets")
    m.add_argument("--out", required=True)
    m.add_argument("--verbose", action="store_true")
    m.set_defaults(run=merge)
    args = parser.parse_args()
    args.run(args)


if __name__ == "__main__":
    main()
