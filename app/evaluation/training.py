"""Training the answer selector (`app.providers.selector`) from annotated questions.

Each training question (data/train/README.md) is asked through the same steps an answer takes
(`QAService` reads it, retrieves, keeps the relevant sources; the extractive answerer reads the
candidate sentences), and every candidate sentence becomes a row: its features, and whether it
states a fact of the question (a gold paper's sentence that the annotator named, or that holds
one of the facts). Questions that no sentence answers (a detail not stated, an invented name,
an off-topic question) give only negative rows, which is what calibrates the score.

Two logistic models are fitted (scikit-learn, deterministic): the cheap one on the features
that need no embedding, the full one on all. Each question weighs the same whatever its number
of candidates. One batch of annotators' questions (``holdout``) is kept out and measured.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from pydantic import BaseModel

from app.engine.service import QAService
from app.engine.table import Asked
from app.evaluation.harness import known_paper_ids, load_questions, normalise
from app.evaluation.tables import GoldCell, GoldTable, holds, load_tables
from app.providers.extractive import Candidate, ExtractiveProvider
from app.providers.selector import CHEAP, FULL, ColumnStage, Logistic, Pairing, Selector
from core.errors import InputError, ModelFileError
from core.models import TableRequest, TrainQuestion

REGULARISATION = 1.0  # scikit-learn's C: its default, not tuned


@dataclass
class Rows:
    """The candidate sentences of many questions, as feature rows with labels."""

    full: list[np.ndarray] = field(default_factory=list)  # `FULL`; the cheap ones lead it
    labels: list[np.ndarray] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    questions: list[str] = field(default_factory=list)
    sentences: list[list[str]] = field(default_factory=list)

    def stacked(self, picked: list[int]) -> tuple[np.ndarray, ...]:
        """The rows of the ``picked`` questions: cheap and full features, labels, weights."""
        if not picked:
            raise InputError("No training question left to fit on.")
        weights = [np.full(len(self.labels[i]), 1.0 / len(self.labels[i])) for i in picked]
        full = np.vstack([self.full[i] for i in picked])
        return (
            full[:, : len(CHEAP)],
            full,
            np.concatenate([self.labels[i] for i in picked]),
            np.concatenate(weights),
        )


class Measured(BaseModel):
    """How the selector ranks the sentences of questions that a sentence answers."""

    questions: int
    first: float  # the first sentence states a fact
    top_two: float  # one of the first two does
    positives: int
    rows: int


class TrainReport(BaseModel):
    questions: int
    answered_by_retrieval: int
    rows: int
    trained_on: int
    held_out: int
    holdout_batch: str | None
    seconds: float
    train: Measured
    held: Measured | None
    cosine_alone: Measured | None  # the baseline: MiniLM similarity alone, on the held-out slice


def label(question: TrainQuestion, cands: list[Candidate]) -> np.ndarray:
    """1 for a candidate that states one of the question's facts, else 0."""
    gold = set(question.gold)
    evidence = {(e.paper, normalise(e.sentence)) for e in question.evidence}
    facts = [normalise(v) for variants in question.facts for v in variants]
    out = np.zeros(len(cands))
    for i, cand in enumerate(cands):
        if cand.source.paper_id not in gold or not question.answerable:
            continue
        text = normalise(cand.sentence)
        if (cand.source.paper_id, text) in evidence or any(f and f in text for f in facts):
            out[i] = 1.0
    return out


def collect(
    service: QAService,
    questions: list[TrainQuestion],
    progress: Callable[[int, int], None] | None = None,
) -> tuple[Rows, int]:
    """Every question asked as a user asks it, up to the answerer's candidates; their rows."""
    provider = service.provider
    if not isinstance(provider, ExtractiveProvider):
        raise InputError("Training needs the extractive answerer: unset AQA_LLM.")
    rows = Rows()
    answered = 0
    for n, question in enumerate(questions, start=1):
        query, relevant = service.given(question.question)
        if relevant:
            answered += 1
            reading = provider.read(query, relevant)
            if reading.candidates:
                rows.full.append(provider.features(query, reading))
                rows.labels.append(label(question, reading.candidates))
                rows.ids.append(question.id)
                rows.questions.append(reading.question)
                rows.sentences.append([c.sentence for c in reading.candidates])
        if progress:
            progress(n, len(questions))
    return rows, answered


