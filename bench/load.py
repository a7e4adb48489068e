"""Load test: concurrent clients asking one `abstract-qa serve` over loopback, with an ingest
running meanwhile. Prints throughput, latency, errors and citation checks as Markdown.

    .venv/bin/python bench/load.py --index DIR                # 20 clients for 60 s
    .venv/bin/python bench/load.py --index DIR --clients 5 --seconds 20

DIR is an index (AQA_DATA_DIR) of the shared corpus. The ingest adds --new papers made from
corpus records with new ids, then repeats the upload to check that nothing is added twice.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from corpus import CORPUS, read_records

ROOT = Path(__file__).resolve().parent.parent
EXE = Path(sys.executable).parent / "abstract-qa"
TOKEN = "load-test-token"


def citations_valid(answer: dict[str, Any]) -> bool:
    """Every citation names a source the answer returned, by marker and paper id."""
    sources = {s["marker"]: s["paper_id"] for s in answer["sources"]}
    return all(sources.get(c["marker"]) == c["paper_id"] for c in answer["citations"])


def start(index: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AQA_", "OPENAI_"))}
    env |= {"AQA_DATA_DIR": str(index), "AQA_API_TOKEN": TOKEN, "HF_HUB_OFFLINE": "1"}
    with log.open("w") as fh:
        proc = subprocess.Popen(
            [str(EXE), "serve", "--port", str(port)], stdout=fh, stderr=subprocess.STDOUT, env=env
        )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.5)
    proc.terminate()
    raise SystemExit(f"the server did not start:\n{log.read_text()[-2000:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--index", required=True)
    parser.add_argument("--corpus", default=str(CORPUS))
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--new", type=int, default=40, help="papers the ingest adds meanwhile")
    parser.add_argument("--port", type=int, default=8731)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    records = read_records(args.corpus)
    rng = random.Random(args.seed)
    questions = [r["title"] for r in rng.sample(records, 500)]
    fresh = [
        {**r, "id": f"load-{i}", "abstract": r["abstract"] + " (load test copy)"}
        for i, r in enumerate(rng.sample(records, args.new))
    ]
    upload = "".join(json.dumps(r) + "\n" for r in fresh).encode()

    url = f"http://127.0.0.1:{args.port}"
    proc = start(Path(args.index), args.port, Path("/tmp/aqa-load-serve.log"))
    try:
        before = httpx.get(f"{url}/stats", timeout=60).json()["chunks"]
        latencies: list[float] = []
        errors: list[str] = []
        invalid = 0
        lock = threading.Lock()
        stop = time.monotonic() + args.seconds

        def client(n: int) -> None:
            nonlocal invalid
            mine = random.Random(n)
            with httpx.Client(base_url=url, timeout=120) as http:
                while time.monotonic() < stop:
                    t = time.perf_counter()
                    try:
                        response = http.post("/ask", json={"question": mine.choice(questions)})
                        ok = response.status_code == 200
                        valid = ok and citations_valid(response.json())
                    except httpx.HTTPError as exc:
                        ok, valid, response = False, False, None
                        with lock:
                            errors.append(repr(exc))
                    with lock:
                        latencies.append(time.perf_counter() - t)
                        if response is not None and not ok:
                            errors.append(f"{response.status_code}: {response.text[:200]}")
                        invalid += ok and not valid

        ingested: dict[str, Any] = {}

        def ingest() -> None:
            time.sleep(args.seconds / 4)
            auth = {"Authorization": f"Bearer {TOKEN}"}
            files = {"files": ("load.jsonl", upload, "application/json")}
            with httpx.Client(base_url=url, timeout=600, headers=auth) as http:
                t = time.perf_counter()
                ingested["first"] = http.post("/ingest", files=files).json()
                ingested["seconds"] = time.perf_counter() - t
                ingested["again"] = http.post("/ingest", files=files).json()

        threads = [threading.Thread(target=client, args=(n,)) for n in range(args.clients)]
        threads.append(threading.Thread(target=ingest))
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.perf_counter() - started
        after = httpx.get(f"{url}/stats", timeout=60).json()["chunks"]
    finally:
        proc.terminate()
        proc.wait(timeout=30)

    latencies.sort()
    first, again = ingested.get("first", {}), ingested.get("again", {})
    rows = {
        "clients": args.clients,
        "seconds": round(wall, 1),
        "answers": len(latencies),
        "answers/s": round(len(latencies) / wall, 2),
        "p50 / p95 ms": f"{1000 * latencies[len(latencies) // 2]:.0f} / "
        f"{1000 * latencies[int(len(latencies) * 0.95)]:.0f}",
        "mean ms": round(1000 * statistics.fmean(latencies)),
        "errors": len(errors),
        "answers with an invalid citation": invalid,
        "ingest during load": f"{first.get('added')} chunks added in "
        f"{ingested.get('seconds', 0):.1f} s",
        "same upload again": f"{again.get('added')} added, {again.get('unchanged')} unchanged",
        "chunks before → after": f"{before} → {after} (expected +{first.get('added')})",
    }
    print("| measure | value |\n|---|---|")
    for key, value in rows.items():
        print(f"| {key} | {value} |")
    for line in errors[:5]:
        print(f"- error: {line}")
    print(f"\n{time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores, index {args.index}")


if __name__ == "__main__":
    main()
