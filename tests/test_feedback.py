"""Users' ratings: stored durably in SQLite (two processes at once lose nothing), counted by
week, and turned into a question file that `abstract-qa eval` runs."""

from __future__ import annotations

import json
import multiprocessing
import shutil
import sqlite3
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from app.engine.feedback import as_questions, question_file, stats
from app.engine.service import QAService
from app.evaluation.harness import load_questions, run_eval
from core.errors import InputError, PaperNotFoundError, StoreError
from core.models import Feedback, FeedbackRecord, Filters
from core.settings import Settings
from store.feedback import FILENAME, FeedbackStore
from tests.conftest import EXE, paper_id_containing

DASHA = "We develop and analyze DASHA"


def rating(n: int, value: str = "up") -> Feedback:
    return Feedback(rating=value, question=f"question {n}?", answer=f"answer {n} [1]", cited=["p"])  # type: ignore[arg-type]


def test_a_rating_is_stored_changed_commented_and_taken_back(tmp_path: Path) -> None:
    store = FeedbackStore(tmp_path / "data")
    assert store.all() == []  # nothing rated: no file needed
    first = store.add(rating(1, "down"), "gen-a")
    second = store.add(
        Feedback(
            rating="up",
            comment="  spot on  ",
            question="And in 2024?",
            standalone_question="Which 2024 papers study federated learning?",
            answer="FedX [1].",
            cited=["a", "b"],
            filters=Filters(year_from=2024, year_to=2024),
            provider="extractive",
        ),
        "gen-b",
    )
    assert (first.id, second.id) == (1, 2) and second.comment == "spot on"
    changed = store.change(first.id, rating="up", comment="on second thought, right")
    assert changed.rating == "up" and changed.updated > changed.created
    # a new connection, as after a restart, reads what was written
    again = FeedbackStore(tmp_path / "data").all()
    assert again == [changed, second]
    assert again[1].filters.year_from == 2024 and again[1].index == "gen-b"
    store.change(second.id, comment="")
    assert store.all()[1].comment is None
    store.remove(first.id)
    assert [r.id for r in store.all()] == [second.id]
    with pytest.raises(InputError, match="No rating #7"):
        store.change(7, rating="down")


def _write_many(data_dir: str, worker: int, count: int) -> None:
    store = FeedbackStore(Path(data_dir))
    for n in range(count):
        store.add(rating(worker * 1000 + n, "up" if n % 2 else "down"), f"worker-{worker}")


