"""The answer selector: the chance that a sentence of a retrieved abstract states what is asked.

A learned model (issue 37) in place of hand-set weights. Each candidate sentence is described by
features of the sentence, the question (or the part of it being answered) and its paper (see
`FEATURES`), and two logistic models score it, both trained from annotated questions by
`abstract-qa train` (`app.evaluation.training`):

- ``cheap``: without the sentence's embedding, to shortlist the sentences worth embedding;
- ``full``: with it (cosine similarity to the question, and its rank), to choose;
- ``column``: the same features, for an evidence table's short column questions asked of one
  paper alone ("dataset"), trained on annotated tables (`abstract-qa train-columns`), plus a
  learned similarity between the column's and the sentence's vectors (`Pairing`): a column
  shares few words with its answer ("limitation addressed"), so the fixed cosine alone says
  little of which sentence states it; and the column's vector moves the features' weights
  (`Pairing.steer`: a result column weighs a number and a late place, a dataset column a name).
  Both hold for the embedding model they were learned on; an index of another model is scored
  by ``plain_column``, the features alone.

The weights are a small JSON file shipped in the package (`selector.json`, beside this module),
with the features' means and scales and what the model was trained on. Scores are calibrated
probabilities: the training data has questions that no sentence answers (details not stated,
off-topic questions), so a low best score means nothing answers.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, fields
from functools import lru_cache
from pathlib import Path

import numpy as np

from app.query import question as q
from core.errors import ModelFileError
from core.tokens import words

MODEL_FILE = Path(__file__).with_name("selector.json")
REBUILD = "make train"
KINDS: tuple[q.Wanted, ...] = (
    "quantity",
    "name",
    "finding",
    "application",
    "method",
    "reason",
    "general",
)
CHEAP = (
    "overlap",  # the question's word weight (idf over the candidates) the sentence holds
    "overlap_gap",  # ... less the best candidate's
    "overlap_rank",  # the sentence's place by overlap within its paper, 0 best (capped at 5)
    "focus",  # the weight of the rarest question word it holds over the rarest word's
    "novelty",  # share of its words the question does not have
    "fit",  # the shape of the asked-for answer (a number for "how much", a new name, ...)
    "background",  # "X has attracted attention ...": context, rarely an answer
    "quantity",  # it holds a number
    "paper_score",  # its paper's similarity to the question
    "paper_lexical",  # its paper's share of the question's words
    "paper_rank",  # its paper's place among the candidates' papers, 0 best (capped at 3)
    "named",  # its paper names what the question names
    "position",  # place in the abstract, 0 first .. 1 last
    "first",
    "last",
    "length",  # log of its word count
    *(f"asks_{kind}" for kind in KINDS),
    "fit_specific",  # fit when the question asks for something specific (not "general")
)
FULL = (*CHEAP, "cosine", "cosine_gap", "cosine_rank")
FEATURES = {"cheap": CHEAP, "full": FULL, "column": FULL, "plain_column": FULL}


@dataclass(frozen=True)
class Sentence:
    """What the features need of one candidate sentence."""

    text: str
    paper: int  # the candidate's paper, as an index into the papers in play (best first)
    position: int  # its place in the abstract
    sentences: int  # how many sentences the abstract has
    paper_score: float
    paper_lexical: float
    named: bool


def cheap_features(asked: str, asked_words: Sequence[str], cands: list[Sentence]) -> np.ndarray:
    """The features that need no embedding, a row per candidate, in `CHEAP`'s order."""
    kinds = q.wanted(asked)
    terms = set(asked_words)
    bags = [set(t) for t in words([c.text for c in cands])]
    df = {t: sum(t in bag for bag in bags) for t in terms}
    weight = {t: math.log(1 + len(bags) / n) for t, n in df.items() if n}
    total = sum(weight.values()) or 1.0
    rarest = max(weight.values(), default=1.0)
    overlap = np.array([sum(w for t, w in weight.items() if t in bag) / total for bag in bags])
    focus = np.array([max((w for t, w in weight.items() if t in bag), default=0.0) for bag in bags])
    asks = [1.0 if kind in kinds else 0.0 for kind in KINDS]
    specific = kinds != ["general"]
    rows = []
    for i, (cand, bag) in enumerate(zip(cands, bags, strict=True)):
        fit = q.fit(kinds, asked, cand.text)
        rows.append(
            [
                overlap[i],
                overlap[i] - overlap.max(),
                0.0,  # overlap_rank, below
                focus[i] / rarest,
                len(bag - terms) / len(bag) if bag else 0.0,
                fit,
                float(q.is_background(cand.text)),
                float(q.has_quantity(cand.text) > 0),
                cand.paper_score,
                cand.paper_lexical,
                min(cand.paper, 3) / 3,
                float(cand.named),
                cand.position / max(1, cand.sentences - 1),
                float(cand.position == 0),
                float(cand.position == cand.sentences - 1),
                math.log(1 + len(cand.text.split())),
                *asks,
                fit if specific else 0.0,
            ]
        )
    out = np.asarray(rows, dtype=np.float64)
    out[:, CHEAP.index("overlap_rank")] = _rank_in_paper(overlap, cands)
    return out


