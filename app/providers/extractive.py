"""The offline provider: no generative model. It answers with the sentences of the retrieved
abstracts that state what the question asks for, framed in the third person with the paper
named ("DecDTW [1] proposes ...", "One paper [2] reports that ..."), each sentence cited.

Quotes stay exact; only the frame (the paper's name, "reports that", "it also") and the
person of the authors' pronouns ("we" -> "they") are the answerer's words.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np

from app.providers.base import Provider, Reply
from app.providers.wording import CANNOT_ANSWER, defuse, not_stated, subject
from app.query import question as q
from app.query.record import Query
from core.models import Source
from core.text import FUNCTION_WORDS, sentence_spans
from core.tokens import words
from ingest.embed import Embedder

CANDIDATE_PAPERS = 3
MAX_SENTENCES = 3  # and so at most 3 papers an answer
MAX_EMBEDDED = 9  # sentences embedded per question: the costly step
OWN_PLACES = 6  # of which the most relevant paper may take this many
FIT_WEIGHT = 0.2  # a sentence of the asked-for shape (a number for "how much") gains this
SECOND_GAP = 0.2  # a second sentence of the best paper joins when this close to the best
OTHER_GAP = 0.08  # ...and a sentence of another paper, when this close
LISTED_SHARE = 0.75  # a listing lists the papers with this share of the best one's relevance


@dataclass
class Candidate:
    source: Source
    sentence: str
    position: int
    score: float = 0.0
    vector: np.ndarray | None = None  # the sentence's embedding, once it is embedded
    parts: dict[int, float] = field(default_factory=dict)  # cheap score for each part asked

    @property
    def reach(self) -> float:
        """What the shortlist ranks by: the best cheap score for the question or any part."""
        return max([self.score, *self.parts.values()])


class ExtractiveProvider(Provider):
    name = "extractive"
    model = None

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder

    def generate(self, query: Query, sources: list[Source]) -> Reply:
        """``sources`` are the relevant ones, best first (the service drops the others)."""
        return Reply(self._answer(query, sources))

    def _answer(self, query: Query, sources: list[Source]) -> Iterator[str]:
        question = query.asked
        listing = q.is_listing(question)
        split = [question] if listing else q.parts(question)
        # "what accuracy ..., and how does that compare with X?" asks two things of one paper
        sides = None if listing or len(split) > 1 else q.comparison_sides(question)
        if listing:  # a line for each paper about as relevant as the best
            best = max(s.relevance for s in sources)
            pool = [s for s in sources if s.relevance >= LISTED_SHARE * best]
        else:
            pool = sources[:CANDIDATE_PAPERS]
        about, name = ([], "") if listing or sides else _about(question, sources)
        if about:  # the question names a method or paper: it is among the sentences weighed
            pool = list({id(s): s for s in [*about[:CANDIDATE_PAPERS], *pool]}.values())
        candidates = [
            Candidate(source, defuse(source.text[s:e]), i)
            for source in pool
            for i, (s, e) in enumerate(sentence_spans(source.text))
            if len(source.text[s:e].split()) >= 4
        ]
        if not candidates:
            yield CANNOT_ANSWER
            return
        # a detail asked of one paper (the one it names, else the best found) that its
        # abstract does not state is said to be missing, not taken from another paper; a
        # many-part question is answered if any part can be
        details = [q.asked_detail(part) for part in split]
        target = about[0] if about else sources[0]
        mine = [c.sentence for c in candidates if c.source is target]
        asked_of = f"{question} {target.title}"
        if all(details) and not any(q.states(d, mine, asked_of) for d in details if d):
            what = " or ".join(dict.fromkeys(d.what for d in details if d))
            yield not_stated(target, what, name)
            return
        asked = [question] if sides else split
        scores = _word_scores(question, query.asked_words, candidates)
        for cand, score in zip(candidates, scores, strict=True):
            cand.score = score
        if len(asked) > 1:  # each part's best sentences reach the shortlist too
            for i, part in enumerate(asked):
                scores = _word_scores(part, words([part])[0], candidates)
                for cand, score in zip(candidates, scores, strict=True):
                    cand.parts[i] = score
        if about:  # ... and only what mentions it is quoted: never another paper's number
            candidates = [c for c in candidates if any(c.source is s for s in about)] or candidates
        if listing:  # one sentence a paper, for every paper shown
            limit = max(MAX_EMBEDDED, 2 * len({id(c.source) for c in candidates}))
            candidates = self._shortlist(candidates, per_paper=2, limit=limit)
        else:
            candidates = self._shortlist(candidates, per_paper=MAX_EMBEDDED)
        self._score_meaning(query.asked_vector, candidates)
        if listing:
            chosen = [max(mine, key=lambda c: c.score) for mine in _by_paper(candidates)]
        elif sides:
            chosen = self._compare(sides, candidates)
        elif len(asked) > 1:
            chosen = self._per_part(asked, candidates)
        else:
            chosen = _best_sentences(candidates)
        yield from render(chosen, listing)

    @staticmethod
    def _shortlist(
        candidates: list[Candidate], per_paper: int, limit: int = MAX_EMBEDDED
    ) -> list[Candidate]:
        """The best candidates by the cheap score, in their original order: embedding sentences
        is the costly step. Most places go to the most relevant paper, whose sentences answer
        most questions (up to ``per_paper``); the others share what is left, MAX_EMBEDDED in
        all. The cheap score misses a sentence that says the answer in other words
        ("DTW layer" for "dynamic time warping"), so the best paper's sentences all get in."""
        top = max(candidates, key=lambda c: c.source.score).source
        ranked = sorted(range(len(candidates)), key=lambda i: -candidates[i].reach)
        alone = all(c.source is top for c in candidates)  # a question about one named paper
        own_limit = min(per_paper, limit if alone else OWN_PLACES)
        keep = [i for i in ranked if candidates[i].source is top][:own_limit]
        others_limit = limit - own_limit
        taken: dict[int, int] = {}
        for i in ranked:
            paper = id(candidates[i].source)
            if candidates[i].source is top or taken.get(paper, 0) >= per_paper:
                continue
            if sum(taken.values()) >= others_limit or len(keep) >= limit:
                break
            taken[paper] = taken.get(paper, 0) + 1
            keep.append(i)
        return [candidates[i] for i in sorted(keep)]

    def _score_meaning(self, question: np.ndarray, candidates: list[Candidate]) -> None:
        """Adds meaning: the embedding similarity of each sentence to the question (its
        vector). The sentence vectors are kept for parts and comparisons, matched against each."""
        vectors = np.asarray(
            self.embedder.embed_documents([c.sentence for c in candidates]), dtype=np.float32
        )
        for cand, vector in zip(candidates, vectors, strict=True):
            cand.vector = vector
        for cand, sim in zip(candidates, self._similarity(question, candidates), strict=True):
            cand.score += float(sim)

    def _per_part(self, asked: list[str], candidates: list[Candidate]) -> list[Candidate]:
        """A sentence for each part of a many-part question, from the one paper that answers
        the parts best together (the sum of its best score for each); a part whose best
        sentence is already chosen takes its next best, so each part adds a sentence."""
        scores = np.array(
            [
                [c.parts[i] for c in candidates] + self._similarity(part, candidates)
                for i, part in enumerate(asked)
            ]
        )
        papers = _by_paper(candidates)
        at = {id(c): j for j, c in enumerate(candidates)}

        def fitness(paper: list[Candidate]) -> float:
            return float(sum(max(scores[i, at[id(c)]] for c in paper) for i in range(len(asked))))

        paper = max(papers, key=fitness)
        chosen: list[Candidate] = []
        for i in range(len(asked)):
            order = sorted(paper, key=lambda c: -scores[i, at[id(c)]])
            pick = next((c for c in order if c not in chosen), None)
            if pick is not None and len(chosen) < MAX_SENTENCES:
                chosen.append(pick)
        # ... and what the whole question finds best in that paper fills the places left
        for cand in _best_sentences(paper):
            if len(chosen) < MAX_SENTENCES and cand not in chosen:
                chosen.append(cand)
        return chosen

    def _similarity(self, text: str | np.ndarray, candidates: list[Candidate]) -> np.ndarray:
        """Cosine similarity of ``text`` (or its vector) to each (already embedded) candidate
        sentence."""
        if isinstance(text, str):
            text = np.asarray(self.embedder.embed_query(text), dtype=np.float32)
        return np.stack([c.vector for c in candidates if c.vector is not None]) @ text

    def _compare(self, sides: tuple[str, str], candidates: list[Candidate]) -> list[Candidate]:
        """A sentence for each side of a comparison, from different papers when they differ."""
        base = np.array([c.score for c in candidates])
        chosen: list[Candidate] = []
        for side in sides:
            order = np.argsort(-(self._similarity(side, candidates) + 0.5 * base))
            taken = {id(c.source) for c in chosen}
            pick = next(
                (candidates[i] for i in order if id(candidates[i].source) not in taken), None
            )
            if pick is not None:
                chosen.append(pick)
        return chosen or _best_sentences(candidates)


