"""Whether a change to answers lands: two runs' per-question results over every frozen blind set,
judged together (the rule in docs/benchmarks.md, "Judging a change").

A change lands when, with each question counted once:
- pooled fact coverage rises (over every fact question of the frozen sets);
- questions that gained outnumber those that lost, with a two-sided sign test over the changed
  questions at p < 0.10;
- no frozen set loses more than 2 questions net (1 on a set under 50 questions);
- no refusal count gets worse by more than 1 on any set (answerable questions refused, and
  questions the abstracts do not answer that were not refused).

A question's score is its fact coverage; for an answerable question without facts (a listing),
the share of its gold papers cited; for one the abstracts do not answer, 1 when refused. Sets
named ``dev-*`` (made mechanically) and ``natural-dev-*`` (tuned on) guard only: they are
reported, and a loss there is listed, but they do not decide.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from app.evaluation.harness import EvalReport, QuestionResult
from core.errors import InputError

SetRole = Literal["frozen", "guard"]
P_VALUE = 0.10
BOOTSTRAP = 2000


def role(name: str) -> SetRole:
    """Frozen blind sets decide; mechanical (``dev-*``), tuned-on (``natural-dev-*``) and the
    team's own (``sample-questions``) sets only guard."""
    if name.startswith(("dev-", "natural-dev-")) or name == "sample-questions":
        return "guard"
    return "frozen"


def question_score(r: QuestionResult) -> float:
    if not r.answerable:
        return 1.0 if r.abstained else 0.0
    if r.fact_coverage is not None:
        return r.fact_coverage
    return r.citation_recall or 0.0


class Interval(BaseModel):
    value: float
    low: float
    high: float


class SetVerdict(BaseModel):
    name: str
    role: SetRole
    questions: int
    fact_questions: int
    coverage_before: Interval | None
    coverage_after: Interval | None
    gained: list[str]
    lost: list[str]
    wrong_refusals: tuple[int, int] = Field(
        description="Answerable questions refused: before, after."
    )
    missed_refusals: tuple[int, int] = Field(
        description="Questions the abstracts do not answer that were answered: before, after."
    )
    problems: list[str]


class Judgement(BaseModel):
    sets: list[SetVerdict]
    fact_questions: int
    coverage_before: Interval
    coverage_after: Interval
    gained: int
    lost: int
    sign_test_p: float
    lands: bool
    reasons: list[str] = Field(description="Why it does not land; empty when it does.")


def load_runs(folder: Path) -> dict[str, EvalReport]:
    """A run: a folder of ``<set>/report.json`` (as ``abstract-qa eval --out <run>/<set>``
    writes them) or of ``<set>.json`` (its ``--json``)."""
    if not folder.is_dir():
        raise InputError(f"{folder}: not a folder of reports (write them with eval --out).")
    runs: dict[str, EvalReport] = {}
    for path in sorted([*folder.glob("*/report.json"), *folder.glob("*.json")]):
        name = path.parent.name if path.name == "report.json" else path.stem
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            runs[name] = EvalReport.model_validate(data[0] if isinstance(data, list) else data)
        except (ValueError, OSError) as err:
            raise InputError(f"{path}: not an eval report ({err}).") from err
    if not runs:
        raise InputError(f"{folder}: no report.json or <set>.json in it.")
    return runs


def sign_test(gains: int, losses: int) -> float:
    """Two-sided exact binomial sign test over the changed questions."""
    n = gains + losses
    if n == 0:
        return 1.0
    k = min(gains, losses)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


def interval(values: list[float], seed: int = 0) -> Interval:
    """The mean with a 90% percentile-bootstrap interval."""
    rng = random.Random(seed)
    n = len(values)
    means = sorted(sum(rng.choices(values, k=n)) / n for _ in range(BOOTSTRAP))
    return Interval(
        value=round(sum(values) / n, 4),
        low=round(means[int(0.05 * BOOTSTRAP)], 4),
        high=round(means[int(0.95 * BOOTSTRAP) - 1], 4),
    )


