"""Incremental ingest: a day's papers into a large index, step by step.

    .venv/bin/python bench/incremental.py --index /tmp/aqa-bench/n21958/index --sizes 20,500

Works on a copy of --index (the index is left as it was). For each size N: N new papers (real
abstracts of the shared corpus under new ids, a sentence added, so their text is new), N changed
papers (indexed ids, a sentence added to the abstract), N deleted ones (indexed ids,
`abstract-qa remove`), N new papers from a reference library (BibTeX: each is looked up by its
DOI, arXiv id and title among the indexed papers) and that library imported again (nothing
changes). Each step runs in a child process as the CLI does (`abstract-qa ingest
FILE --json`, `abstract-qa remove IDS --json`); its report's per-step timings (read, diff, chunk,
model: loading the embedding model, embed, index, bm25) and the child's peak memory are printed as
a Markdown table, with the seconds beyond embedding (total minus model and embed: the part that
should follow the size of the change, not of the index) and total over model plus embed.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from corpus import read_records

EXE = Path(sys.executable).parent / "abstract-qa"


def run_cli(index: Path, *args: str) -> tuple[dict[str, Any], float]:
    """The command's JSON report and the child's peak memory (MB)."""
    env = {**os.environ, "AQA_DATA_DIR": str(index), "HF_HUB_OFFLINE": "1"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    done = subprocess.run([str(EXE), *args, "--json"], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        sys.exit(done.stderr)
    peak = max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024
    return json.loads(done.stdout), peak


def batches(n: int, indexed: list[dict[str, Any]], offset: int) -> dict[str, list[dict[str, Any]]]:
    """N new papers, N changed ones and N to delete, from records of the corpus."""
    picked = indexed[offset : offset + n]
    new = [
        {**r, "id": f"bench-new-{offset}-{i}", "abstract": r["abstract"] + " We add a new result."}
        for i, r in enumerate(picked)
    ]
    changed = [
        {**r, "abstract": r["abstract"] + " A revised version adds a note."}
        for r in indexed[-(offset + n) : len(indexed) - offset]
    ]
    deleted = indexed[len(indexed) // 2 + offset : len(indexed) // 2 + offset + n]
    library = [
        {**r, "title": f"{r['title']} (a library's copy {offset}-{i})"}
        for i, r in enumerate(indexed[len(indexed) // 3 + offset : len(indexed) // 3 + offset + n])
    ]
    return {
        "new": new,
        "changed": changed,
        "deleted": deleted,
        "library": library,
        "library again": library,
    }


def bibtex(papers: list[dict[str, Any]]) -> str:
    """The papers as a reference manager exports them (no ids of ours)."""

    def value(text: Any) -> str:
        return "".join(c for c in str(text) if c not in "{}\\")

    return "".join(
        f"@article{{k{i},\n  title = {{{value(p['title'])}}},\n"
        f"  abstract = {{{value(p['abstract'])}}},\n  year = {{{p.get('year') or ''}}}\n}}\n\n"
        for i, p in enumerate(papers)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", type=Path, required=True, help="A built index (AQA_DATA_DIR).")
    parser.add_argument("--sizes", default="20,500", help="Papers per step, comma-separated.")
    args = parser.parse_args()
    records = read_records()
    rows = []
    with tempfile.TemporaryDirectory(prefix="aqa-incremental-") as tmp:
        index = Path(tmp) / "index"
        shutil.copytree(args.index, index)
        offset = 0
        for n in (int(s) for s in args.sizes.split(",")):
            for kind, papers in batches(n, records, offset).items():
                if kind == "deleted":
                    report, peak = run_cli(index, "remove", *(str(p["id"]) for p in papers))
                elif kind.startswith("library"):
                    corpus = Path(tmp) / f"library-{n}.bib"
                    corpus.write_text(bibtex(papers))
                    report, peak = run_cli(index, "ingest", str(corpus))
                else:
                    corpus = Path(tmp) / f"{kind}-{n}.jsonl"
                    corpus.write_text("".join(json.dumps(p) + "\n" for p in papers))
                    report, peak = run_cli(index, "ingest", str(corpus))
                rows.append((kind, n, report, report["timings"], peak))
            offset += n
    print("| step | papers | added/updated/removed chunks | read | diff | chunk | model | embed "
          "| index | bm25 | total (s) | beyond embedding (s) | total / (model + embed) "
          "| peak MB |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for kind, n, report, t, peak in rows:
        keys = ("read", "diff", "chunk", "model", "embed", "index", "bm25")
        steps = " | ".join(f"{t.get(k, 0.0):.2f}" for k in keys)
        total = report["seconds"]
        embedding = t.get("model", 0.0) + t.get("embed", 0.0)
        ratio = f"{total / embedding:.2f}" if embedding else "-"
        changed = f"{report['added']}/{report['updated']}/{report['removed']}"
        print(f"| {kind} | {n} | {changed} | {steps} | {total:.2f} | {total - embedding:.2f} "
              f"| {ratio} | {peak:.0f} |")  # fmt: skip


if __name__ == "__main__":
    main()
