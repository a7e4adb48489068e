"""A held-out development question set, made mechanically from a corpus (never tuned by hand).

    .venv/bin/python bench/devset.py ingest/sample --out data/eval/dev-sample.jsonl
    .venv/bin/python bench/devset.py ../shared/data/ml-abstracts.jsonl.gz --papers 300 \
        --titles 200 --invented 50 --out test-artifacts/dev-22k.jsonl

For each chosen abstract it masks one fact and asks for it, in words that are not the
sentence's own order:
- a number with a unit (40%, 3.5x, 0.82): "By how much / What value ... ?" with a handful of
  the fact sentence's content words and the paper's topic words from its first sentence;
- a name the abstract introduces ("we propose DASHA", "called DecDTW"): "What is the name of
  the method ... ?" with the words that describe it.
Background words (the topic) and the asked-for words share the question, which is the case a
background sentence wins when an answerer only counts shared words. It also writes questions
the corpus cannot answer: far from machine learning, and about invented method names set in
real context words. The fact to find is the masked text itself; gold is the paper.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from core.models import Paper  # noqa: E402
from core.text import plain_text, sentence_spans  # noqa: E402
from core.tokens import STOPWORDS  # noqa: E402
from ingest.read import read_paths  # noqa: E402

_NUMBER = re.compile(
    r"(?<![\w.,-])(\d+(?:\.\d+)?)(\s?%|\s?x\b|\u00d7|-fold|\s?times\b| percent\b)?(?![\w-])"
)
_NAME = re.compile(r"\b(?:[A-Z][a-z]+[A-Z][\w-]*|[A-Z]{2,}[\w-]*[A-Za-z0-9])\b")
_NAMING = re.compile(
    r"\b(we (?:propose|introduce|present|develop|devise|design|call|name|term|dub)|called|"
    r"named|dubbed|termed|coined)\b",
    re.IGNORECASE,
)
_FINDING = re.compile(
    r"\b(we (?:find|show|demonstrate|observe|reveal|discover)|results (?:show|suggest|indicate))",
    re.IGNORECASE,
)
_WORD = re.compile(r"[A-Za-z][A-Za-z-]{2,}")
_COMMON_NAMES = {
    "LLM", "LLMs", "CNN", "CNNs", "GNN", "GNNs", "RNN", "SGD", "SOTA", "NLP", "GPU", "GPUs",
    "MLP", "MDP", "MDPs", "PAC", "KL", "RL", "AI", "ML", "IID", "ODE", "ODEs", "PDE", "PDEs",
    "VAE", "GAN", "GANs", "DNN", "DNNs", "API", "CPU", "NP", "LSTM", "BERT", "PCA", "SVM",
}  # fmt: skip
FAR_FROM_ML = [
    "How do honeybees communicate the location of flowers to the hive?",
    "What is the best temperature for proofing sourdough bread?",
    "Who painted the ceiling of the Sistine Chapel?",
    "How long should I boil an egg for a runny yolk?",
    "What causes the northern lights?",
    "Which football club has won the most Champions League titles?",
    "How do I repot an orchid without damaging its roots?",
    "What were the main causes of the French Revolution?",
    "How is olive oil graded as extra virgin?",
    "What is the tallest mountain in Africa?",
    "How do vaccines train the immune system against measles?",
    "What grape varieties are used in Champagne?",
    "How do I fix a leaking kitchen faucet?",
    "Why do cats purr?",
    "What is the recommended tire pressure for a road bicycle?",
    "Who wrote the novel War and Peace?",
    "How are tides related to the phases of the moon?",
    "What is the plot of Shakespeare's Macbeth?",
    "How should a beginner train for a marathon?",
    "Which spices go into a traditional garam masala?",
    "How do coral reefs form in tropical seas?",
    "What is the capital city of Australia?",
    "How do I lower my cholesterol through diet?",
    "What are the rules of castling in chess?",
    "How did the Roman aqueducts carry water into cities?",
]  # fmt: skip
_SYLLABLES = ["zor", "quil", "vex", "brum", "tak", "lom", "fri", "dax", "yun", "pel", "gro", "nix"]
_KINDS = ["optimizer", "method", "model", "algorithm", "framework", "architecture", "benchmark"]


def content_words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text) if w.casefold() not in STOPWORDS and len(w) > 3]


def numeric_fact(sentence: str) -> tuple[str, str] | None:
    """The first number with a unit, or a decimal, that is not a year: (fact, unit)."""
    for m in _NUMBER.finditer(sentence):
        value, unit = m.group(1), (m.group(2) or "").strip()
        if (
            not unit
            and "." not in value
            and (len(value) < 2 or re.fullmatch(r"(19|20)\d\d", value))
        ):
            continue  # a digit or a year: too ambiguous to ask for
        return m.group(0).strip(), unit
    return None


def name_fact(sentence: str, question_words: set[str]) -> str | None:
    if not _NAMING.search(sentence):
        return None
    for m in _NAME.finditer(sentence):
        name = m.group(0)
        if name not in _COMMON_NAMES and len(name) >= 3 and name.casefold() not in question_words:
            return name
    return None


def _pick(words: list[str], n: int, rng: random.Random, avoid: str) -> list[str]:
    kept = [w for w in dict.fromkeys(words) if avoid.casefold() not in w.casefold()]
    if len(kept) > n:
        keep = sorted(rng.sample(range(len(kept)), n))
        kept = [kept[i] for i in keep]
    return kept


def questions_for(paper: Paper, rng: random.Random) -> list[dict[str, object]]:
    text = plain_text(paper.abstract)
    sentences = [text[s:e] for s, e in sentence_spans(text)]
    if len(sentences) < 3:
        return []
    topic_source = paper.title if not paper.title_derived else sentences[0]
    made: list[dict[str, object]] = []
    for i, sentence in enumerate(sentences[1:], start=1):
        if len(made) == 3:
            break
        if (found := numeric_fact(sentence)) and not any(q["type"] == "numeric" for q in made):
            fact, unit = found
            context = content_words(sentence.replace(fact, " "))
            words = _pick(context, 5, rng, fact)
            topic = _pick(content_words(topic_source), 3, rng, fact)
            wh = (
                "By how much"
                if unit in ("%", "x", "\u00d7", "-fold", "times", "percent")
                else "What"
            )
            question = f"{wh} ({' '.join(words)}), in work on {' '.join(topic)}?"
            made.append(_q(paper, f"{i}", question, [fact], "numeric"))
        elif name := name_fact(sentence, set()):
            if name in topic_source and i > 0 and not paper.title_derived:
                continue  # a title that names it gives it away
            after = sentence.split(name, 1)[1]
            words = _pick(content_words(after) or content_words(sentence), 6, rng, name)
            topic = _pick(content_words(topic_source.replace(name, " ")), 3, rng, name)
            if len(words) < 3:
                continue
            question = f"What is the name of the approach that ({' '.join(words)})"
            question += f", in work on {' '.join(topic)}?"
            made.append(_q(paper, f"{i}", question, [name], "name"))
        elif _FINDING.search(sentence) and not any(q["type"] == "finding" for q in made):
            # the fact: a word only this sentence of the abstract has
            elsewhere = {w.casefold() for j, o in enumerate(sentences) if j != i for w in
                         content_words(o)}  # fmt: skip
            own = [w for w in content_words(sentence) if w.casefold() not in elsewhere]
            if len(own) < 2:
                continue
            fact = own[len(own) // 2]
            words = _pick([w for w in content_words(sentence) if w != fact], 4, rng, fact)
            topic = _pick(content_words(topic_source), 3, rng, fact)
            question = f"What was found about ({' '.join(words)}), in work on {' '.join(topic)}?"
            made.append(_q(paper, f"{i}", question, [fact], "finding"))
    return made


def _q(paper: Paper, where: str, question: str, fact: list[str], kind: str) -> dict[str, object]:
    return {
        "id": f"{kind}-{paper.paper_id}-{where}",
        "question": question,
        "gold": [paper.paper_id],
        "facts": [fact],
        "type": kind,
    }


def invented(rng: random.Random, papers: list[Paper], n: int) -> list[dict[str, object]]:
    out = []
    for j in range(n):
        paper = rng.choice(papers)
        name = "".join(rng.sample(_SYLLABLES, 2)).upper() + f"-{rng.randint(2, 9)}"
        words = _pick(content_words(plain_text(paper.abstract)), 4, rng, name)
        question = f"What does the {name} {rng.choice(_KINDS)} achieve for {' '.join(words)}?"
        out.append(_unanswerable(f"invented-{j}", question, "invented"))
    return out


def _unanswerable(qid: str, question: str, kind: str) -> dict[str, object]:
    return {"id": qid, "question": question, "gold": [], "facts": [], "answerable": False,
            "type": kind}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--papers", type=int, default=0, help="Sample this many (0: all).")
    parser.add_argument("--invented", type=int, default=25)
    parser.add_argument(
        "--titles", type=int, default=0, help="Paper-finding questions made from this many titles."
    )
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    papers = read_paths([args.corpus]).papers
    chosen = rng.sample(papers, args.papers) if args.papers else papers
    rows: list[dict[str, object]] = []
    for paper in chosen:
        rows += questions_for(paper, rng)
    titled = [p for p in papers if not p.title_derived and len(p.title.split()) >= 3]
    for paper in rng.sample(titled, min(args.titles, len(titled))):
        question = f"Which paper is about {plain_text(paper.title).rstrip('.?!').lower()}?"
        rows.append({"id": f"find-{paper.paper_id}", "question": question,
                     "gold": [paper.paper_id], "facts": [], "type": "paper-finding"})  # fmt: skip
    rows += [_unanswerable(f"far-{i}", q, "far") for i, q in enumerate(FAR_FROM_ML)]
    rows += invented(rng, papers, args.invented)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    kinds = Counter(str(r["type"]) for r in rows)
    print(f"wrote {len(rows)} questions to {args.out}: {dict(kinds)}")


if __name__ == "__main__":
    main()