def _word_scores(question: str, asked: Iterable[str], candidates: list[Candidate]) -> list[float]:
    """The cheap part of the score: the question's words (``asked``, its search words) the
    sentence shares, weighted by how few candidate sentences share them ("chronically
    overlooked" says more than the topic words every sentence repeats), the words it adds,
    whether it has the shape of the answer, and how relevant its paper is."""
    kinds = q.wanted(question)
    q_terms = set(asked)
    terms = [set(t) for t in words([c.sentence for c in candidates])]
    df = {t: sum(t in mine for mine in terms) for t in q_terms}
    weight = {t: math.log(1 + len(terms) / n) for t, n in df.items() if n}
    total = sum(weight.values()) or 1.0
    scores = []
    for cand, mine in zip(candidates, terms, strict=True):
        overlap = sum(w for t, w in weight.items() if t in mine) / total
        novelty = len(mine - q_terms) / len(mine) if mine else 0.0
        score = 0.25 * overlap + 0.25 * cand.source.score + 0.05 * novelty
        score += FIT_WEIGHT * q.fit(kinds, question, cand.sentence)
        if kinds != ["general"] and q.is_background(cand.sentence):
            score -= 0.05
        scores.append(score)
    return scores


def _about(question: str, sources: list[Source]) -> tuple[list[Source], str]:
    """The sources that mention what the question names, best first, and that name: of the
    things it names (a method, a model, a dataset), the one the fewest sources mention.
    ([], "") when it names nothing they mention."""
    found = []
    for name in q.named_things(question):
        hits = [s for s in sources if q.mentions(f"{s.title}\n{s.text}", name)]
        # "... on Penn Treebank", "... in MuJoCo": a dataset the thing asked about is run on
        where = re.search(
            rf"\b(?:on|in|for|from|using)\s+(?:the\s+)?{re.escape(name)}", question, re.I
        )
        if hits:
            found.append((where is not None, len(hits), hits, name))
    if not found:
        return [], ""
    _, _, hits, name = min(found, key=lambda f: (f[0], f[1]))
    return hits, name


