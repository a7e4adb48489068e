"""Scale simulation: the shared corpus at 1x, 5x and 10x (about 220k papers), no embedding needed.

    .venv/bin/python bench/scale.py --index /tmp/aqa-bench/n21958/index
    .venv/bin/python bench/scale.py --index DIR --factors 1,5,10 --server   # also via `chroma run`

--index is an index (AQA_DATA_DIR) of the whole shared corpus, as `make bench` leaves it. It is
copied to --work, then grown: copy c of every paper gets the id ``<id>~c``, a title and abstract
with a few words dropped or swapped, and, for each of its chunks, the vector of the original's
chunk plus Gaussian noise (cosine about 0.98 to it). The copies are chunked by the real chunker
and written through the store's own write session, so the index is what an ingest of the same
papers would make, less the embedding. At each size it reports the write, BM25 build and load
times, query latency and memory (bench/queries.py in a child process), disk, an unchanged
re-ingest of the whole corpus file and, with --server, the same served by `chroma run`.
Prints one Markdown table.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from corpus import CORPUS, read_records
from run import EXE, QUERIES, du_mb, run, write_queries

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from core.models import Paper, chunk_id  # noqa: E402
from core.settings import Settings  # noqa: E402
from ingest.embed import get_embedder  # noqa: E402
from ingest.pipeline import ROUND, Plan, chunking_of, plan  # noqa: E402
from ingest.read import read_paths  # noqa: E402
from store.index import Index  # noqa: E402

CHROMA = Path(sys.executable).parent / "chroma"
NOISE = 0.2  # per-vector norm of the noise added to a copy's chunk vectors
ROWS = ["dense", "bm25", "hybrid", "hybrid+filter", "hybrid+year", "hybrid+venue",
        "hybrid+decision", "hybrid+author", "ask"]  # fmt: skip
SERVER_ROWS = ["hybrid", "hybrid+filter", "hybrid+author", "ask"]


def perturb(text: str, rng: random.Random, rate: float) -> str:
    """``text`` with about ``rate`` of its words dropped and as many swapped with the next."""
    words = text.split(" ")
    out: list[str] = []
    i = 0
    while i < len(words):
        roll = rng.random()
        if roll < rate and len(words) > 8:
            i += 1
        elif roll < 2 * rate and i + 1 < len(words):
            out += [words[i + 1], words[i]]
            i += 2
        else:
            out.append(words[i])
            i += 1
    return " ".join(out)


def copy_of(record: dict[str, Any], copy: int, rng: random.Random) -> dict[str, Any]:
    return {
        **record,
        "id": f"{record['id']}~{copy}",
        "title": perturb(str(record["title"]), rng, 0.05),
        "abstract": perturb(str(record["abstract"]), rng, 0.03),
    }


def _plan(papers: list[Paper]) -> Plan:
    settings = Settings()
    chunking, chunker = chunking_of(settings, get_embedder(settings).spec)
    return plan(papers, {}, chunking, chunker)


def grow(index: Index, records: list[dict[str, Any]], vectors: dict[str, np.ndarray],
         corpus: Path, rng: random.Random) -> float:  # fmt: skip
    """Write perturbed ``records`` (copies) and append them to ``corpus``; the write's seconds."""
    part = corpus.parent / "part.jsonl"
    part.write_text("".join(json.dumps(r) + "\n" for r in records))
    papers = read_paths([part]).papers
    # spawned, not forked: this process holds a Chroma client and its threads
    with multiprocessing.get_context("spawn").Pool(os.cpu_count() or 2) as pool:
        plans = pool.map(_plan, [papers[i::8] for i in range(8)])
    with corpus.open("a") as fh:
        fh.write(part.read_text())
    part.unlink()
    todo = [pair for p in plans for pair in p.embed]
    noise = np.random.default_rng(rng.randrange(2**32))
    chunks = index.chunks(get_embedder(index.settings).spec)
    assert chunks is not None
    t = time.perf_counter()
    with index.write(chunks) as session:
        for start in range(0, len(todo), ROUND * 8):
            batch = [record for record, _ in todo[start : start + ROUND * 8]]
            base = np.stack([vectors[original(r.paper_id, r.index, vectors)] for r in batch])
            moved = base + noise.normal(0, NOISE / np.sqrt(base.shape[1]), base.shape)
            moved /= np.linalg.norm(moved, axis=1, keepdims=True)
            session.upsert(batch, moved.astype(np.float32).tolist())
    return time.perf_counter() - t