def fit(x: np.ndarray, y: np.ndarray, w: np.ndarray, seed: int) -> Logistic:
    from sklearn.linear_model import LogisticRegression

    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale == 0] = 1.0
    # converged to the optimum, not stopped near it (the default tolerance left weights 0.007
    # apart between two runs); runs in separate processes still differ by up to 0.003 a weight,
    # since embeddings' last bits differ and a few rank features flip with them
    model = LogisticRegression(C=REGULARISATION, max_iter=20000, tol=1e-10, random_state=seed)
    model.fit((x - mean) / scale, y, sample_weight=w * len(w) / w.sum())
    return Logistic(mean, scale, model.coef_[0].copy(), float(model.intercept_[0]))


def measure(scores: list[np.ndarray], labels: list[np.ndarray]) -> Measured:
    answered = [(s, y) for s, y in zip(scores, labels, strict=True) if y.any()]
    first = [float(y[np.argmax(s)]) for s, y in answered]
    two = [float(y[np.argsort(-s)[:2]].any()) for s, y in answered]
    return Measured(
        questions=len(answered),
        first=round(float(np.mean(first)), 4) if first else 0.0,
        top_two=round(float(np.mean(two)), 4) if two else 0.0,
        positives=int(sum(y.sum() for y in labels)),
        rows=int(sum(len(y) for y in labels)),
    )


def train(
    service: QAService,
    questions_file: Path,
    out: Path,
    *,
    holdout: str | None = None,
    seed: int = 37,
    progress: Callable[[int, int], None] | None = None,
) -> TrainReport:
    """Fit the selector on ``questions_file`` (less the ``holdout`` batch) and write it."""
    started = time.perf_counter()
    questions = [
        q
        for q in load_questions(questions_file, known_paper_ids(service.settings), TrainQuestion)
        if isinstance(q, TrainQuestion)
    ]
    batch = {q.id: q.batch for q in questions}
    if holdout is not None and holdout not in batch.values():
        raise InputError(f"{questions_file}: no question of batch {holdout!r} to hold out.")
    rows, answered = collect(service, questions, progress)
    kept = [i for i, qid in enumerate(rows.ids) if batch[qid] != holdout]
    held = [i for i, qid in enumerate(rows.ids) if batch[qid] == holdout]
    x_cheap, x_full, y, w = rows.stacked(kept)
    selector = Selector(
        cheap=fit(x_cheap, y, w, seed),
        full=fit(x_full, y, w, seed),
        column=_current_column(out),
        meta={
            "questions": str(questions_file.name),
            "trained_on": len(kept),
            "held_out": holdout,
            "seed": seed,
            "rows": len(y),
        },
    )
    selector.save(out)
    column = FULL.index("cosine")

    def ranked(picked: list[int], score: Callable[[np.ndarray], np.ndarray]) -> Measured:
        return measure([score(rows.full[i]) for i in picked], [rows.labels[i] for i in picked])

    return TrainReport(
        questions=len(questions),
        answered_by_retrieval=answered,
        rows=int(sum(len(y) for y in rows.labels)),
        trained_on=len(kept),
        held_out=len(held),
        holdout_batch=holdout,
        seconds=round(time.perf_counter() - started, 1),
        train=ranked(kept, selector.full.probability),
        held=ranked(held, selector.full.probability) if held else None,
        cosine_alone=ranked(held, lambda x: x[:, column]) if held else None,
    )


