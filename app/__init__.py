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
    from core.models import Answer, FeedbackRecord, Rating, Source

__all__ = ["Answer", "QAService", "as_retriever", "as_runnable", "ask", "rate", "related"]


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
    if name == "Answer":
        from core.models import Answer

        return Answer
    if name in ("as_retriever", "as_runnable"):  # the LangChain front, loaded only when asked
        from app.fronts import langchain_adapters

        return getattr(langchain_adapters, name)
    raise AttributeError(name)
