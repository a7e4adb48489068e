"""Users' ratings turned into what a team acts on: question files the evaluation harness runs,
and counts by rating and by week.

A thumbs-up becomes a regression question whose gold papers are the ones the answer cited (a
thumbs-up on "the abstracts do not say" becomes an unanswerable question); a thumbs-down is kept
with its comment and the answer rated, marked for review, until someone writes its gold papers.
So is a thumbs-up that names no gold paper the index still holds.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Container, Iterable, Sequence

from core.models import EvalQuestion, FeedbackRecord, FeedbackStats, Origin, Rating, WeekCount


def as_question(record: FeedbackRecord, known: Container[str] | None = None) -> EvalQuestion:
    """One rating as a line of a question file (`abstract-qa eval` runs it). A thumbs-up that
    gives no gold paper (it cites none, or one no longer in the ``known`` index) is kept for
    review like a thumbs-down: the file always loads."""
    up = record.rating == "up"
    gold = record.cited if up and not record.abstained else []
    indexed = gold if known is None else [g for g in gold if g in known]
    scored = up and (record.abstained or (bool(gold) and indexed == gold))
    return EvalQuestion(
        id=f"feedback-{record.id}",
        # a follow-up is asked as it was understood: the harness has no conversation
        question=record.standalone_question or record.question,
        gold=gold if scored else [],
        answerable=not record.abstained if up else True,
        type=f"feedback-{record.rating}",
        filters=record.filters if record.filters.active else None,
        review=not scored,
        origin=Origin(
            feedback_id=record.id,
            rating=record.rating,
            comment=record.comment,
            answer=record.answer,
            cited=record.cited,
            rated=record.created,
        ),
    )


def as_questions(
    records: Iterable[FeedbackRecord],
    rating: Rating | None = None,
    known: Container[str] | None = None,
) -> list[EvalQuestion]:
    """The ratings (or only those of ``rating``) as questions; ``known``: the index's paper
    ids (a gold paper outside them sends its question to review)."""
    return [as_question(r, known) for r in records if rating is None or r.rating == rating]


def question_file(questions: Iterable[EvalQuestion]) -> str:
    """Questions as a JSON Lines question file."""
    dumped = [q.model_dump(mode="json", exclude_none=True) for q in questions]
    return "".join(json.dumps(q, ensure_ascii=False) + "\n" for q in dumped)


def stats(records: Sequence[FeedbackRecord]) -> FeedbackStats:
    """Counts by rating, and by ISO week of the rating."""
    weeks: dict[str, Counter[str]] = {}
    for r in records:
        year, week, _ = r.created.isocalendar()
        weeks.setdefault(f"{year}-W{week:02d}", Counter())[r.rating] += 1
    ups = sum(r.rating == "up" for r in records)
    return FeedbackStats(
        total=len(records),
        up=ups,
        down=len(records) - ups,
        commented=sum(bool(r.comment) for r in records),
        weeks=[WeekCount(week=w, up=c["up"], down=c["down"]) for w, c in sorted(weeks.items())],
    )
