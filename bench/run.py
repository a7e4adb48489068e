"""Scale benchmark: ingest, re-ingest, retrieval and ask() latency, memory and disk, by corpus size.

    make bench                                  # 1k, 5k and all papers of the shared corpus
    .venv/bin/python bench/run.py --sizes 1000,5000 --queries 200
    .venv/bin/python bench/run.py --index DIR       # query rows only, for an index built before

Each size gets a fresh index in --data-root. Ingest and queries run in child processes so that
their peak memory is measured separately. Prints one Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from corpus import CORPUS, read_records, sentence_questions

ROOT = Path(__file__).resolve().parent.parent
EXE = Path(sys.executable).parent / "abstract-qa"
QUERIES = Path(__file__).resolve().parent / "queries.py"

ENCODE_SCRIPT = r"""
# sentence-transformers alone on the chunk texts the ingest embeds: same model, window and batch
import json, sys, time
from core.settings import get_settings
from ingest.embed import LocalEmbeddings, get_embedder
from ingest.pipeline import chunking_of
from ingest.read import read_paths

settings = get_settings()
spec = get_embedder(settings).spec  # reads the model's config files; loads no weights
_, chunker = chunking_of(settings, spec)
texts = [c.embed_text for p in read_paths([sys.argv[1]]).papers for c in chunker(p)]
t = time.perf_counter()
from sentence_transformers import SentenceTransformer
model = SentenceTransformer(str(LocalEmbeddings(spec.name).path), device="cpu")
model.max_seq_length = LocalEmbeddings.WINDOW
model.encode(texts, batch_size=settings.embed_batch_size, normalize_embeddings=True)
print(json.dumps({"chunks": len(texts), "s": time.perf_counter() - t}))
"""


def run(cmd: list[str], env: dict[str, str]) -> tuple[str, float, float]:
    """stdout, seconds, peak RSS (MB) of this child alone (ru_maxrss is a running maximum, so
    each child runs in a fresh helper process)."""
    wrapper = (
        "import resource, subprocess, sys, time, json;"
        "t = time.perf_counter();"
        "p = subprocess.run(sys.argv[1:], capture_output=True, text=True);"
        "sys.stderr.write(p.stderr[-3000:]) if p.returncode else None;"
        "print(json.dumps({'out': p.stdout, 'rc': p.returncode, 's': time.perf_counter() - t,"
        "'rss': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", wrapper, *cmd], capture_output=True, text=True, env=env
    )
    info = json.loads(done.stdout)
    if info["rc"]:
        raise SystemExit(f"{cmd[:3]} failed:\n{done.stderr}")
    return info["out"], info["s"], info["rss"]


def du_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=str(CORPUS))
    parser.add_argument("--sizes", default="1000,5000,all")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--data-root", default="/tmp/aqa-bench")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--index",
        help="Only time queries, against this existing index of the corpus (AQA_DATA_DIR).",
    )
    args = parser.parse_args()

    records = read_records(args.corpus)
    rng = random.Random(args.seed)
    rng.shuffle(records)
    if args.index:
        queries_only(Path(args.index), records, rng, args.queries)
        return
    root = Path(args.data_root)
    rows = []
    for size in args.sizes.split(","):
        n = len(records) if size == "all" else int(size)
        subset = records[:n]
        work = root / f"n{n}"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        corpus = work / "corpus.jsonl"
        corpus.write_text("".join(json.dumps(r) + "\n" for r in subset))
        queries = write_queries(work / "queries.json", subset, rng, args.queries)
        env = {k: v for k, v in os.environ.items() if not k.startswith("AQA_")}
        env["AQA_DATA_DIR"] = str(work / "index")
        print(f"[{n} papers] sentence-transformers alone...", file=sys.stderr, flush=True)
        out, _, encode_rss = run([sys.executable, "-c", ENCODE_SCRIPT, str(corpus)], env)
        plain = json.loads(out)
        print(f"[{n} papers] first ingest...", file=sys.stderr, flush=True)
        out, first_s, ingest_rss = run([str(EXE), "ingest", str(corpus), "--json"], env)
        report = json.loads(out)
        assert report["chunks"] == plain["chunks"], (report["chunks"], plain["chunks"])
        print(f"[{n} papers] unchanged re-ingest...", file=sys.stderr, flush=True)
        out, again_s, _ = run([str(EXE), "ingest", str(corpus), "--json"], env)
        assert json.loads(out)["added"] == 0
        print(f"[{n} papers] queries...", file=sys.stderr, flush=True)
        out, _, query_rss = run([sys.executable, str(QUERIES), str(queries)], env)
        lat = json.loads(out)
        t = report["timings"]
        rows.append(
            {
                "papers": report["papers"],
                "chunks": report["chunks"],
                "ingest s": round(first_s, 1),
                "papers/s": round(report["papers"] / first_s, 1),
                "parse+chunk s": round(t["read"] + t["chunk"] + t["diff"], 1),
                "embed s": round(t["embed"], 1),
                "index s": round(t["index"] + t["bm25"], 1),
                "ingest / embed": round(first_s / max(t["embed"], 1e-9), 2),
                "sentence-transformers alone s": round(plain["s"], 1),
                "ingest / sentence-transformers": round(first_s / plain["s"], 2),
                "re-ingest s": round(again_s, 1),
                "speed-up": round(first_s / again_s, 1),
                **{f"{k} p50/p95 ms": f"{v[0]}/{v[1]}" for k, v in lat.items()},
                "ingest RSS MB": round(ingest_rss),
                "sentence-transformers RSS MB": round(encode_rss),
                "query RSS MB": round(query_rss),
                "disk MB": round(du_mb(work / "index")),
            }
        )
    keys = list(rows[0])
    print("| " + " | ".join(["measure"] + [f"{r['papers']} papers" for r in rows]) + " |")
    print("|---" * (len(rows) + 1) + "|")
    for key in keys[1:]:
        print(f"| {key} | " + " | ".join(str(r[key]) for r in rows) + " |")
    print(f"\n{time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores, {args.queries} title queries")


def write_queries(path: Path, records: list[dict[str, Any]], rng: random.Random, n: int) -> Path:
    """``n`` paper titles and ``n`` questions of one or two sentences, for bench/queries.py."""
    titles = [r["title"] for r in rng.sample(records, min(n, len(records)))]
    questions = sentence_questions(records, n, rng)
    path.write_text(json.dumps({"titles": titles, "questions": questions}))
    return path


def queries_only(index: Path, records: list[dict[str, Any]], rng: random.Random, n: int) -> None:
    """The query rows of the table for an index that is already built."""
    queries = write_queries(index.parent / f"{index.name}-queries.json", records, rng, n)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AQA_")}
    env["AQA_DATA_DIR"] = str(index)
    out, _, query_rss = run([sys.executable, str(QUERIES), str(queries)], env)
    print("| measure | value |\n|---|---|")
    for key, (p50, p95) in json.loads(out).items():
        print(f"| {key} p50/p95 ms | {p50}/{p95} |")
    print(f"| query RSS MB | {round(query_rss)} |")
    print(f"\n{time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores, {n} title queries, {index}")


if __name__ == "__main__":
    main()
