"""The offline provider: no generative model. It answers with the sentences of the retrieved
abstracts that state what the question asks for, framed in the third person with the paper
named ("DecDTW [1] proposes ...", "One paper [2] reports that ..."), each sentence cited.

Quotes stay exact; only the frame (the paper's name, "reports that", "it also") and the
person of the authors' pronouns ("we" -> "they") are the answerer's words.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from app.providers.base import Provider, Reply
from app.providers.selector import Selector, Sentence, cheap_features, full_features, shipped
from app.providers.wording import CANNOT_ANSWER, defuse, not_stated, subject
from app.query import question as q
from app.query.record import Query
from core.models import Source
from core.text import FUNCTION_WORDS, sentence_spans
from core.tokens import words
from ingest.embed import Embedder

CANDIDATE_PAPERS = 3
MAX_SENTENCES = 3  # and so at most 3 papers an answer
# A question of n parts quotes a sentence for each part and one more, the paper's best for the
# whole question: a lead clause is often read as a part of its own (docs/benchmarks.md)
MAX_PART_SENTENCES = 4
MAX_EMBEDDED = 14  # sentences embedded per question (the costly step), chosen by the cheap model
LISTED_SHARE = 0.75  # a listing lists the papers with this share of the best one's relevance
LIKELY = 0.5  # another paper's sentence with this chance may take a place after the best


@dataclass
class Candidate:
    source: Source
    sentence: str
    position: int
    sentences: int  # in its abstract
    paper: int  # its paper's place among the papers in play, best first
    named: bool = False  # its paper names what the question names
    score: float = 0.0  # the selector's chance that it states what the whole question asks
    parts: dict[int, float] = field(default_factory=dict)  # ... and each part or side asked

    def described(self) -> Sentence:
        return Sentence(
            self.sentence,
            self.paper,
            self.position,
            self.sentences,
            self.source.score,
            self.source.lexical,
            self.named,
        )


@dataclass
class Reading:
    """What the answerer makes of a question and its sources before choosing: the kind of
    answer, the papers in play and their candidate sentences."""

    question: str
    listing: bool
    asked: list[str]  # the parts (or the sides of a comparison), each answered on its own
    sides: tuple[str, str] | None
    about: list[Source]  # the sources that mention what the question names
    name: str
    candidates: list[Candidate]


class ExtractiveProvider(Provider):
    name = "extractive"
    model = None

    def __init__(self, embedder: Embedder, selector: Selector | None = None) -> None:
        self.embedder = embedder
        self._selector = selector

    @property
    def selector(self) -> Selector:
        if self._selector is None:
            self._selector = shipped()
        return self._selector

    def generate(self, query: Query, sources: list[Source]) -> Reply:
        """``sources`` are the relevant ones, best first (the service drops the others)."""
        return Reply(self._answer(query, sources))

    def read(self, query: Query, sources: list[Source]) -> Reading:
        """The kind of answer asked for, the papers in play and their candidate sentences."""
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
        named = {id(s) for s in about}
        candidates = []
        for rank, source in enumerate(pool):
            spans = sentence_spans(source.text)
            for i, (s, e) in enumerate(spans):
                if len(source.text[s:e].split()) >= 4:
                    sentence = defuse(source.text[s:e])
                    candidates.append(
                        Candidate(source, sentence, i, len(spans), rank, id(source) in named)
                    )
        asked = list(sides) if sides else split
        return Reading(question, listing, asked, sides, about, name, candidates)

    def features(self, query: Query, reading: Reading) -> np.ndarray:
        """The full features of every candidate for the whole question (the cheap ones lead
        them): what training reads, with every sentence embedded."""
        cands = [c.described() for c in reading.candidates]
        cheap = cheap_features(reading.question, query.asked_words, cands)
        cosine = self._embed(reading.candidates) @ self._vector(query, reading, reading.question)
        return full_features(cheap, cosine, cands)

    def evidence(
        self, query: Query, sources: list[Source], per_source: int = 2, total: int = 4
    ) -> dict[int, list[str]]:
        """The sentences most likely to answer, by source marker (at most ``per_source`` a
        source, ``total`` in all, best first): what a generative model is shown first."""
        if not sources:
            return {}
        reading = self.read(query, sources)
        if not reading.candidates:
            return {}
        scored = self._score(query, reading, reading.candidates, [reading.question])
        marked: dict[int, list[str]] = {}
        for cand in sorted(scored, key=lambda c: -c.score)[:total]:
            mine = marked.setdefault(cand.source.marker, [])
            if len(mine) < per_source:
                mine.append(cand.sentence)
        return marked

    def _answer(self, query: Query, sources: list[Source]) -> Iterator[str]:
        reading = self.read(query, sources)
        candidates = reading.candidates
        if not candidates:
            yield CANNOT_ANSWER
            return
        question, about = reading.question, reading.about
        # a detail asked of one paper (the one it names, else the best found) that its
        # abstract does not state is said to be missing, not taken from another paper; a
        # many-part question is answered if any part can be
        details = [q.asked_detail(part) for part in reading.asked]
        target = about[0] if about else sources[0]
        mine = [c.sentence for c in candidates if c.source is target]
        asked_of = f"{question} {target.title}"
        if all(details) and not any(q.states(d, mine, asked_of) for d in details if d):
            what = " or ".join(dict.fromkeys(d.what for d in details if d))
            yield not_stated(target, what, reading.name)
            return
        if about:  # ... and only what mentions it is quoted: never another paper's number
            candidates = [c for c in candidates if c.named] or candidates
        texts = [question] if len(reading.asked) == 1 else [question, *reading.asked]
        candidates = self._score(query, reading, candidates, texts)
        if reading.listing:
            chosen = [max(mine, key=lambda c: c.score) for mine in _by_paper(candidates)]
        elif reading.sides:
            chosen = _compare(candidates)
        elif len(reading.asked) > 1:
            chosen = _per_part(len(reading.asked), candidates)
        else:
            chosen = _best_sentences(candidates)
        yield from render(chosen, reading.listing)

    def _score(
        self, query: Query, reading: Reading, candidates: list[Candidate], texts: list[str]
    ) -> list[Candidate]:
        """The selector's chance, for each text asked (the question, then its parts or sides),
        of the candidates worth embedding: the cheap model's best for any text, two a paper
        for a listing, MAX_EMBEDDED in all otherwise."""
        cands = [c.described() for c in candidates]
        cheap = [
            cheap_features(t, query.asked_words if n == 0 else words([t])[0], cands)
            for n, t in enumerate(texts)
        ]
        reach = np.max([self.selector.cheap.probability(x) for x in cheap], axis=0)
        order = [int(i) for i in np.argsort(-reach, kind="stable")]
        if reading.listing:
            keep = [i for p in {c.paper for c in candidates} for i in _of(p, order, cands)[:2]]
        else:
            keep = order[:MAX_EMBEDDED]
        keep.sort()
        short = [candidates[i] for i in keep]
        vectors = self._embed(short)
        for n, (text, x) in enumerate(zip(texts, cheap, strict=True)):
            cosine = vectors @ self._vector(query, reading, text)
            full = full_features(x[keep], cosine, [cands[i] for i in keep])
            for cand, p in zip(short, self.selector.full.probability(full), strict=True):
                if n == 0:
                    cand.score = float(p)
                else:
                    cand.parts[n - 1] = float(p)
        return short

    def _embed(self, candidates: list[Candidate]) -> np.ndarray:
        return self.embedder.embed_sentences([c.sentence for c in candidates])

    def _vector(self, query: Query, reading: Reading, text: str) -> np.ndarray:
        if text == reading.question:
            return np.asarray(query.asked_vector, dtype=np.float32)
        return np.asarray(self.embedder.embed_query(text), dtype=np.float32)


def _of(paper: int, order: list[int], cands: list[Sentence]) -> list[int]:
    return [i for i in order if cands[i].paper == paper]


def _per_part(parts: int, candidates: list[Candidate]) -> list[Candidate]:
    """A sentence for each part of a many-part question, from the one paper that answers the
    parts best together (the sum of its best chance for each); a part whose best sentence is
    already chosen takes its next best, so each part adds a sentence. Then that paper's best
    sentence for the whole question not yet chosen: n + 1 sentences, at most
    MAX_PART_SENTENCES (a fifth part and later get none)."""

    def fitness(paper: list[Candidate]) -> float:
        return sum(max(c.parts[i] for c in paper) for i in range(parts))

    paper = max(_by_paper(candidates), key=fitness)
    places = min(parts + 1, MAX_PART_SENTENCES)
    chosen: list[Candidate] = []
    for i in range(parts):
        order = sorted(paper, key=lambda c: -c.parts[i])
        pick = next((c for c in order if c not in chosen), None)
        if pick is not None and len(chosen) < places:
            chosen.append(pick)
    # ... and what the whole question finds best in that paper fills the places left
    for cand in sorted(paper, key=lambda c: -c.score):
        if len(chosen) < places and cand not in chosen:
            chosen.append(cand)
    return chosen


def _compare(candidates: list[Candidate]) -> list[Candidate]:
    """A sentence for each side of a comparison, from different papers when they differ."""
    chosen: list[Candidate] = []
    for side in range(2):
        order = sorted(candidates, key=lambda c: -c.parts[side])
        taken = {id(c.source) for c in chosen}
        pick = next((c for c in order if id(c.source) not in taken), None)
        if pick is not None:
            chosen.append(pick)
    return chosen or _best_sentences(candidates)


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
    """The best sentence and the next best of its paper, then the third place (the second too
    when that paper has no other) to whichever ranks higher: that paper's next best sentence, or
    another paper's that the selector finds likely to answer. At most MAX_SENTENCES. The
    selector's best two miss an asked fact for about one question in seven, and the paper's
    third often holds it (docs/benchmarks.md, "Three sentences of the answering paper")."""
    ranked = sorted(candidates, key=lambda c: -c.score)
    best = ranked[0]
    chosen = [best, *[c for c in ranked[1:] if c.source is best.source][:1]]
    for cand in ranked[1:]:
        if len(chosen) >= MAX_SENTENCES:
            break
        if cand not in chosen and (cand.source is best.source or cand.score >= LIKELY):
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