def full_features(cheap: np.ndarray, cosine: np.ndarray, cands: list[Sentence]) -> np.ndarray:
    """`cheap_features` with the sentence's similarity to what is asked added (`FULL`)."""
    extra = np.stack([cosine, cosine - cosine.max(), _rank_in_paper(cosine, cands)], axis=1)
    return np.hstack([cheap, extra])


def _rank_in_paper(values: np.ndarray, cands: list[Sentence]) -> np.ndarray:
    ranks = np.zeros(len(cands))
    for paper in {c.paper for c in cands}:
        mine = [i for i, c in enumerate(cands) if c.paper == paper]
        for r, i in enumerate(sorted(mine, key=lambda i: -values[i])):
            ranks[i] = min(r, 5) / 5
    return ranks


@dataclass(frozen=True)
class Logistic:
    """A standardised logistic model: p = sigmoid(((x - mean) / scale) . coef + intercept)."""

    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray
    intercept: float

    def logit(self, x: np.ndarray) -> np.ndarray:
        return np.asarray(((x - self.mean) / self.scale) @ self.coef + self.intercept)

    def probability(self, x: np.ndarray) -> np.ndarray:
        return sigmoid(self.logit(x))


def as_json(model: object) -> dict[str, object]:
    """A model dataclass's fields, arrays as lists."""
    return {
        f.name: v.tolist() if isinstance(v, np.ndarray) else v
        for f in fields(model)  # type: ignore[arg-type]
        for v in [getattr(model, f.name)]
    }


def sigmoid(z: np.ndarray) -> np.ndarray:
    return np.asarray(1.0 / (1.0 + np.exp(-z)))


@dataclass(frozen=True)
class Pairing:
    """A learned similarity of two vectors of one embedding model, added to a logit: ``gain``
    times the sum of a low-rank bilinear term, (L a) . (R b), and a per-dimension one,
    (a * b) . diagonal."""

    left: np.ndarray  # rank x dimensions
    right: np.ndarray  # rank x dimensions
    diagonal: np.ndarray  # dimensions
    gain: float
    embedding: str  # the model whose vectors it was learned on (`ModelSpec.name`)
    steer: np.ndarray  # features x dimensions: the column's vector moves the features' weights

    def steered(self, asked: np.ndarray) -> np.ndarray:
        """What the column (vector ``asked``) adds to the weights of the standardised features:
        a column asking for a result weighs a number or a late place more than one asking for a
        dataset, which weighs a name."""
        return np.asarray(self.gain * (self.steer @ asked))

    def fits(self, embedding: str, dimensions: int) -> bool:
        """Whether it was learned on this model's vectors."""
        return embedding == self.embedding and dimensions == len(self.diagonal)

    def logit(self, asked: np.ndarray, sentences: np.ndarray) -> np.ndarray:
        """One value per row of ``sentences`` for the one vector ``asked``."""
        projected = self.right.T @ (self.left @ asked)
        return np.asarray(self.gain * (sentences @ (projected + asked * self.diagonal)))

    @classmethod
    def from_json(cls, spec: dict[str, object]) -> Pairing:
        left, right = np.asarray(spec["left"], float), np.asarray(spec["right"], float)
        diagonal = np.asarray(spec["diagonal"], float)
        steer = np.asarray(spec["steer"], float)
        if left.ndim != 2 or left.shape != right.shape or left.shape[1] != len(diagonal):
            raise ValueError("its column pairing's shapes do not match")
        if steer.shape != (len(FULL), len(diagonal)):
            raise ValueError("its column steering's shape does not match its features")
        gain, embedding = float(spec["gain"]), str(spec["embedding"])  # type: ignore[arg-type]
        return cls(left, right, diagonal, gain, embedding, steer)


