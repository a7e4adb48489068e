"""The offline provider: no generative model. It answers with the sentences of the retrieved
abstracts that best answer the question, each cited, and streams them one by one."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from app.answer import CANNOT_ANSWER, defuse, is_relevant
from app.llm.base import Provider
from app.models import Source
from app.settings import Settings
from ingest.embed import Embedder
from ingest.index import bm25_tokens
from ingest.text import sentence_spans

_LIST_QUESTION = re.compile(
    r"\b(which|what|list|name|any)\b.{0,40}\b(papers?|works?|methods|approaches|studies)\b",
    re.IGNORECASE,
)
_NAMING_QUESTION = re.compile(r"^\s*(which|what)\b", re.IGNORECASE)
_NAMING_SENTENCE = re.compile(
    r"\b(we (propose|introduce|present|develop|devise)|called|named|dubbed|termed)\b", re.IGNORECASE
)
CANDIDATE_PAPERS = 3
MAX_SENTENCES = 3
MAX_EMBEDDED = 12  # same answers as embedding every candidate on the sample set


@dataclass
class Candidate:
    source: Source
    sentence: str
    score: float = 0.0


class ExtractiveProvider(Provider):
    name = "extractive"
    model = None

    def __init__(self, settings: Settings, embedder: Embedder) -> None:
        super().__init__()
        self.settings = settings
        self.embedder = embedder

    def generate(self, question: str, sources: list[Source]) -> Iterator[str]:
        relevant = [
            s
            for s in sources
            if is_relevant(s, self.settings.min_relevance, self.settings.min_lexical)
        ]
        if not relevant:
            yield CANNOT_ANSWER
            return
        listing = bool(_LIST_QUESTION.search(question))
        pool = relevant if listing else relevant[:CANDIDATE_PAPERS]
        candidates = [
            Candidate(source, defuse(source.text[s:e]))
            for source in pool
            for s, e in sentence_spans(source.text)
            if len(source.text[s:e].split()) >= 4
        ]
        if not candidates:
            yield CANNOT_ANSWER
            return
        self._score_words(question, candidates)
        if _NAMING_QUESTION.search(question):
            # "which method ...?" is answered by the sentence that names it
            for cand in candidates:
                if _NAMING_SENTENCE.search(cand.sentence):
                    cand.score += 0.1
        candidates = self._shortlist(candidates, per_paper=2 if listing else MAX_EMBEDDED)
        self._score_meaning(question, candidates)
        chosen: list[Candidate] = []
        if listing:
            # one sentence from each relevant paper: "which papers study X?"
            for source in pool:
                mine = [c for c in candidates if c.source is source]
                if mine:
                    chosen.append(max(mine, key=lambda c: c.score))
        else:
            ranked = sorted(candidates, key=lambda c: -c.score)
            best = ranked[0]
            chosen.append(best)
            for cand in ranked[1:]:
                if len(chosen) >= MAX_SENTENCES or cand.score < best.score - 0.12:
                    break
                # one sentence a paper, but a second from the best paper when it is as good
                same = sum(c.source is cand.source for c in chosen)
                if same == 0 or (cand.source is best.source and same == 1):
                    chosen.append(cand)
            # keep the sources' own order of sentences within one paper
            chosen.sort(key=lambda c: candidates.index(c) if c.source is best.source else 10**6)
        for i, cand in enumerate(chosen):
            sentence = cand.sentence.rstrip()
            end = sentence[-1] if sentence[-1] in ".!?" else "."
            body = sentence[:-1] if sentence[-1] in ".!?" else sentence
            yield f"{'' if i == 0 else ' '}{body} [{cand.source.marker}]{end}"

    @staticmethod
    def _score_words(question: str, candidates: list[Candidate]) -> None:
        """The cheap part of the score: shared words, plus how relevant the paper is."""
        q_terms = set(bm25_tokens([question])[0])
        terms = bm25_tokens([c.sentence for c in candidates])
        for cand, toks in zip(candidates, terms, strict=True):
            overlap = len(q_terms & set(toks)) / len(q_terms) if q_terms else 0.0
            cand.score = 0.25 * overlap + 0.25 * cand.source.score

    @staticmethod
    def _shortlist(candidates: list[Candidate], per_paper: int) -> list[Candidate]:
        """The best candidates by the cheap score, at most ``per_paper`` from each paper and
        MAX_EMBEDDED in all, in their original order: embedding sentences is the costly step."""
        ranked = sorted(range(len(candidates)), key=lambda i: -candidates[i].score)
        taken: dict[int, int] = {}
        keep: list[int] = []
        for i in ranked:
            paper = id(candidates[i].source)
            if taken.get(paper, 0) < per_paper and len(keep) < MAX_EMBEDDED:
                taken[paper] = taken.get(paper, 0) + 1
                keep.append(i)
        return [candidates[i] for i in sorted(keep)]

    def _score_meaning(self, question: str, candidates: list[Candidate]) -> None:
        """Adds meaning: the embedding similarity of each sentence to the question."""
        q = np.asarray(self.embedder.embed_query(question), dtype=np.float32)
        vectors = np.asarray(
            self.embedder.embed_documents([c.sentence for c in candidates]), dtype=np.float32
        )
        for cand, sim in zip(candidates, vectors @ q, strict=True):
            cand.score += float(sim)