def original(paper_id: str, index: int, vectors: dict[str, np.ndarray]) -> str:
    """The original chunk a copy's chunk takes its vector from (its last when it has fewer)."""
    base = paper_id.rsplit("~", 1)[0]
    while index > 0 and chunk_id(base, index) not in vectors:
        index -= 1
    return chunk_id(base, index)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def measure(env: dict[str, str], queries: Path, corpus: Path, rows: list[str]) -> dict[str, Any]:
    """BM25 build from the store and load, query latency and memory, unchanged re-ingest."""
    timing = (
        "import json, time; from core.settings import get_settings; from store.index import Index;"
        "i = Index(get_settings()); c = i.chunks(); t = time.perf_counter(); i.rebuild(c);"
        "built = time.perf_counter() - t; t = time.perf_counter(); i.saved_bm25();"
        "print(json.dumps({'build': built, 'load': time.perf_counter() - t}))"
    )
    out, _, _ = run([sys.executable, "-c", timing], env)
    bm25 = json.loads(out)
    spec = queries.with_name(f"rows-{len(rows)}.json")
    spec.write_text(json.dumps({**json.loads(queries.read_text()), "rows": rows}))
    out, _, rss = run([sys.executable, str(QUERIES), str(spec)], env)
    latency = json.loads(out)
    out, again_s, _ = run([str(EXE), "ingest", str(corpus), "--json"], env)
    report = json.loads(out)
    assert report["added"] == report["updated"] == report["removed"] == 0, report
    return {
        "BM25 build s": round(bm25["build"], 1),
        "BM25 load s": round(bm25["load"], 2),
        **{f"{k} p50/p95 ms": f"{v[0]}/{v[1]}" for k, v in latency.items()},
        "query RSS MB": round(rss),
        "unchanged re-ingest s": round(again_s, 1),
    }


def served(path: Path, env: dict[str, str], queries: Path, corpus: Path) -> dict[str, Any]:
    """`measure` again, with the index served by `chroma run` (BM25 kept beside it locally)."""
    port = free_port()
    log = (path.parent / "chroma-run.log").open("w")
    server = subprocess.Popen(
        [str(CHROMA), "run", "--path", str(path), "--host", "127.0.0.1", "--port", str(port)],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/api/v2/heartbeat", timeout=2)
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise SystemExit("chroma run did not start") from None
                time.sleep(0.5)
        remote = {**env, "AQA_CHROMA_HOST": "127.0.0.1", "AQA_CHROMA_PORT": str(port)}
        figures = measure(remote, queries, corpus, SERVER_ROWS)
        status = Path(f"/proc/{server.pid}/status").read_text().split("\n")
        hwm = next(line for line in status if line.startswith("VmHWM"))
        figures["server RSS MB"] = round(int(hwm.split()[1]) / 1024)
        return {f"{key} (server)": value for key, value in figures.items()}
    finally:
        server.terminate()
        server.wait(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--index", required=True, help="an index of the whole shared corpus")
    parser.add_argument("--corpus", default=str(CORPUS))
    parser.add_argument("--factors", default="1,5,10")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--work", default="/tmp/aqa-scale")
    parser.add_argument("--server", action="store_true", help="also measure through chroma run")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--grow-only",
        action="store_true",
        help="only grow the index in --work (for incremental.py)",
    )
    args = parser.parse_args()

    rng = random.Random(args.seed)
    records = read_records(args.corpus)
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    data = work / "index"
    print("copying the index...", file=sys.stderr, flush=True)
    shutil.copytree(args.index, data)
    corpus = work / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in records))
    queries = write_queries(work / "queries.json", records, rng, args.queries)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AQA_")}
    env["AQA_DATA_DIR"] = str(data)
    os.environ["AQA_DATA_DIR"] = str(data)
    print("bringing the copy up to date with this code's chunking...", file=sys.stderr, flush=True)
    run([str(EXE), "ingest", str(corpus)], env)  # a no-op unless --index is older
    index = Index(Settings())
    saved = index.saved_bm25()
    assert saved is not None and len(saved.chunk_ids) > 0, "the index has no BM25 side"
    vectors = dict(zip(saved.chunk_ids, saved.vectors, strict=True))
    assert {str(p) for p in saved.facets["paper_id"]} == {str(r["id"]) for r in records}, (
        "--index must hold exactly the papers of --corpus"
    )

    rows: list[dict[str, Any]] = []
    copies = 1
    for factor in (int(f) for f in args.factors.split(",")):
        write_s = 0.0
        while copies < factor:
            print(f"adding copy {copies}...", file=sys.stderr, flush=True)
            batch = [copy_of(r, copies, rng) for r in records]
            write_s += grow(index, batch, vectors, corpus, rng)
            copies += 1
        if args.grow_only:
            print(f"[{factor}x] grown in {write_s:.0f} s: {data}", file=sys.stderr, flush=True)
            continue
        print(f"[{factor}x] measuring...", file=sys.stderr, flush=True)
        stats = index.stats()
        row: dict[str, Any] = {
            "papers": stats.papers,
            "chunks": stats.chunks,
            "write s (new copies)": round(write_s, 1) if write_s else "-",
            **measure(env, queries, corpus, ROWS),
            "disk MB": round(du_mb(data)),
        }
        if args.server:
            print(f"[{factor}x] through chroma run...", file=sys.stderr, flush=True)
            row |= served(data / "chroma", env, queries, corpus)
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
    if not rows:
        return
    keys = list(rows[0])
    print("| measure | " + " | ".join(f"{r['papers']} papers" for r in rows) + " |")
    print("|---" * (len(rows) + 1) + "|")
    for key in keys[1:]:
        print(f"| {key} | " + " | ".join(str(r.get(key, "")) for r in rows) + " |")
    print(f"\n{time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores, {args.queries} queries a row")


if __name__ == "__main__":
    main()
