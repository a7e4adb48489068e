"""The question as read, once: the one record that carries it through an answer."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from core.models import Filters, Mode, Usage


@dataclass(frozen=True)
class Query:
    """A question read once, and everything every later step needs of it.

    The engine builds it (`QAService` for a question, `Retriever.query` for any text to
    search) and passes it whole to retrieval, relevance and the provider, so that the text is
    embedded once and cut into search words once. ``text`` is what is searched: the standalone
    question with the filter phrases it states taken out ("ICLR 2024 papers on X" searches
    "papers on X"). The answer is written to ``standalone``, whose vector and words are
    ``text``'s own (the same objects) unless a filter phrase was taken out."""

    text: str
    vector: np.ndarray = field(repr=False)
    words: tuple[str, ...]
    k: int
    filters: Filters = field(default_factory=Filters)
    mode: Mode = "hybrid"
    question: str = ""
    standalone: str = ""
    standalone_vector: np.ndarray | None = field(default=None, repr=False)
    standalone_words: tuple[str, ...] | None = None
    usage: Usage | None = None

    @property
    def asked(self) -> str:
        """The question the answer is written to: the standalone one (or the text searched)."""
        return self.standalone or self.text

    @property
    def asked_vector(self) -> np.ndarray:
        return self.vector if self.standalone_vector is None else self.standalone_vector

    @property
    def asked_words(self) -> tuple[str, ...]:
        return self.words if self.standalone_words is None else self.standalone_words