def _by_paper(candidates: list[Candidate]) -> list[list[Candidate]]:
    """The candidates grouped by paper, papers in order of their first candidate."""
    groups: dict[int, list[Candidate]] = {}
    for cand in candidates:
        groups.setdefault(id(cand.source), []).append(cand)
    return list(groups.values())


def _best_sentences(candidates: list[Candidate]) -> list[Candidate]:
    """The best sentence and the next best of its paper (the two best sentences of the right
    abstract hold the answer far more often than one), and a third from any paper when close:
    at most MAX_SENTENCES."""
    ranked = sorted(candidates, key=lambda c: -c.score)
    best = ranked[0]
    chosen = [best, *[c for c in ranked[1:] if c.source is best.source][:1]]
    for cand in ranked[1:]:
        if len(chosen) >= MAX_SENTENCES:
            break
        gap = SECOND_GAP if cand.source is best.source else OTHER_GAP
        if cand not in chosen and cand.score >= best.score - gap:
            chosen.append(cand)
    return chosen


# --- saying it as an answer ---------------------------------------------------------------------

_WE_VERB = re.compile(
    r"^(?P<lead>(?:[A-Z][^,;:]{0,60},\s*|Here\s+|Herein\s+)?)"
    r"(?P<we>we|We|[Tt]his (?:paper|work|study|article))\s+"
    r"(?P<adv>(?:(?:also|further|then|first|next|now|additionally|finally|formally|"
    r"empirically|theoretically|experimentally|carefully|systematically|thus|therefore|"
    r"here|instead|specifically|rigorously|extensively|thoroughly)\s+)*)"
    r"(?P<verb>[a-z]+)\b"
)
_SELF_LEAD = re.compile(r"^(?:in this (?:paper|work|study|article)|here|herein),?\s*$", re.I)
_CONNECTIVE = re.compile(
    r"^(?:however|furthermore|moreover|additionally|in addition|specifically|finally|also|"
    r"in particular|notably|importantly|overall|lastly|first|second|third|then|next|thus|"
    r"therefore|consequently|further|besides|in contrast|instead|meanwhile|hence|yet),\s+|"
    r"^(?:but|nevertheless|nonetheless|on the other hand|to this end|in this regard),?\s+",
    re.IGNORECASE,
)
_RESEARCH_VERBS = [
    "find",
    "show",
    "demonstrate",
    "analyze",
    "analyse",
    "propose",
    "introduce",
    "evaluate",
    "prove",
    "provide",
    "study",
    "develop",
    "present",
    "derive",
    "establish",
    "observe",
    "validate",
    "verify",
    "compare",
    "discuss",
    "achieve",
    "obtain",
    "apply",
    "test",
    "identify",
    "explore",
    "investigate",
    "extend",
    "design",
    "characterize",
    "illustrate",
    "conduct",
    "use",
    "train",
    "report",
    "release",
    "argue",
    "outperform",
    "improve",
    "reduce",
    "assess",
    "examine",
    "leverage",
    "formulate",
    "construct",
    "offer",
    "highlight",
    "reveal",
    "discover",
    "describe",
    "consider",
]
_AND_VERB = re.compile(r"\b(and|or|then)\s+(" + "|".join(_RESEARCH_VERBS) + r")(?![\w-])")
_PRONOUNS = {"we": "they", "We": "They", "our": "their", "Our": "Their", "us": "them",
             "ours": "theirs", "ourselves": "themselves"}  # fmt: skip