def test_two_processes_rating_at_once_lose_nothing(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")  # two interpreters, as the app and the server
    workers = [ctx.Process(target=_write_many, args=(str(tmp_path), w, 150)) for w in (1, 2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=300)
        assert w.exitcode == 0
    records = FeedbackStore(tmp_path).all()
    assert len(records) == 300 and len({r.id for r in records}) == 300
    by_worker = {w: sorted(r.question for r in records if r.index == f"worker-{w}") for w in (1, 2)}
    assert by_worker == {w: sorted(f"question {w * 1000 + n}?" for n in range(150)) for w in (1, 2)}


def test_a_file_that_is_not_a_database_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / FILENAME).write_text("not sqlite at all " * 100)
    with pytest.raises(StoreError, match=FILENAME):
        FeedbackStore(tmp_path).add(rating(1), "gen")


def test_a_newer_schema_is_refused_not_overwritten(tmp_path: Path) -> None:
    FeedbackStore(tmp_path).add(rating(1), "gen")
    with sqlite3.connect(tmp_path / FILENAME) as db:
        db.execute("PRAGMA user_version = 99")
    with pytest.raises(StoreError, match="newer abstract-qa"):
        FeedbackStore(tmp_path).add(rating(2), "gen")


def test_counts_by_rating_and_week() -> None:
    monday = datetime(2026, 11, 23, 9, tzinfo=UTC)

    def at(n: int, when: datetime, value: str, comment: str | None = None) -> FeedbackRecord:
        return FeedbackRecord(
            **rating(n, value).model_dump(exclude={"comment"}),
            comment=comment,
            id=n,
            created=when,
            updated=when,
            index="g",
        )

    records = [
        at(1, monday, "up"),
        at(2, monday + timedelta(days=6), "down", "wrong paper"),  # Sunday: the same ISO week
        at(3, monday + timedelta(days=7), "down"),
    ]
    counted = stats(records)
    assert (counted.total, counted.up, counted.down, counted.commented) == (3, 1, 2, 1)
    assert [(w.week, w.up, w.down) for w in counted.weeks] == [
        ("2026-W48", 1, 1),
        ("2026-W49", 0, 1),
    ]


@pytest.fixture
def rated(sample_settings: Settings, tmp_path: Path) -> QAService:
    """The sample index (a copy: ratings are written beside it) with three real answers rated:
    a thumbs-up, a thumbs-up on "the abstracts do not say", and a thumbs-down."""
    data = tmp_path / "index"
    shutil.copytree(sample_settings.data_dir, data, ignore=shutil.ignore_patterns(FILENAME + "*"))
    service = QAService(sample_settings.model_copy(update={"data_dir": data}))
    good = service.ask("What is DASHA?")
    assert not good.abstained
    service.rate(Feedback.of(good, "up"))
    nothing = service.ask("What do honeybees eat?")
    assert nothing.abstained
    service.rate(Feedback.of(nothing, "up", "right: no abstract is about bees"))
    wrong = service.ask("Which papers study federated learning?", filters=Filters(year_from=2024))
    service.rate(Feedback.of(wrong, "down", "misses the asynchronous one"))
    return service


def test_ratings_become_a_question_file_that_eval_runs(rated: QAService, tmp_path: Path) -> None:
    records = rated.feedback.all()
    assert [r.rating for r in records] == ["up", "up", "down"]
    assert records[0].cited[0] == paper_id_containing(DASHA)
    assert records[0].index == rated.retriever.open().bm25.generation
    path = tmp_path / "feedback.jsonl"
    path.write_text(question_file(as_questions(records)))
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines[0]["gold"] == records[0].cited and lines[0]["review"] is False
    assert lines[1]["answerable"] is False and lines[1]["gold"] == []
    assert lines[2]["review"] is True and lines[2]["origin"]["comment"] == (
        "misses the asynchronous one"
    )
    assert lines[2]["filters"]["year_from"] == 2024  # asked again as it was asked

    questions = load_questions(path, rated.retriever.index.paper_ids())
    report = run_eval(questions, rated)
    assert report.summary.questions == 2  # the thumbs-down is answered, not scored
    assert report.summary.recall_at_k == 1.0 and report.summary.correct_refusals == 1.0
    (review,) = report.review
    assert review.id == f"feedback-{records[2].id}"
    assert review.comment == "misses the asynchronous one"
    assert review.answer_then == records[2].answer and review.answer_now

    only_up = question_file(as_questions(records, "up"))
    assert only_up.count("\n") == 2


def test_the_cli_exports_the_ratings_and_counts_them(rated: QAService, tmp_path: Path) -> None:
    env = {"AQA_DATA_DIR": str(rated.settings.data_dir)}
    path = tmp_path / "from-users.jsonl"
    exported = _run("feedback", "export", str(path), **env)
    assert exported.returncode == 0, exported.stderr
    assert "3 question(s)" in exported.stdout and "1 to review" in exported.stdout
    evaluated = _run("eval", str(path), "--json", **env)
    assert evaluated.returncode == 0, evaluated.stderr
    report = json.loads(evaluated.stdout)
    assert report["summary"]["questions"] == 2 and len(report["review"]) == 1
    human = _run("eval", str(path), **env)
    assert "## To review (1: rated thumbs-down, not scored)" in human.stdout
    assert "misses the asynchronous one" in human.stdout

    counted = json.loads(_run("feedback", "stats", "--json", **env).stdout)
    assert (counted["total"], counted["up"], counted["down"], counted["commented"]) == (3, 2, 1, 2)
    weeks: dict[str, dict[str, int]] = {}  # the weeks the ratings were stored in (UTC)
    for r in rated.feedback.all():
        week = "{}-W{:02d}".format(*r.created.astimezone(UTC).isocalendar()[:2])
        weeks.setdefault(week, {"up": 0, "down": 0})[r.rating] += 1
    assert counted["weeks"] == [{"week": w, **n} for w, n in sorted(weeks.items())]
    assert "3 rating(s): 2 up, 1 down" in _run("feedback", "stats", **env).stdout

    only_down = tmp_path / "down.jsonl"
    assert _run("feedback", "export", str(only_down), "--rating", "down", **env).returncode == 0
    nothing_scored = _run("eval", str(only_down), **env)
    assert "No question was scored" in nothing_scored.stdout
    assert "| recall@k | - |" in nothing_scored.stdout  # not 0.000
    wrong = _run("feedback", "export", str(only_down), "--rating", "meh", **env)
    assert wrong.returncode == 2 and "'meh' is not one of 'up', 'down'" in wrong.stderr
    nowhere = _run("feedback", "export", str(tmp_path / "no" / "such" / "dir.jsonl"), **env)
    assert nowhere.returncode == 2 and "Cannot write" in nowhere.stderr

    empty = tmp_path / "empty"
    refused = _run("feedback", "export", str(tmp_path / "x.jsonl"), AQA_DATA_DIR=str(empty))
    assert refused.returncode == 2 and "No ratings yet" in refused.stderr


def _run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    import os

    clean = {k: v for k, v in os.environ.items() if not k.startswith(("AQA_", "OPENAI_"))}
    return subprocess.run(
        [str(EXE), *args], capture_output=True, text=True, env=clean | env, timeout=600
    )


def test_python_rates_an_answer_from_ask(
    sample_settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import app

    data = tmp_path / "index"
    shutil.copytree(sample_settings.data_dir, data, ignore=shutil.ignore_patterns(FILENAME + "*"))
    monkeypatch.setenv("AQA_DATA_DIR", str(data))
    app._service.cache_clear()
    try:
        answer = app.ask("What is DASHA?")
        record = app.rate(answer, "up", "exactly what I needed")
    finally:
        app._service.cache_clear()
    assert FeedbackStore(data).all() == [record]
    assert record.cited == [s.paper_id for s in answer.cited_sources] and record.rating == "up"


def test_a_rating_without_gold_the_index_holds_is_kept_for_review(rated: QAService) -> None:
    """A thumbs-up that cites nothing (a model that answered without markers), or papers a
    later ingest removed, cannot be a regression question: it goes to review, and the file
    still loads. A rating citing a paper the index never held is refused."""
    with pytest.raises(PaperNotFoundError, match="no-such-paper"):
        rated.rate(Feedback(rating="up", question="What is DASHA?", cited=["no-such-paper"]))
    rated.rate(Feedback(rating="up", question="What is MARINA?", answer="MARINA is fast."))
    records = rated.feedback.all()
    known = rated.retriever.index.paper_ids()
    questions = as_questions(records, known=known)
    uncited = questions[-1]
    assert uncited.review and uncited.gold == [] and uncited.origin is not None
    assert [q.review for q in questions[:3]] == [False, False, True]
    dasha = records[0].cited[0]
    gone = as_questions(records[:1], known=known - {dasha})
    assert gone[0].review and gone[0].gold == []
