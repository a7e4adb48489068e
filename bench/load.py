"""Load test: concurrent clients asking one `abstract-qa serve` over loopback, with an ingest
running meanwhile. Prints throughput, latency, errors and citation checks as Markdown.

    .venv/bin/python bench/load.py --index DIR                # 8 clients, 60 s quiet first
    .venv/bin/python bench/load.py --index DIR --clients 20 --seconds 20 --new 500

DIR is an index (AQA_DATA_DIR) of the shared corpus. The clients ask alone for --seconds, then
an ingest over HTTP adds --new papers made from corpus records with new ids while they go on, and
repeats the upload to check that nothing is added twice. The latency of the questions asked
alone (after a 5 s warm-up) and of those asked while the first upload was being ingested are
reported apart, with the ratio of their 95th percentiles.
"""

from __future__ import annotations

import argparse
import json
import os
import random
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
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=60, help="the quiet phase")
    parser.add_argument("--new", type=int, default=500, help="papers the ingest adds")
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
        asked: list[tuple[float, float]] = []  # (started, seconds) of each answer
        errors: list[str] = []
        invalid = 0
        lock = threading.Lock()
        done = threading.Event()

        def client(n: int) -> None:
            nonlocal invalid
            mine = random.Random(n)
            with httpx.Client(base_url=url, timeout=120) as http:
                while not done.is_set():
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
                        asked.append((t, time.perf_counter() - t))
                        if response is not None and not ok:
                            errors.append(f"{response.status_code}: {response.text[:200]}")
                        invalid += ok and not valid

        ingested: dict[str, Any] = {}

        def ingest() -> None:
            time.sleep(args.seconds)  # the quiet phase first
            auth = {"Authorization": f"Bearer {TOKEN}"}
            files = {"files": ("load.jsonl", upload, "application/json")}
            with httpx.Client(base_url=url, timeout=600, headers=auth) as http:
                ingested["start"] = time.perf_counter()
                ingested["first"] = http.post("/ingest", files=files).json()
                ingested["end"] = time.perf_counter()
                ingested["again"] = http.post("/ingest", files=files).json()
            done.set()

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

    first, again = ingested.get("first", {}), ingested.get("again", {})
    window = ingested.get("start", wall), ingested.get("end", wall)
    quiet = sorted(s for t, s in asked if t - started > 5 and t + s < window[0])  # warm, alone
    during = sorted(s for t, s in asked if window[0] <= t <= window[1])

    def p(values: list[float], q: float) -> float:
        return 1000 * values[min(len(values) - 1, int(len(values) * q))] if values else 0.0

    rows = {
        "clients": args.clients,
        "seconds": round(wall, 1),
        "answers": len(asked),
        "answers/s": round(len(asked) / wall, 2),
        "p50 / p95 ms, no ingest": f"{p(quiet, 0.5):.0f} / {p(quiet, 0.95):.0f} "
        f"({len(quiet)} answers)",
        "p50 / p95 ms, during the ingest": f"{p(during, 0.5):.0f} / {p(during, 0.95):.0f} "
        f"({len(during)} answers)",
        "p95 during / without": f"{p(during, 0.95) / (p(quiet, 0.95) or 1):.2f}",
        "errors": len(errors),
        "answers with an invalid citation": invalid,
        "ingest during load": f"{first.get('added')} chunks added in "
        f"{window[1] - window[0]:.1f} s (timings {first.get('timings')})",
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