@dataclass(frozen=True)
class ColumnStage:
    """The column stage: a logistic model over `FULL` whose logit the learned similarity of the
    column's vector and the sentence's adds to, and (``plain``) one over `FULL` alone, for an
    index of another embedding model than the one the similarity was learned on."""

    linear: Logistic
    pairing: Pairing
    plain: Logistic

    def probability(
        self, x: np.ndarray, asked: np.ndarray, sentences: np.ndarray, embedding: str
    ) -> np.ndarray:
        """The chance that each sentence (features ``x``, vectors ``sentences``) states what the
        column (vector ``asked``) asks, the vectors being ``embedding``'s."""
        if not self.pairing.fits(embedding, len(asked)):
            return self.plain.probability(x)
        linear = self.linear  # its weights as the column's vector steers them
        weights = linear.coef + self.pairing.steered(asked)
        logit = ((x - linear.mean) / linear.scale) @ weights + linear.intercept
        return sigmoid(logit + self.pairing.logit(asked, sentences))


@dataclass(frozen=True)
class Selector:
    cheap: Logistic
    full: Logistic
    column: ColumnStage
    meta: dict[str, object]

    @classmethod
    def load(cls, path: Path = MODEL_FILE) -> Selector:
        """The trained selector; a missing or unreadable file is an error naming it and the
        command that rebuilds it."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            stages = {}
            for stage, names in FEATURES.items():
                spec = data["stages"][stage]
                if spec["features"] != list(names):
                    raise ValueError(f"its {stage} features are not this version's")
                stages[stage] = Logistic(
                    mean=np.asarray(spec["mean"], dtype=np.float64),
                    scale=np.asarray(spec["scale"], dtype=np.float64),
                    coef=np.asarray(spec["coef"], dtype=np.float64),
                    intercept=float(spec["intercept"]),
                )
                if not (len(stages[stage].coef) == len(stages[stage].mean) == len(names)):
                    raise ValueError(f"its {stage} weights do not match its features")
            if "steer" not in data["stages"]["column"].get("pairing", {}):
                raise ValueError("its column stage is not this version's (no steering)")
            pairing = Pairing.from_json(data["stages"]["column"]["pairing"])
            column = ColumnStage(stages["column"], pairing, stages["plain_column"])
        except FileNotFoundError as err:
            raise ModelFileError(path, "it is missing", REBUILD) from err
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise ModelFileError(path, f"it cannot be read ({err})", REBUILD) from err
        return cls(stages["cheap"], stages["full"], column, dict(data.get("trained", {})))

    def save(self, path: Path) -> None:
        stages = {
            stage: {"features": list(FEATURES[stage]), **as_json(model)}
            for stage, model in (
                ("cheap", self.cheap),
                ("full", self.full),
                ("column", self.column.linear),
                ("plain_column", self.column.plain),
            )
        }
        stages["column"]["pairing"] = as_json(self.column.pairing)
        path.write_text(json.dumps({"stages": stages, "trained": self.meta}, indent=1) + "\n")


@lru_cache(maxsize=1)
def shipped() -> Selector:
    """The selector shipped in the package, loaded once."""
    return Selector.load()