def _current_column(path: Path) -> ColumnStage:
    """The column stage of the selector at ``path`` (kept when the answer stages are retrained;
    `train_columns` retrains it), or an untrained one that copies nothing and scores 0.5."""
    if path.exists():
        try:
            return Selector.load(path).column
        except ModelFileError:
            pass
    n, none = len(FULL), np.zeros((1, 1))
    copies = Logistic(np.zeros(n), np.ones(n), np.zeros(n), 0.0)
    return ColumnStage(copies, Pairing(none, none, none[0], 0.0, "", np.zeros((n, 1))), copies)


class ColumnReport(BaseModel):
    tables: int
    cells: int
    rows: int
    seconds: float
    first: float  # of the stated cells, the first sentence states the fact (training tables)


@dataclass
class ColumnRows:
    """Annotated cells as the table fills them: per cell, its sentences' features, vectors and
    labels, and the column's vector."""

    features: list[np.ndarray] = field(default_factory=list)
    sentences: list[np.ndarray] = field(default_factory=list)
    asked: list[np.ndarray] = field(default_factory=list)
    labels: list[np.ndarray] = field(default_factory=list)


@dataclass(frozen=True)
class FilledCell:
    """An annotated cell as the table fills it: its column read once, its row's sentences with
    their features (for this column) and vectors, and 1 for each sentence that states it."""

    table: GoldTable
    cell: GoldCell
    title: str
    column: Asked
    sentences: list[str]
    features: np.ndarray
    vectors: np.ndarray
    labels: np.ndarray


def filled_cells(service: QAService, tables: list[GoldTable]) -> Iterator[FilledCell]:
    """Each annotated cell of ``tables`` with what its row's abstract gives (its paper alone);
    a row with no sentence to quote gives none."""
    for table in tables:
        plan = service.table_plan(TableRequest(papers=table.papers, columns=table.columns))
        asked = plan.filler.read(plan.request.columns)
        for row in plan.rows:
            read = plan.filler.features(row, asked)
            if not read.spans:
                continue
            sentences = [row.abstract[a:b] for a, b in read.spans]
            for cell in (c for c in table.cells if c.paper == row.paper_id):
                column = table.columns.index(cell.column)
                said = normalise(cell.evidence or "")
                states = [
                    cell.stated and (normalise(s) == said or holds(s, cell.facts))
                    for s in sentences
                ]
                yield FilledCell(
                    table,
                    cell,
                    row.title,
                    asked[column],
                    sentences,
                    read.features[column],
                    read.vectors,
                    np.asarray(states, dtype=float),
                )


def column_rows(service: QAService, tables: list[GoldTable]) -> ColumnRows:
    """Each annotated cell as the table fills it (its paper alone, the column read once): the
    features and vectors of every sentence of the abstract, labelled 1 for the sentence that
    states it."""
    rows = ColumnRows()
    for filled in filled_cells(service, tables):
        rows.features.append(filled.features)
        rows.sentences.append(filled.vectors)
        rows.asked.append(filled.column.vector)
        rows.labels.append(filled.labels)
    return rows


# The column stage's learned similarity, chosen by cross-validation over the training tables'
# batches (fit on all but one, measured on that one; docs/tables.md): rank 8 and 32 or a lighter
# or heavier penalty measured no better; the steering's penalty measured flat from 0.05 to 0.5,
# and worse at 0.003 and below.
PAIRING_RANK = 16
PAIRING_PENALTY = 3e-3  # on the squared pairing weights
LINEAR_PENALTY = 1e-4  # on the squared logistic weights
STEER_PENALTY = 0.2  # on the squared steering weights (the column's vector moving the features')
PAIRING_GAIN = 10.0  # the pairing's scale: MiniLM cosines are small
STEPS, STEP_SIZE = 300, 0.01  # full-batch Adam


