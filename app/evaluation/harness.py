"""The evaluation harness: run a question set through the same `ask()` path users get, and
measure retrieval, citations, answers, abstention, latency and cost.

Question files are JSON Lines, one record a line (see data/eval/README.md):
    {"id": "q1", "question": "...", "gold": ["paper_id", ...], "facts": [["20.9%"], ["39.3%"]],
     "answerable": true, "type": "numeric", "follows": "q0"}
"""

from __future__ import annotations

import json
import re
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from app.engine.service import QAService
from app.providers.base import ChatProvider
from app.providers.prompts import load_prompt
from app.providers.wording import format_sources
from core.errors import InputError
from core.models import MODES, Answer, EvalQuestion, Mode
from core.settings import Settings
from core.text import plain_text
from store.index import Index

# USD per million tokens (input, output), for the cost line; unknown models report tokens only.
PRICES = {"gpt-4o-mini": (0.15, 0.60), "gpt-4o": (2.50, 10.00), "gpt-4.1-mini": (0.40, 1.60)}


class QuestionResult(BaseModel):
    id: str
    question: str
    type: str
    answerable: bool
    answer: str
    abstained: bool
    retrieved: list[str]
    gold: list[str]
    recall_at_k: float | None
    reciprocal_rank: float | None
    cited: list[str]
    citation_precision: float | None
    citation_recall: float | None
    invalid_citations: int
    facts_found: list[str]
    facts_missing: list[str]
    fact_coverage: float | None
    correct_abstention: bool
    seconds: float
    prompt_tokens: int = 0
    completion_tokens: int = 0
    judge: dict[str, int] | None = None
    judge_reply: str | None = Field(
        default=None, description="What the judge model said, parsed or not (with --judge)."
    )

    @property
    def failed(self) -> list[str]:
        why = []
        if not self.correct_abstention:
            why.append("refused" if self.abstained else "answered an unanswerable question")
        if self.recall_at_k is not None and self.recall_at_k < 1:
            why.append(f"recall@k {self.recall_at_k:.2f}")
        if self.citation_precision is not None and self.citation_precision < 1:
            why.append(f"cited non-gold ({self.citation_precision:.2f})")
        if self.facts_missing and not self.abstained:
            why.append("missing " + ", ".join(self.facts_missing))
        if self.invalid_citations:
            why.append(f"{self.invalid_citations} invalid citation(s)")
        return why


class TypeSummary(BaseModel):
    """The figures of one question type (`type` in the question file)."""

    questions: int
    answerable: bool
    recall_at_k: float | None = None
    fact_coverage: float | None = None
    refused: float = Field(description="Share of the type's questions refused.")


class Summary(BaseModel):
    label: str
    questions: int
    answerable: int
    unanswerable: int
    k: int
    recall_at_k: float
    mrr: float
    citation_precision: float
    citation_recall: float
    invalid_citations: int
    fact_coverage: float
    multi_paper_recall: float | None = Field(
        default=None, description="Gold papers among the sources, for questions with 2+ gold."
    )
    correct_refusals: float = Field(description="Unanswerable questions refused (share).")
    wrong_refusals: float = Field(description="Answerable questions refused (share).")
    abstention_accuracy: float
    latency_p50: float
    latency_p95: float
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None
    judge_correctness: float | None = None
    judge_faithfulness: float | None = None
    by_type: dict[str, TypeSummary] = Field(default_factory=dict)


class ReviewItem(BaseModel):
    """A question kept for review (a user's thumbs-down): what was rated, and what it answers
    now. Not scored until someone writes its gold papers."""

    id: str
    question: str
    comment: str | None
    answer_then: str
    cited_then: list[str]
    answer_now: str
    cited_now: list[str]
    abstained_now: bool


class EvalReport(BaseModel):
    summary: Summary
    results: list[QuestionResult]
    review: list[ReviewItem] = Field(
        default_factory=list, description="Questions to review, answered again, not scored."
    )


def load_questions(
    path: Path, known_ids: set[str] | None = None, model: type[EvalQuestion] = EvalQuestion
) -> list[EvalQuestion]:
    """Parse and check a question file (of ``model``'s lines); every problem is reported as
    file:line."""
    problems: list[str] = []
    questions: list[EvalQuestion] = []
    try:
        lines = path.read_text(encoding="utf-8").split("\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read the question file ({exc})") from exc
    seen: dict[str, int] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            q = model.model_validate_json(line)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"]) or "record"
            problems.append(f"{path}:{number}: {where}: {err['msg']}")
            continue
        if q.id in seen:
            problems.append(f"{path}:{number}: id {q.id!r} already used on line {seen[q.id]}")
        seen[q.id] = number
        if known_ids is not None:
            problems += [
                f"{path}:{number}: gold id {g!r} is not in the index"
                for g in q.gold
                if g not in known_ids
            ]
        if q.answerable and not q.gold and not q.review:
            problems.append(f"{path}:{number}: an answerable question needs gold paper ids")
        questions.append(q)
    for q in questions:
        if q.follows is not None and q.follows not in seen:
            problems.append(f"{path}:{seen[q.id]}: follows unknown question {q.follows!r}")
    if problems:
        raise InputError("The question file has problems:\n" + "\n".join(problems))
    if not questions:
        raise InputError(f"{path}: no questions")
    return questions


