"""What a question asks for, and which sentences can hold it: pure functions, no model.

The extractive answerer uses these to prefer the sentence that states the fact asked for (a
number for "how much", a name for "which method", a finding for "what was found") over a
background sentence that merely repeats the question's words.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Wanted = Literal["quantity", "name", "finding", "application", "method", "reason", "general"]

_QUANTITY_Q = re.compile(
    r"\b(how (much|many|large|big|small|fast|often|long|accurate|well)|by (how much|what "
    r"(margin|factor|fraction|percent(age)?|amount))|what (percent(age)?|fraction|share|"
    r"proportion|speed-?up|accuracy|error|rate|ratio|number|value|score|improvement|gain|"
    r"reduction)|(speed-?up|times (faster|fewer|more|less)|fold)\b)",
    re.IGNORECASE,
)
_NAME_Q = re.compile(
    r"^\s*(?:(?:in|on|for|from|with|of|according to)\b[^?]{0,60}?,\s*)?"
    r"(which|what|name)\b(?!\s+(?:is|are|was|were|do|does|did)\s+(?:the\s+)?"
    r"(?:effect|impact|role|benefit|advantage|reason|purpose|goal|main|key|relationship)\b)",
    re.IGNORECASE,
)
_NAME_NOUN = re.compile(
    r"\b(method|model|algorithm|approach|technique|operation|operator|function|architecture|"
    r"framework|dataset|benchmark|metric|loss|objective|optimi[sz]er|estimator|procedure|"
    r"hyperparameter|parameter|network|layer|module|mechanism|strategy|scheme|tool|system|"
    r"name|called|component|distribution|regulari[sz]er|measure|property|condition|quantity)s?\b",
    re.IGNORECASE,
)
_FINDING_Q = re.compile(
    r"\b(found|find|finds|finding|findings|shown?|shows|show that|reveal\w*|conclude\w*|"
    r"discover\w*|observe\w*|result|results|outcome|turn(s|ed)? out|demonstrate\w*|"
    r"overlooked|prove[sd]?|establish\w*)\b",
    re.IGNORECASE,
)
_APPLICATION_Q = re.compile(
    r"^\s*(where|on what|on which|in what|to what|for what)\b|\b(applied|evaluated|tested|"
    r"benchmarked|validated|used (for|in|on)|applications?|domains?|tasks?)\b",
    re.IGNORECASE,
)
_REASON_Q = re.compile(r"^\s*why\b|\b(what (causes|explains)|reason|because)\b", re.IGNORECASE)
_METHOD_Q = re.compile(r"^\s*how\b|\b(what (approach|technique|method)|by what means)\b", re.I)

_LISTING = re.compile(
    r"\b(which|what|list|name|any|find|show me)\b.{0,40}\b(papers|works|studies|articles|"
    r"approaches|methods)\b|\b(papers|works|studies) (on|about|that|which|propos|stud)|"
    # "What work models X?", "Which prior research ...": the field's papers, not one paper's
    r"^\W*(what|which)\s+((prior|previous|existing|recent|other|related)\s+)?"
    r"(work|research|literature)\s+(has|have|on|about|exists|(?!(is|was|does|this|its)\b|"
    r"(question|problem|gap|area|field|direction|group|lab|goal|topic|team|community|paper|"
    r"interest)s?\b)[a-z]+s)\b",
    re.IGNORECASE,
)
_COMPARISON = re.compile(
    r"\b(compare[sd]?|comparison|contrast|differ(s|ence|ences)?|versus|vs\.?)\b", re.IGNORECASE
)
_SIDES = re.compile(
    r"\s+(?:and|versus|vs\.?|compared (?:to|with)|with|from|against|or)\s+", re.IGNORECASE
)

# --- what a sentence holds -------------------------------------------------------------------
NUMBER = re.compile(
    r"(?<![\w.-])(?:\d+(?:[.,]\d+)*)(?:\s?%|\s?x\b|\u00d7|-fold|\s?times\b| percent\b|[kKMB]\b)?"
    r"(?![\w-])"
)
_UNIT_NUMBER = re.compile(
    r"(?<![\w-])\d+(?:\.\d+)?\s?(?:%|x\b|\u00d7|-fold|times\b|percent\b)|(?<![\w.-])\d+\.\d+"
    r"|\b(twice|double[sd]?|half|halve[sd]?|triple[sd]?|an order of magnitude)\b"
)
_YEARISH = re.compile(r"^(19[5-9]\d|20\d\d)$")
NAME = re.compile(r"\b(?:[A-Z][a-z]+[A-Z][\w-]*|[A-Z]{2,}[\w-]*[A-Za-z0-9]|[A-Z][a-z]*-\d[\w-]*)\b")
_WE = r"we (?:(?:\w+ly|also|instead|further|then|here|now|thus|first) )?"
NAMING = re.compile(
    rf"\b({_WE}(?:propose|introduce|present|develop|devise|design|call|name|term|dub|coin)\w*|"
    r"called|named|dubbed|termed|coined|referred to as|known as)\b",
    re.IGNORECASE,
)
FINDING = re.compile(
    r"\b(we (?:also |further |then |empirically |theoretically )?(?:find|found|show|showed|"
    r"demonstrate|observe|reveal|discover|prove|establish|identify|conclude|confirm)\w*|"
    r"(?:results?|experiments?|analysis|evaluations?|findings?) (?:show|suggest|indicate|"
    r"demonstrate|reveal|confirm)\w*|surprisingly|turns out|leads? to|outperform\w*|"
    r"improv\w+|achiev\w+|reduc\w+|significantly)\b",
    re.IGNORECASE,
)
APPLICATION = re.compile(
    r"\b(experiments? (?:on|with)|evaluat\w+ (?:on|in)|appl(?:y|ied|ication\w*) (?:to|in|on)|"
    r"benchmarks?|datasets?|tasks? such as|domains?|including|e\.g\.|such as|real-world)\b",
    re.IGNORECASE,
)
METHOD = re.compile(
    rf"\b({_WE}(?:propose|introduce|present|develop|design|leverage|formulate|devise)\w*|"
    r"(?:our|the proposed|this) (?:method|approach|framework|algorithm|model)|based (?:on|around)"
    r"|consists? of|by (?:formulating|introducing|using|leveraging|combining|learning))\b",
    re.IGNORECASE,
)
REASON = re.compile(r"\b(because|due to|since|as a result|caused by|explain\w*|owing to)\b", re.I)
BACKGROUND = re.compile(
    r"\b(ha(?:s|ve) (?:become|been|gained|attracted|emerged|shown)|recent(?:ly)?|widely|"
    r"popular|increasingly|remains? (?:a |an )?(?:open|challenging|unclear)|is (?:a|an) "
    r"(?:fundamental|important|central|key)|plays? (?:a|an) \w+ role|however, (?:most|many|"
    r"existing|current)|existing (?:methods|approaches|work))\b",
    re.IGNORECASE,
)


def wanted(question: str) -> list[Wanted]:
    """The kinds of answer the question asks for, the main one first ("which hyperparameter
    was found ...?" asks for a name and a finding)."""
    kinds: list[Wanted] = []
    head = " ".join(question.split()[:4])
    if _NAME_Q.search(question) and _NAME_NOUN.search(head):
        kinds.append("name")  # "which optimizer gets a twofold speed-up ...?" asks for a name
    if _QUANTITY_Q.search(question):
        kinds.append("quantity")
    if _REASON_Q.search(question):
        kinds.append("reason")
    if _NAME_Q.search(question) and _NAME_NOUN.search(question):
        kinds.append("name")
    if _FINDING_Q.search(question):
        kinds.append("finding")
    if _APPLICATION_Q.search(question):
        kinds.append("application")
    if _METHOD_Q.search(question):
        kinds.append("method")
    return list(dict.fromkeys(kinds)) or ["general"]


_COUNT = re.compile(
    r"\b(how many (?:papers|works|studies|articles|publications)|number of (?:papers|works|"
    r"studies|publications)|how (?:has|have|did) (?:the )?(?:work|research|interest|literature|"
    r"field|number of papers|papers|publications?)\b.{0,80}?\b(?:grow[n]?|grew|chang\w*|"
    r"evolv\w*|develop\w*|increas\w*|decreas\w*)|(?:research|publication) trends?|trends? in "
    r"(?:research|work|papers|publications) on|(?:which|what) venues?\b|where (?:is|are) "
    r"(?:work|research|papers) .{0,60}?publish\w*|(?:growth|popularity) of (?:work|research)|"
    r"papers? (?:per|by) (?:year|venue))",
    re.IGNORECASE,
)
_COUNT_WORDS = re.compile(
    r"\b(how|many|much|number|of|papers?|works?|studies|articles|publications?|research|has|"
    r"have|had|did|does|do|is|are|was|were|been|grow[n]?|grew|growing|chang\w*|evolv\w*|"
    r"develop\w*|increas\w*|decreas\w*|trends?|which|what|venues?|publish\w*|most|where|"
    r"growth|popularity|over|the|years?|time|per|by|in|on|about|there|interest|field|area|"
    r"topic|written|appeared|since|until|and|to|study|studying|studied|mention\w*|discuss\w*|cover\w*|"
    r"address\w*|focus\w*|deal\w*|uses?|used|using|propos\w*|that|who|with)\b",
    re.IGNORECASE,
)


def is_count(question: str) -> bool:
    """ "How many papers ...?", "How has work on X grown?", "Which venues publish most on X?":
    answered with counts from the metadata, not with a quote."""
    return bool(_COUNT.search(question))


def count_topic(question: str) -> str:
    """What a counting question counts: its words less the counting phrasing."""
    topic = " ".join(_COUNT_WORDS.sub(" ", question.strip(" ?.!")).split())
    return topic.strip(" ,;:-") or question


def is_listing(question: str) -> bool:
    """A question like "which papers study X?": one line per paper, not one paper's best."""
    return bool(_LISTING.search(question))


_WH = r"(?:what|which|how|why|where|when|who|whom)\b"
_PART_BREAK = re.compile(  # "..., what ...", "... and does it ...": not "..., such as X, were"
    rf"\s*(?:(?:;\s*|,?\s+(?:and|but|while)\s+)(?=(?:(?:on|in|for|with|from|by|at|to|under|"
    rf"against)\s+)?{_WH}|(?:does|do|did|is|are|was|were|can|could|has|have)\b)|,\s*(?={_WH}))",
    re.IGNORECASE,
)


def parts(question: str) -> list[str]:
    """The questions a question asks, in order: "How hard is X, and what algorithm
    approximates it?" asks two, each answered by its own sentence. One part when it asks one
    thing ("How do A and B differ?" is one question about two things)."""
    pieces = [p.strip(" ,;?") for p in _PART_BREAK.split(question.strip())]
    if len(pieces) < 2 or min(len(p.split()) for p in pieces) < 3:
        return [question]
    return pieces


def comparison_sides(question: str) -> tuple[str, str] | None:
    """The two things a comparison question sets side by side, or None."""
    if not _COMPARISON.search(question):
        return None
    body = _COMPARISON.sub(" ", question.rstrip("?. "))
    body = re.sub(
        r"^\s*(how|what|in what way|does|do|is|are|can|which)\b(\s+(is|are|does|do|the|"
        r"between|of))*\s+",
        "",
        body,
        flags=re.IGNORECASE,
    )
    parts = [p.strip(" ,") for p in _SIDES.split(body, maxsplit=1)]
    if len(parts) != 2 or min(len(p.split()) for p in parts) < 1:
        return None
    return parts[0], parts[1]


def has_quantity(sentence: str) -> int:
    """2 for a number with a unit or decimals (40%, 3.5x, 0.82), 1 for a plain count, else 0.
    Years and digits inside names (GPT-2, ResNet-50) do not count."""
    if _UNIT_NUMBER.search(sentence):
        return 2
    for m in NUMBER.finditer(sentence):
        if not _YEARISH.match(m.group(0)):
            return 1
    return 0


# "what top-1 accuracy ...", "by how many points ...": a value that only a number states ("how
# many parameters" is not one: "two parameters" answers it in words)
_MEASURE = re.compile(
    r"\b(?:what|which)\s+(?:(?:is|was|are|were)\s+)?(?:(?:the|its|their)\s+)?"
    r"(?P<measure>(?:[\w-]+\s+){0,2}?(?:accuracy|error(?: rate)?|perplexity|bleu(?: score)?|"
    r"rouge(?:-\w+)?(?: score)?|f1(?: score)?|auc|success rate|win rate|speed-?up|throughput|"
    r"compression ratio|precision|recall|m?ap|iou|psnr|ssim|fid|inception score))\b"
    r"|\bby how (?P<margin>much|many\b)",
    re.IGNORECASE,
)


_HOW_MANY = re.compile(r"\bhow many (?P<noun>(?:[\w-]+\s+){0,2}?[\w-]+s)\b", re.IGNORECASE)
_COST = re.compile(
    r"\b(?:how long (?:does|did|do) (?:[\w'-]+ ){1,8}?(?:take|need)|how (?:much|long) (?:time|"
    r"memory)|(?:what|which) (?:is|was|are) (?:the|its|their) (?:[\w-]+\s+){0,2}?(?:cost|"
    r"complexity|run-?time|running time|training time|wall-clock time|memory footprint))\b",
    re.IGNORECASE,
)
_NAMED_DETAIL = re.compile(
    r"\b(?:which|what)\s+(?:(?:[\w-]+\s+){0,3}?)(?P<noun>datasets?|data sets?|benchmarks?|"
    r"corpus|corpora|robots?|robot arms?|hardware|GPUs?)\b(?!\s+(?:sizes?|splits?|dimensions?))",
    re.IGNORECASE,
)
_NUMBER_WORDS = re.compile(
    r"\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|"
    r"thirty|fifty|hundreds?|thousands?|millions?|billions?|dozens?|single|a pair of|twice)\b",
    re.IGNORECASE,
)
_COMPLEXITY = re.compile(
    r"\bO\(|\b(?:linear|quadratic|cubic|logarithmic|polynomial|sublinear|exponential|"
    r"constant)(?:ly)?\b|\b(?:seconds|minutes|hours|days|faster|slower)\b",
    re.IGNORECASE,
)
_GLUED_NUMBER = re.compile(r"(?<![\w.-])\d+(?:\.\d+)?[A-Za-z]{1,2}\b")  # "2D", "1M", "7B"
_ORDER = re.compile(r"\b[oOΩΘ]\(|\bsqrt|√")
_DATA_CUE = re.compile(
    r"\b(?:datasets?|data sets?|benchmarks?|corpus|corpora|experiments?|evaluat\w*|tested|"
    r"validated|results? on|applied to|real[- ]world|robots?|arms?|hardware|GPUs?|platforms?|"
    r"collected|recorded|images? from|reviews|forums)\b",
    re.IGNORECASE,
)
_MID_NAME = re.compile(r"(?<=[\w,;:()] )(?:[A-Z][\w-]*[A-Z0-9][\w-]*|[A-Z][a-z]{2,}[\w-]*)")


@dataclass(frozen=True)
class Detail:
    """A detail a question asks of one paper that only some sentences can state: ``what`` as
    the answer names it ("its top-1 accuracy"), ``needs`` what a stating sentence holds."""

    what: str
    needs: Literal["number", "cost", "name"]
    word: str = ""  # a number states it only next to this word ("accuracy"), or with a unit


def asked_detail(question: str) -> Detail | None:
    """The detail a question asks for that a paper's abstract may simply not state: a value
    only a number gives ("what top-1 accuracy", "by how much", "how many arms"), a cost ("how
    long does it take"), or a named dataset, benchmark or robot ("which dataset ..."). None
    for what any sentence may answer in words (how, why, which approach)."""
    if m := _MEASURE.search(question):
        if not m.group("measure"):
            return Detail("the margin", "number")
        return Detail(f"its {m.group('measure')}", "number", m.group("measure").split()[-1])
    if re.search(r"\bhow accurate(?:ly)?\b", question, re.IGNORECASE):
        return Detail("how accurate it is", "number")
    if m := _HOW_MANY.search(question):
        noun = m.group("noun")
        return Detail(f"the number of {noun}", "number")
    if m := _COST.search(question):
        return Detail("its cost in time or memory", "cost")
    if m := _NAMED_DETAIL.search(question):
        noun = m.group("noun").lower()
        used = "was evaluated on" if noun[:3] in ("dat", "ben", "cor") else "used"
        return Detail(f"which {noun} it {used}", "name")
    return None


def states(detail: Detail, sentences: list[str], asked: str) -> bool:
    """Whether one of ``sentences`` can state ``detail``: a number, a cost, or a name that
    ``asked`` (the question, and the paper's title) does not hold, in a sentence about data,
    experiments or hardware."""
    if detail.needs == "name":
        known = {w.casefold() for w in re.findall(r"[\w-]+", asked)}
        return any(
            n.group(0).casefold() not in known
            for sentence in sentences
            if _DATA_CUE.search(sentence)
            for n in _MID_NAME.finditer(sentence)
        )
    words = _NUMBER_WORDS if detail.needs == "number" else _COMPLEXITY
    for sentence in sentences:  # "o(k) items", "2D" and "linear time" answer too
        if detail.word and detail.word.casefold() not in sentence.casefold():
            if has_quantity(sentence) == 2:  # "76.1% on ImageNet" states an accuracy
                return True
        elif (
            has_quantity(sentence)
            or _GLUED_NUMBER.search(sentence)
            or _ORDER.search(sentence)
            or words.search(sentence)
        ):
            return True
    return False


def mentions(text: str, name: str) -> bool:
    """Whether ``text`` names ``name`` (as a word, case-insensitive: "i-RevNet", "DASHA"), or
    spells out the acronym it is ("Markov decision process" for "MDP")."""
    if re.search(rf"(?<![\w-]){re.escape(name)}s?(?![\w-])", text, re.IGNORECASE) is not None:
        return True
    letters = name[:-1] if name.endswith("s") and name[:-1].isupper() else name
    if not (letters.isupper() and letters.isalpha() and 2 <= len(letters) <= 6):
        return False
    spelled = r"[\s-]+".join(rf"{c}[a-z]{{2,}}" for c in letters)
    return re.search(rf"\b{spelled}", text, re.IGNORECASE) is not None


_TITLED = re.compile(  # "Momentum Screening", "Variational Bi-LSTM"
    r"(?<=[a-z,;:] )[A-Z][a-z]+(?:[ -](?:[A-Z][a-z]+|[A-Z]{2,}[A-Za-z0-9]*))+(?![\w-])"
)


def named_things(question: str) -> list[str]:
    """The things a question names (not the measure it asks for: "how many GPUs"), most
    specific form first: the whole hyphenated token
    ("i-RevNet", "Bi-LSTM") before the name inside it ("RevNet", "LSTM"), and names written
    as capitalised words inside the sentence ("Momentum Screening", "Penn Treebank")."""
    question = _MEASURE.sub(" ", question)
    found: list[str] = [m.group(0) for m in _TITLED.finditer(question)]
    for m in NAME.finditer(question):
        if len(m.group(0)) < 3:
            continue
        start = m.start()
        while start > 0 and (question[start - 1].isalnum() or question[start - 1] == "-"):
            start -= 1
        end = m.end()
        while end < len(question) and (question[end].isalnum() or question[end] == "-"):
            end += 1
        found += [question[start:end].strip("-"), m.group(0)]
    return list(dict.fromkeys(found))


_CAPITALISED = re.compile(r"(?<=[\w,;:)] )[A-Z][a-z]{3,}(?:-[A-Za-z0-9]+)*(?![\w-])")
_HYPHEN_NAME = re.compile(r"(?<![\w-])[A-Z][a-z]+-[A-Z][A-Za-z0-9]*(?![\w-])")  # "Veridian-Q"
_DESCRIPTIVE = re.compile(r"-(?:based|like|style|type|driven|free|aware|wise)$", re.IGNORECASE)


def name_candidates(question: str) -> tuple[list[str], list[str]]:
    """What a question may name that the index must hold for it to be answered: ``names``
    (method, model, dataset names: "Quokka-SGD", "VelaNet", "Veridian-Q"), each to be
    mentioned somewhere in some spelling; and ``words``, capitalised words inside the sentence
    ("the Glimmerbandit algorithm", "Bramble attention") and the words of titled phrases,
    which name something new only when the index has never seen the word at all. "X-based"
    describes; only X is a name."""
    strict = [_DESCRIPTIVE.sub("", n) for n in named_things(question)]
    strict += [m.group(0) for m in _HYPHEN_NAME.finditer(question)]
    loose = [m.group(0) for m in _CAPITALISED.finditer(question)]
    titled = {m.group(0) for m in _TITLED.finditer(question)}
    phrases = {t for t in titled if " " in t}  # "Penn Treebank" may be written otherwise
    strict = [n for n in dict.fromkeys(strict) if n not in phrases and len(n) >= 3]
    loose += [w for phrase in phrases for w in re.split(r"[ -]", phrase) if len(w) >= 4]
    return strict, list(dict.fromkeys(w for w in loose if w not in strict))


def names(text: str) -> set[str]:
    """Name-like tokens: CamelCase, acronyms, hyphenated versions (DecDTW, DASHA, GPT-4)."""
    return {m.group(0) for m in NAME.finditer(text) if len(m.group(0)) >= 3}


def _acronym_of(name: str, text: str) -> bool:
    """True when ``name`` is the initials of consecutive words of ``text`` (IRM for
    "invariant risk minimization")."""
    letters = name.casefold().rstrip("s")
    initials = "".join(w[0] for w in re.findall(r"[A-Za-z][\w-]*", text)).casefold()
    return len(letters) >= 2 and letters.isalpha() and letters in initials


def fit(kinds: list[Wanted], question: str, sentence: str) -> float:
    """How well the sentence's shape fits what the question asks for, from 0 to 1: the best
    fit over the kinds asked for."""
    return max(_fit(kind, question, sentence) for kind in kinds)


def _fit(kind: Wanted, question: str, sentence: str) -> float:
    if kind == "quantity":
        return has_quantity(sentence) / 2
    if kind == "name":
        asked = {n.casefold() for n in names(question)}
        new = {n for n in names(sentence) if n.casefold() not in asked}
        new = {n for n in new if not _acronym_of(n, question)}
        if new:
            return 1.0 if NAMING.search(sentence) else 0.7
        return 0.5 if NAMING.search(sentence) else 0.0
    pattern = {
        "finding": FINDING,
        "application": APPLICATION,
        "method": METHOD,
        "reason": REASON,
    }.get(kind)
    return 1.0 if pattern is not None and pattern.search(sentence) else 0.0


def is_background(sentence: str) -> bool:
    return bool(BACKGROUND.search(sentence))