def fit_column(rows: ColumnRows, seed: int, embedding: str) -> ColumnStage:
    """The column stage fitted to annotated cells: a logistic model over the features and a
    learned similarity of the column's and the sentence's vectors (``embedding``'s), jointly,
    and the features' model alone (for another embedding model's index); each cell weighs the
    same whatever its number of sentences. Deterministic for a seed (one thread)."""
    import torch

    x = np.vstack(rows.features)
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale == 0] = 1.0
    weight = np.concatenate([np.full(len(y), 1.0 / len(y)) for y in rows.labels])
    plain = fit(x, np.concatenate(rows.labels), weight, seed)
    counts = [len(y) for y in rows.labels]

    def tensor(a: np.ndarray) -> torch.Tensor:
        return torch.tensor(np.asarray(a), dtype=torch.float32)

    xs, y = tensor((x - mean) / scale), tensor(np.concatenate(rows.labels))
    sentences = tensor(np.vstack(rows.sentences))
    asked = tensor(np.repeat(np.vstack(rows.asked), counts, axis=0))
    w = tensor(weight * len(weight) / weight.sum())
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        generator = torch.Generator().manual_seed(seed)
        dims = sentences.shape[1]
        coef = torch.zeros(x.shape[1], requires_grad=True)
        intercept = torch.zeros(1, requires_grad=True)
        left = (torch.randn(PAIRING_RANK, dims, generator=generator) * 0.05).requires_grad_()
        right = (torch.randn(PAIRING_RANK, dims, generator=generator) * 0.05).requires_grad_()
        diagonal = torch.zeros(dims, requires_grad=True)
        steer = torch.zeros(x.shape[1], dims, requires_grad=(STEER_PENALTY > 0))
        trained = [coef, intercept, left, right, diagonal] + ([steer] if STEER_PENALTY else [])
        optimiser = torch.optim.Adam(trained, lr=STEP_SIZE)
        for _ in range(STEPS):
            optimiser.zero_grad()
            low_rank = ((asked @ left.T) * (sentences @ right.T)).sum(1)
            pair = low_rank + (asked * sentences) @ diagonal
            steered = (xs * (asked @ steer.T)).sum(1)
            z = xs @ coef + intercept + PAIRING_GAIN * (pair + steered)
            loss = torch.nn.functional.binary_cross_entropy_with_logits(z, y, weight=w)
            pairing = left.pow(2).sum() + right.pow(2).sum() + diagonal.pow(2).sum()
            loss = loss + PAIRING_PENALTY * pairing + LINEAR_PENALTY * coef.pow(2).sum()
            loss = loss + STEER_PENALTY * steer.pow(2).sum()
            loss.backward()
            optimiser.step()
    finally:
        torch.set_num_threads(threads)

    def array(t: torch.Tensor) -> np.ndarray:
        return np.asarray(t.detach().numpy(), dtype=np.float64)

    return ColumnStage(
        Logistic(mean, scale, array(coef), float(intercept.item())),
        Pairing(array(left), array(right), array(diagonal), PAIRING_GAIN, embedding, array(steer)),
        plain,
    )


def train_columns(
    service: QAService, tables_file: Path, out: Path, *, seed: int = 37
) -> ColumnReport:
    """Fit the selector's column stage on annotated tables and write it into ``out`` (its
    answer stages kept as they are)."""
    started = time.perf_counter()
    tables = load_tables(tables_file)
    rows = column_rows(service, tables)
    if not rows.labels:
        raise InputError(f"{tables_file}: no annotated cell to fit on.")
    current = Selector.load(out)
    model = service.embedder.spec.name
    column = fit_column(rows, seed, model)
    meta = dict(current.meta) | {"tables": tables_file.name, "table_cells": len(rows.labels)}
    Selector(current.cheap, current.full, column, meta).save(out)
    cells = zip(rows.features, rows.asked, rows.sentences, strict=True)
    scored = measure([column.probability(*cell, model) for cell in cells], rows.labels)
    return ColumnReport(
        tables=len(tables),
        cells=len(rows.labels),
        rows=sum(len(y) for y in rows.labels),
        seconds=round(time.perf_counter() - started, 1),
        first=scored.first,
    )