def normalise(text: str) -> str:
    """Case, LaTeX escapes (\\%), and spacing do not decide whether a fact is present."""
    text = plain_text(text).casefold()
    text = re.sub(r"(\d)\s+%", r"\1%", text)
    return " ".join(text.replace("\u2009", " ").split())


def _fact_present(answer: str, variants: list[str]) -> bool:
    body = normalise(answer)
    return any(normalise(v) in body for v in variants)


def score(q: EvalQuestion, answer: Answer, seconds: float, k: int) -> QuestionResult:
    retrieved = [s.paper_id for s in answer.sources]
    gold = set(q.gold)
    cited = list(dict.fromkeys(c.paper_id for c in answer.citations))
    recall = rr = precision = cit_recall = coverage = None
    found: list[str] = []
    missing: list[str] = []
    if q.answerable:
        top = retrieved[:k]
        recall = len(gold & set(top)) / len(gold)
        rank = next((i for i, pid in enumerate(retrieved, 1) if pid in gold), None)
        rr = 1 / rank if rank else 0.0
        precision = (len(gold & set(cited)) / len(cited)) if cited else None
        cit_recall = len(gold & set(cited)) / len(gold)
        for variants in q.facts:
            (found if _fact_present(answer.answer, variants) else missing).append(variants[0])
        coverage = len(found) / len(q.facts) if q.facts else None
    usage = answer.usage
    return QuestionResult(
        id=q.id,
        question=q.question,
        type=q.type,
        answerable=q.answerable,
        answer=answer.answer,
        abstained=answer.abstained,
        retrieved=retrieved,
        gold=q.gold,
        recall_at_k=recall,
        reciprocal_rank=rr,
        cited=cited,
        citation_precision=precision,
        citation_recall=cit_recall,
        invalid_citations=len(answer.invalid_citations),
        facts_found=found,
        facts_missing=missing,
        fact_coverage=coverage,
        correct_abstention=answer.abstained != q.answerable,
        seconds=round(seconds, 4),
        prompt_tokens=usage.prompt_tokens if usage else 0,
        completion_tokens=usage.completion_tokens if usage else 0,
    )


def _mean(values: list[float | None]) -> float:
    kept = [v for v in values if v is not None]
    return round(statistics.fmean(kept), 4) if kept else 0.0


def _percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(p * len(ordered)))], 4) if ordered else 0.0


class Verdict(BaseModel):
    """A judge model's grades of one answer, and its reply as it came."""

    scores: dict[str, int] = Field(description="correctness and faithfulness, 1-5, when given.")
    reply: str


def judge(service: QAService, answer: Answer) -> Verdict | None:
    """Correctness and faithfulness, 1 to 5, from the configured chat model, asked in a call of
    its own; None without a chat model or for a refusal."""
    provider = service.provider
    if not isinstance(provider, ChatProvider) or answer.abstained:
        return None
    block, _ = format_sources(answer.sources, service.settings.context_tokens)
    prompt = load_prompt("judge.user").format(
        sources=block, question=answer.question, answer=answer.answer
    )
    # its own call, in JSON mode: the answer's usage is untouched, and the scores parse
    reply = provider.complete([("user", prompt)], json=True).text()
    scores = {}
    for name in ("correctness", "faithfulness"):
        m = re.search(rf'"?{name}"?\s*[:=]\s*([1-5])', reply, re.IGNORECASE)
        if m:
            scores[name] = int(m.group(1))
    return Verdict(scores=scores, reply=reply)