_PRONOUN = re.compile(r"\b(we|We|our|Our|us|ours|ourselves)\b")
_KEEP_CAPITAL = re.compile(r"^[A-Z][a-z]*(?:ian|ean|ov|tz|ier|ann|in|er)\b")
_IRREGULAR = {"are": "is", "have": "has", "were": "was", "do": "does", "go": "goes"}
_MODALS = {"can", "could", "will", "would", "may", "might", "must", "shall", "should", "also",
           "then", "did", "had", "was", "first", "further", "proposed", "introduced",
           "presented", "showed", "found", "studied", "developed", "demonstrated", "observed",
           "obtained", "derived", "used", "provided"}  # fmt: skip


def third_person(verb: str) -> str:
    """propose -> proposes, study -> studies, address -> addresses, are -> is."""
    if verb in _IRREGULAR:
        return _IRREGULAR[verb]
    if verb in _MODALS or verb.endswith("ed"):
        return verb
    if verb.endswith("y") and len(verb) > 2 and verb[-2] not in "aeiou":
        return verb[:-1] + "ies"
    if verb.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    return verb + "s"


def _voice(text: str) -> str:
    """The authors' pronouns, as a reader speaks of them: we -> they, our -> their."""
    return _PRONOUN.sub(lambda m: _PRONOUNS[m.group(1)], text)


def frame(sentence: str, who: str, marker: int, first: bool, context: str = "") -> str:
    """One quoted sentence in the third person, naming its paper on first mention. A capital
    that starts the sentence is lowered after "reports that" unless the word is a name: part
    of a name that follows, or written with a capital inside a sentence of ``context``."""
    body = _CONNECTIVE.sub("", sentence.strip())  # "However, ..." leans on a sentence not shown
    end = body[-1] if body[-1] in ".!?" else "."
    body = body[:-1].rstrip() if body[-1] in ".!?" else body
    cite = f"[{marker}]"
    if m := _WE_VERB.match(body):
        verb, rest = m.group("verb"), _voice(body[m.end() :])
        if m.group("we").lower() == "we":  # "This paper addresses" is third person already
            verb = third_person(verb)
            rest = _AND_VERB.sub(lambda v: f"{v.group(1)} {third_person(v.group(2))}", rest)
        lead, adv = _voice(m.group("lead")), m.group("adv")
        if _SELF_LEAD.match(lead):
            lead = ""  # "In this paper, we propose" -> "DecDTW [1] proposes"
        if first:
            name = who[0].lower() + who[1:] if lead and who.endswith(" paper") else who
            return f"{_upper(lead)}{name} {cite} {adv}{verb}{rest}{end}"
        return f"{_upper(lead)}{'it' if lead else 'It'} {adv}{verb}{rest} {cite}{end}"
    body = _voice(body)
    first_word, _, after = body.partition(" ")
    first_word = first_word.rstrip(",;:")
    closed = first_word.casefold() in FUNCTION_WORDS and first_word != "I"  # "On ImageNet"
    if closed or (
        first_word.istitle()
        and first_word.isalpha()
        and not _KEEP_CAPITAL.match(first_word)
        and not after[:1].isupper()  # "Simplicial Embeddings (SEM) are" is a name
        and not re.search(rf"[a-z,;:] {re.escape(first_word)}\b", context)  # "Sophia"
    ):
        body = body[0].lower() + body[1:]
    if first:
        return f"{who} {cite} reports that {body}{end}"
    return f"It also reports that {body} {cite}{end}"


def _upper(lead: str) -> str:
    return lead[:1].upper() + lead[1:]


def render(chosen: list[Candidate], listing: bool) -> Iterator[str]:
    """The chosen sentences as answer text: grouped by paper (in order of first choice), each
    paper's sentences in their order in the abstract; a listing gets one line per paper."""
    for n, mine in enumerate(_by_paper(chosen)):
        mine.sort(key=lambda c: c.position)
        who = subject(mine[0].source, n)
        for i, cand in enumerate(mine):
            text = frame(cand.sentence, who, cand.source.marker, i == 0, cand.source.text)
            if listing:
                yield f"{'' if n == 0 else chr(10)}- {text}"
            else:
                yield f"{'' if n == 0 and i == 0 else ' '}{text}"