def judge_runs(before: dict[str, EvalReport], after: dict[str, EvalReport]) -> Judgement:
    missing = sorted(set(before) ^ set(after))
    if missing:
        raise InputError(f"Sets in one run only: {', '.join(missing)}; run both on every set.")
    verdicts = []
    pooled_before: list[float] = []
    pooled_after: list[float] = []
    gained = lost = 0
    reasons: list[str] = []
    for name in sorted(before):
        old = {r.id: r for r in before[name].results}
        new = {r.id: r for r in after[name].results}
        if set(old) != set(new):
            raise InputError(f"{name}: the two runs answered different questions.")
        ids = list(old)
        up = [i for i in ids if question_score(new[i]) > question_score(old[i])]
        down = [i for i in ids if question_score(new[i]) < question_score(old[i])]
        facts = [i for i in ids if old[i].fact_coverage is not None]
        cov_old = [old[i].fact_coverage or 0.0 for i in facts]
        cov_new = [new[i].fact_coverage or 0.0 for i in facts]
        refused = (
            sum(r.abstained for r in old.values() if r.answerable),
            sum(r.abstained for r in new.values() if r.answerable),
        )
        answered = (
            sum(not r.abstained for r in old.values() if not r.answerable),
            sum(not r.abstained for r in new.values() if not r.answerable),
        )
        kind = role(name)
        problems = []
        allowed = 1 if len(ids) < 50 else 2
        if len(down) - len(up) > allowed:
            problems.append(f"{name} loses {len(down) - len(up)} questions net (at most {allowed})")
        if refused[1] - refused[0] > 1:
            problems.append(f"{name}: answerable refused {refused[0]} -> {refused[1]}")
        if answered[1] - answered[0] > 1:
            problems.append(f"{name}: unanswered questions answered {answered[0]} -> {answered[1]}")
        verdicts.append(
            SetVerdict(
                name=name,
                role=kind,
                questions=len(ids),
                fact_questions=len(facts),
                coverage_before=interval(cov_old) if facts else None,
                coverage_after=interval(cov_new) if facts else None,
                gained=up,
                lost=down,
                wrong_refusals=refused,
                missed_refusals=answered,
                problems=problems,
            )
        )
        if kind == "frozen":
            pooled_before += cov_old
            pooled_after += cov_new
            gained += len(up)
            lost += len(down)
            reasons += problems
    if not pooled_before:
        raise InputError("No frozen set with fact questions among the runs.")
    p = sign_test(gained, lost)
    cov_before, cov_after = interval(pooled_before), interval(pooled_after)
    if cov_after.value <= cov_before.value:
        reasons.insert(0, f"pooled fact coverage {cov_before.value} -> {cov_after.value}")
    if gained <= lost or p >= P_VALUE:
        reasons.insert(0, f"{gained} gained, {lost} lost (sign test p = {p:.3f})")
    return Judgement(
        sets=verdicts,
        fact_questions=len(pooled_before),
        coverage_before=cov_before,
        coverage_after=cov_after,
        gained=gained,
        lost=lost,
        sign_test_p=round(p, 4),
        lands=not reasons,
        reasons=reasons,
    )


def markdown(j: Judgement) -> str:
    def cov(i: Interval | None) -> str:
        return "-" if i is None else f"{i.value:.3f} [{i.low:.3f}, {i.high:.3f}]"

    lines = [
        "| set | role | questions | fact coverage before | after | gained | lost "
        "| answerable refused | unanswered answered |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for s in j.sets:
        lines.append(
            f"| {s.name} | {s.role} | {s.questions} | {cov(s.coverage_before)} "
            f"| {cov(s.coverage_after)} | {len(s.gained)} | {len(s.lost)} "
            f"| {s.wrong_refusals[0]} -> {s.wrong_refusals[1]} "
            f"| {s.missed_refusals[0]} -> {s.missed_refusals[1]} |"
        )
    lines += [
        f"| **pooled frozen** | | {j.fact_questions} fact questions | {cov(j.coverage_before)} "
        f"| {cov(j.coverage_after)} | {j.gained} | {j.lost} | | |",
        "",
        f"Sign test over the {j.gained + j.lost} changed questions of the frozen sets: "
        f"p = {j.sign_test_p:.4f} (two-sided).",
        "",
        "**Lands.**" if j.lands else "**Does not land:** " + "; ".join(j.reasons) + ".",
    ]
    for s in j.sets:
        if s.role == "guard" and s.problems:
            lines.append(f"Guard set {s.name}: " + "; ".join(s.problems) + ".")
    return "\n".join(lines)
