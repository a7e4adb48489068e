"""The rule that decides whether a change to answers lands (`abstract-qa judge`): every frozen
set judged together, a sign test over the changed questions, per-set losses, refusals."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from app.evaluation.harness import EvalReport, QuestionResult, Summary
from app.evaluation.judge import judge_runs, load_runs, role, sign_test
from core.errors import InputError


def result(qid: str, coverage: float | None, *, answerable: bool = True, abstained: bool = False):
    return QuestionResult(
        id=qid, question=qid, type="factual", answerable=answerable, answer="", abstained=abstained,
        retrieved=[], gold=[], recall_at_k=None, reciprocal_rank=None, cited=[],
        citation_precision=None, citation_recall=None, invalid_citations=0, facts_found=[],
        facts_missing=[], fact_coverage=coverage, correct_abstention=abstained != answerable,
        seconds=0.1,
    )  # fmt: skip


def report(results: list[QuestionResult]) -> EvalReport:
    summary = Summary(
        label="x", questions=len(results), answerable=0, unanswerable=0, k=5, recall_at_k=0,
        mrr=0, citation_precision=0, citation_recall=0, invalid_citations=0, fact_coverage=0,
        correct_refusals=0, wrong_refusals=0, abstention_accuracy=0, latency_p50=0,
        latency_p95=0, prompt_tokens=0, completion_tokens=0, cost_usd=None,
    )  # fmt: skip
    return EvalReport(summary=summary, results=results)


def run(scores: list[float], **extra: QuestionResult) -> EvalReport:
    return report([result(f"q{i}", s) for i, s in enumerate(scores)] + list(extra.values()))


def test_the_sign_test_is_the_exact_two_sided_binomial() -> None:
    assert sign_test(0, 0) == 1.0
    assert sign_test(5, 5) == 1.0
    assert sign_test(9, 1) == pytest.approx(0.021484375)  # 2 x 11/1024
    assert sign_test(1, 9) == sign_test(9, 1)
    assert sign_test(6, 1) == pytest.approx(0.125)


def test_a_gain_on_many_questions_lands_despite_one_loss_on_a_small_set() -> None:
    before = {"natural-big": run([0.0] * 100), "natural-small": run([1.0] * 30)}
    after = {"natural-big": run([1.0] * 12 + [0.0] * 88), "natural-small": run([0.0] + [1.0] * 29)}
    verdict = judge_runs(before, after)
    assert (verdict.gained, verdict.lost) == (12, 1)
    assert verdict.sign_test_p < 0.10
    assert verdict.coverage_after.value > verdict.coverage_before.value
    assert verdict.lands, verdict.reasons


def test_it_does_not_land_when_a_set_loses_too_much_or_gains_are_noise() -> None:
    before = {"natural-big": run([0.0] * 100), "natural-small": run([1.0] * 30)}
    after = {
        "natural-big": run([1.0] * 12 + [0.0] * 88),
        "natural-small": run([0.0] * 2 + [1.0] * 28),
    }
    verdict = judge_runs(before, after)
    assert not verdict.lands
    assert any("natural-small loses 2" in r for r in verdict.reasons)
    noise = judge_runs({"natural-a": run([0.0] * 60)}, {"natural-a": run([1.0] * 3 + [0.0] * 57)})
    assert not noise.lands  # 3 of 3, p = 0.25
    assert "sign test" in noise.reasons[0]


def test_refusals_may_not_get_worse_by_more_than_one() -> None:
    refused = [result(f"r{i}", 0.0, abstained=True) for i in range(2)]
    answered = [result(f"r{i}", 0.0) for i in range(2)]
    gains_before = [result(f"q{i}", 0.0) for i in range(40)]
    gains_after = [result(f"q{i}", 1.0) for i in range(40)]
    verdict = judge_runs(
        {"natural-x": report(gains_before + answered)},
        {"natural-x": report(gains_after + refused)},
    )
    assert not verdict.lands
    assert any("answerable refused 0 -> 2" in r for r in verdict.reasons)


def test_guard_sets_are_reported_but_do_not_decide() -> None:
    assert role("dev-sample") == role("natural-dev-22k") == role("sample-questions") == "guard"
    assert role("natural-fresh-22k") == "frozen"
    before = {"natural-a": run([0.0] * 60), "dev-sample": run([1.0] * 60)}
    after = {"natural-a": run([1.0] * 10 + [0.0] * 50), "dev-sample": run([0.0] * 5 + [1.0] * 55)}
    verdict = judge_runs(before, after)
    assert verdict.lands
    assert (verdict.gained, verdict.lost) == (10, 0)


def test_the_command_reads_eval_folders_and_exits_one_when_it_does_not_land(
    tmp_path: Path,
) -> None:
    for name, scores in (("before", [0.0] * 60), ("after", [1.0] * 10 + [0.0] * 50)):
        folder = tmp_path / name / "natural-a"
        folder.mkdir(parents=True)
        (folder / "report.json").write_text(run(scores).model_dump_json())
    assert load_runs(tmp_path / "before")["natural-a"].results[0].id == "q0"
    code = "from app.fronts.cli import main; main()"
    before, after = str(tmp_path / "before"), str(tmp_path / "after")
    ok = subprocess.run(
        [sys.executable, "-c", code, "judge", before, after, "--json"],
        capture_output=True,
        text=True,
    )
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["lands"] is True
    back = subprocess.run(
        [sys.executable, "-c", code, "judge", after, before], capture_output=True, text=True
    )
    assert back.returncode == 1 and "Does not land" in back.stdout
    with pytest.raises(InputError, match=r"no report\.json"):
        load_runs(tmp_path)