def run_eval(
    questions: list[EvalQuestion],
    service: QAService,
    *,
    k: int | None = None,
    mode: Mode = "hybrid",
    label: str = "default",
    use_judge: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> EvalReport:
    given = k  # None: each question gets the papers the service gives it (more for a listing)
    k = k or service.settings.top_k
    answers: dict[str, Answer] = {}
    results: list[QuestionResult] = []
    review: list[ReviewItem] = []
    for i, q in enumerate(questions, start=1):
        history = []
        if q.follows:
            prior = answers.get(q.follows)
            first = next(x for x in questions if x.id == q.follows)
            history = [(first.question, prior.answer if prior else "")]
        service.embedder.forget()  # each question cold, as a user's first: timed and answered alike
        started = time.perf_counter()
        answer = service.ask(q.question, history=history, k=given, mode=mode, filters=q.filters)
        answers[q.id] = answer
        if q.review:  # answered again, not scored
            review.append(reviewed(q, answer))
        else:
            result = score(q, answer, time.perf_counter() - started, given or len(answer.sources))
            if use_judge and (verdict := judge(service, answer)) is not None:
                result.judge, result.judge_reply = verdict.scores or None, verdict.reply
            results.append(result)
        if progress:
            progress(i, len(questions))
    summary = summarise(results, label, k, service.settings)
    return EvalReport(summary=summary, results=results, review=review)


def reviewed(q: EvalQuestion, answer: Answer) -> ReviewItem:
    """A question to review, with the answer rated then (from its `origin`) and the one now."""
    then = q.origin
    return ReviewItem(
        id=q.id,
        question=q.question,
        comment=then.comment if then else None,
        answer_then=then.answer if then else "",
        cited_then=then.cited if then else [],
        answer_now=answer.answer,
        cited_now=answer.cited_paper_ids,
        abstained_now=answer.abstained,
    )


def summarise(results: list[QuestionResult], label: str, k: int, settings: Settings) -> Summary:
    answerable = [r for r in results if r.answerable]
    unanswerable = [r for r in results if not r.answerable]
    prompt = sum(r.prompt_tokens for r in results)
    completion = sum(r.completion_tokens for r in results)
    price = PRICES.get(settings.llm_model) if settings.openai_base_url is None else None
    cost = None
    if (prompt or completion) and price:
        cost = round((prompt * price[0] + completion * price[1]) / 1e6, 6)
    judged = [r.judge for r in results if r.judge]
    multi = [r.recall_at_k for r in answerable if len(r.gold) > 1]
    return Summary(
        label=label,
        questions=len(results),
        answerable=len(answerable),
        unanswerable=len(unanswerable),
        k=k,
        recall_at_k=_mean([r.recall_at_k for r in answerable]),
        mrr=_mean([r.reciprocal_rank for r in answerable]),
        citation_precision=_mean([r.citation_precision for r in answerable]),
        citation_recall=_mean([r.citation_recall for r in answerable]),
        invalid_citations=sum(r.invalid_citations for r in results),
        fact_coverage=_mean([r.fact_coverage for r in answerable]),
        multi_paper_recall=_mean(multi) if multi else None,
        correct_refusals=_mean([1.0 if r.abstained else 0.0 for r in unanswerable]),
        wrong_refusals=_mean([1.0 if r.abstained else 0.0 for r in answerable]),
        abstention_accuracy=_mean([1.0 if r.correct_abstention else 0.0 for r in results]),
        latency_p50=_percentile([r.seconds for r in results], 0.5),
        latency_p95=_percentile([r.seconds for r in results], 0.95),
        prompt_tokens=prompt,
        completion_tokens=completion,
        cost_usd=cost,
        judge_correctness=_mean([j.get("correctness") for j in judged]) if judged else None,
        judge_faithfulness=_mean([j.get("faithfulness") for j in judged]) if judged else None,
        by_type=by_type(results),
    )


def by_type(results: list[QuestionResult]) -> dict[str, TypeSummary]:
    groups: dict[str, list[QuestionResult]] = {}
    for r in results:
        groups.setdefault(r.type, []).append(r)
    out = {}
    for name, group in sorted(groups.items()):
        answerable = [r for r in group if r.answerable]
        facts = [r.fact_coverage for r in answerable if r.fact_coverage is not None]
        out[name] = TypeSummary(
            questions=len(group),
            answerable=bool(answerable),
            recall_at_k=_mean([r.recall_at_k for r in answerable]) if answerable else None,
            fact_coverage=_mean(list(facts)) if facts else None,
            refused=_mean([1.0 if r.abstained else 0.0 for r in group]),
        )
    return out


def parse_variant(spec: str) -> tuple[str, dict[str, Any], Mode]:
    """`--compare` specs: `mode=bm25`, `llm=extractive,top_k=8`, or a JSON object of settings."""
    overrides: dict[str, Any] = {}
    if spec.strip().startswith("{"):
        try:
            overrides = dict(json.loads(spec))
        except ValueError as exc:
            raise InputError(f"--compare {spec!r} is not valid JSON: {exc}") from exc
    else:
        for part in filter(None, (p.strip() for p in spec.split(","))):
            if "=" not in part:
                raise InputError(f"--compare {spec!r}: write key=value pairs, e.g. mode=bm25")
            key, value = (x.strip() for x in part.split("=", 1))
            overrides[key] = value
    mode = str(overrides.pop("mode", "hybrid"))
    if mode not in MODES:
        raise InputError(f"--compare {spec!r}: mode must be one of {', '.join(MODES)}")
    return spec, overrides, mode  # type: ignore[return-value]


def known_paper_ids(settings: Settings) -> set[str]:
    return Index(settings).paper_ids()


METRICS = [
    ("recall_at_k", "recall@k"),
    ("mrr", "MRR"),
    ("citation_precision", "citation precision"),
    ("citation_recall", "citation recall"),
    ("fact_coverage", "fact coverage"),
    ("multi_paper_recall", "multi-paper recall"),
    ("correct_refusals", "correct refusals"),
    ("wrong_refusals", "wrong refusals"),
    ("abstention_accuracy", "abstention accuracy"),
]


def markdown(reports: list[EvalReport]) -> str:
    lines = ["# Evaluation report", ""]
    head = "| metric | " + " | ".join(r.summary.label for r in reports) + " |"
    lines += [head, "|---|" + "---|" * len(reports)]
    for key, name in [
        *METRICS,
        ("invalid_citations", "invalid citations"),
        ("latency_p50", "latency p50 (s)"),
        ("latency_p95", "latency p95 (s)"),
        ("prompt_tokens", "prompt tokens"),
        ("completion_tokens", "completion tokens"),
        ("cost_usd", "cost (USD)"),
        ("judge_correctness", "judge correctness (1-5)"),
        ("judge_faithfulness", "judge faithfulness (1-5)"),
    ]:
        values = [getattr(r.summary, key) if r.summary.questions else None for r in reports]
        cells = [
            "-" if v is None else (f"{v:.3f}" if isinstance(v, float) else str(v)) for v in values
        ]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    first = reports[0]
    s = first.summary
    scored = f"{s.questions} questions ({s.answerable} answerable, {s.unanswerable} not)"
    if not s.questions:
        scored = "No question was scored (every one is kept for review: '-' above)"
    lines += [
        "",
        f"{scored}, k = {s.k}.",
        "",
        f"## By question type ({s.label})",
        "",
        "| type | questions | recall@k | fact coverage | refused |",
        "|---|---|---|---|---|",
        *(
            f"| {name} | {t.questions} | {_cell(t.recall_at_k)} | {_cell(t.fact_coverage)} | "
            f"{t.refused:.3f} |"
            for name, t in s.by_type.items()
        ),
        "",
        f"## Failures ({first.summary.label})",
        "",
        "| id | type | question | what went wrong | answer |",
        "|---|---|---|---|---|",
    ]
    for r in first.results:
        if r.failed:
            answer = r.answer.replace("|", "\\|").replace("\n", " ")
            question = r.question.replace("|", "\\|")
            lines.append(
                f"| {r.id} | {r.type} | {question} | {'; '.join(r.failed)} | {answer[:160]} |"
            )
    if first.review:
        lines += [
            "",
            f"## To review ({len(first.review)}: rated thumbs-down, not scored)",
            "",
            "Write each one's gold papers (and `review: false`) to make it a regression question.",
            "",
            "| id | question | comment | answer then | answer now |",
            "|---|---|---|---|---|",
        ]
        for item in first.review:
            cells = [item.question, item.comment or "", item.answer_then, item.answer_now]
            shown = [c.replace("|", "\\|").replace("\n", " ")[:200] for c in cells]
            lines.append(f"| {item.id} | " + " | ".join(shown) + " |")
    return "\n".join(lines) + "\n"


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def chart(reports: list[EvalReport], path: Path) -> None:
    """A grouped bar chart of the main metrics, one colour per configuration."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [name for _, name in METRICS]
    fig, ax = plt.subplots(figsize=(10, 4.5))
    width = 0.8 / len(reports)
    for i, report in enumerate(reports):
        values = [getattr(report.summary, key) or 0.0 for key, _ in METRICS]
        xs = [j + i * width for j in range(len(names))]
        ax.bar(xs, values, width=width, label=report.summary.label)
    ax.set_xticks([j + width * (len(reports) - 1) / 2 for j in range(len(names))])
    ax.set_xticklabels(names, rotation=20, ha="right")
    ax.set_ylim(0, 1.05)
    ax.set_title("abstract-qa evaluation")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_reports(reports: list[EvalReport], out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "report.json", out / "report.md"]
    payload: Any = (
        reports[0].model_dump() if len(reports) == 1 else [r.model_dump() for r in reports]
    )
    written[0].write_text(json.dumps(payload, indent=2, ensure_ascii=False))
    written[1].write_text(markdown(reports))
    if len(reports) > 1:
        chart(reports, out / "compare.png")
        written.append(out / "compare.png")
    return written
