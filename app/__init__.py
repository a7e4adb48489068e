"""abstract-qa: question answering over research-paper abstracts, with real citations.

from app import ask
answer = ask("Which papers study federated learning?")
print(answer.answer, [c.paper_id for c in answer.citations])
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.engine.service import QAService
    from app.fronts.langchain_adapters import as_retriever, as_runnable
    from core.models import Answer, FeedbackRecord, Rating, Source, Table

__all__ = [
    "Answer",
    "QAService",
    "Table",
    "as_retriever",
    "as_runnable",
    "ask",
    "rate",
    "related",
    "table",
]


@lru_cache(maxsize=1)
def _service() -> QAService:
    from app.engine.service import QAService

    return QAService()


def ask(question: str, **options: Any) -> Answer:
    """Answer ``question`` from the index configured by the environment / `.env`.

    Options: ``history`` (list of (question, answer)), ``k``, ``filters`` (a `Filters`
    record), or its keywords ``year_from``, ``year_to``, ``venue``, ``decision``, ``authors``
    (names as people write them), ``ignore`` (filters not
    to read from the question), ``mode`` ("hybrid", "dense", "bm25"). The first call loads the
    models; later calls reuse them.
    """
    return _service().ask(question, **options)


def table(
    topic: str | None = None,
    columns: list[str] | tuple[str, ...] = (),
    *,
    papers: list[str] | tuple[str, ...] = (),
    rows: int = 10,
    **filters: Any,
) -> Table:
    """An evidence table: each of ``columns`` (short questions: "dataset", "main result") asked
    of every paper, the rows being ``topic``'s most relevant ``rows`` papers or the ``papers``
    ids given. Each cell is the span of that paper's abstract that answers, its sentence, a
    confidence, or "not stated". Filters as for `ask` (``year_from``, ``venue``, ...)."""
    from core.models import Filters, TableRequest

    request = TableRequest.read(
        topic=topic,
        columns=list(columns),
        papers=list(papers),
        rows=rows,
        filters=Filters.given(**filters),
    )
    return _service().table(request)


def related(paper_id: str, k: int = 5) -> list[Source]:
    """The ``k`` papers nearest to ``paper_id`` ("more like this"), as numbered sources."""
    return _service().related(paper_id, k)


def rate(answer: Answer, rating: Rating, comment: str | None = None) -> FeedbackRecord:
    """Store a user's thumbs ``"up"`` or ``"down"`` (and why) on an answer `ask` gave; the
    ratings become evaluation questions with `abstract-qa feedback export`."""
    from core.models import Feedback

    return _service().rate(Feedback.of(answer, rating, comment))


def __getattr__(name: str) -> Any:
    if name == "QAService":
        from app.engine.service import QAService

        return QAService
    if name in ("Answer", "Table"):
        from core import models

        return getattr(models, name)
    if name in ("as_retriever", "as_runnable"):  # the LangChain front, loaded only when asked
        from app.fronts import langchain_adapters

        return getattr(langchain_adapters, name)
    raise AttributeError(name)
