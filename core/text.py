"""Text helpers every step shares: LaTeX-to-plain normalisation, sentence spans, derived titles.

The stored abstract keeps its LaTeX; `plain_text` is what is embedded, searched and displayed.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import re
import unicodedata
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

from pylatexenc import latexwalker
from pylatexenc.latex2text import (
    LatexNodes2Text,
    MacroTextSpec,
    get_default_latex_context_db,
)
from pylatexenc.macrospec import MacroSpec

# pylatexenc logs a warning for every macro it cannot expand (e.g. \frac with odd arguments);
# it still returns usable text, so those warnings are noise to the user.
logging.getLogger("pylatexenc").setLevel(logging.ERROR)

RENDER_VERSION = "4"
"""Bump when `plain_text` renders differently: the index re-renders every paper once, updating
in place what embeds the same and re-embedding what does not."""

_UNESCAPED_PERCENT = re.compile(r"(?<!\\)%")
_SPACES = re.compile(r"\s+")
# Corpora often lose the braces of \url{...}: "\urlhttps://x.org" keeps its address
_BARE_URL_MACRO = re.compile(r"\\(?:url|href)\s*(?=(?:https?|ftp)://|www\.)")
_MACRO = re.compile(r"\\([A-Za-z]+)")
_CITE_LIKE = (
    "cite", "citet", "citep", "citealp", "citealt", "citeauthor", "citeyear", "nocite",
    "ref", "eqref", "autoref", "cref", "Cref", "pageref", "label",
)  # fmt: skip


_DECLARATIONS = frozenset({  # font switches and spacing: they hold no words
    "em", "it", "bf", "tt", "rm", "sf", "sc", "sl", "cal", "up", "md", "bfseries", "itshape",
    "ttfamily", "rmfamily", "sffamily", "scshape", "upshape", "mdseries", "slshape", "normalfont",
    "small", "large", "Large", "LARGE", "tiny", "footnotesize", "scriptsize", "normalsize",
    "huge", "Huge", "displaystyle", "textstyle", "scriptstyle", "centering", "noindent", "par",
    "newline", "boldmath", "unboldmath", "relax", "protect",
})  # fmt: skip


def _arg_text(node: Any, l2tobj: LatexNodes2Text, i: int) -> str:
    args = node.nodeargd.argnlist if node.nodeargd is not None else []
    return l2tobj.nodelist_to_text([args[i]]) if i < len(args) and args[i] is not None else ""


def _url(node: Any, l2tobj: LatexNodes2Text) -> str:
    return _arg_text(node, l2tobj, 0).strip()


def _footnote(node: Any, l2tobj: LatexNodes2Text) -> str:
    # in parentheses: square brackets around text read as a citation marker to the answerer
    text = _arg_text(node, l2tobj, 1).strip() or _arg_text(node, l2tobj, 0).strip()
    return f" ({text})" if text else ""


def _href(node: Any, l2tobj: LatexNodes2Text) -> str:
    url, text = _arg_text(node, l2tobj, 0).strip(), _arg_text(node, l2tobj, 1).strip()
    return f"{text} ({url})" if text and url and text != url else text or url


def _keys(node: Any, l2tobj: LatexNodes2Text) -> str:
    args = node.nodeargd.argnlist if node.nodeargd is not None else []
    keys = ", ".join(
        t
        for a in args
        if a is not None and (t := l2tobj.nodelist_to_text([a]).strip()) and t != "*"
    )
    return f"({keys})" if keys else ""


class _Renderer(LatexNodes2Text):
    r"""pylatexenc with one rule added: a macro never erases the words it holds.

    An argument-taking macro with no text rule (\texttt, \textsf, \mbox, ...) keeps its
    arguments, where pylatexenc drops them; an unknown bare macro (``\ours``) keeps its name."""

    def macro_node_to_text(self, node: Any) -> str:
        args = [a for a in (node.nodeargd.argnlist if node.nodeargd is not None else []) if a]
        if self.latex_context.get_macro_spec(node.macroname) is not None:
            text = str(super().macro_node_to_text(node))
        elif args:
            text = "".join(self.nodelist_to_text([a]) for a in args)
        elif (
            node.macroname in _DECLARATIONS
            or node.parsing_state.s[node.pos + node.len :][:1] == "{"
        ):
            text = ""  # a font switch; or a group follows, rendered on its own
        else:
            text = str(node.macroname)
        # "\\alpha and" must not glue into one word: keep the space the macro swallowed
        if not args and text and getattr(node, "macro_post_space", ""):
            text += " "
        return text


@lru_cache(maxsize=1)
def _latex() -> tuple[_Renderer, Any, Any]:
    text_db = get_default_latex_context_db()
    text_db.add_context_category(
        "aqa-keep-words",
        macros=[
            MacroTextSpec("url", simplify_repl=_url),
            MacroTextSpec("href", simplify_repl=_href),
            MacroTextSpec("footnote", simplify_repl=_footnote),
            *(MacroTextSpec(name, simplify_repl=_keys) for name in _CITE_LIKE),
        ],
        prepend=True,
    )
    walker_db = latexwalker.get_default_latex_context_db()
    walker_db.add_context_category(
        "aqa-args",
        macros=[
            MacroSpec("href", "{{"),
            MacroSpec("url", "{"),
            *(MacroSpec(name, "*[[{") for name in _CITE_LIKE),
        ],
        prepend=True,
    )
    _index_specials(walker_db)
    renderer = _Renderer(latex_context=text_db, math_mode="text", strict_latex_spaces=False)
    return renderer, text_db, walker_db


def _index_specials(db: Any) -> None:
    """Give ``db`` the same ``test_for_specials`` answer, found faster.

    pylatexenc tries every specials sequence (``--``, ``~``, quotes...) at every character it
    reads, which is most of its time on an abstract. Only the sequences that start with the
    character at hand can match, so the same search over those alone, in the same order (first
    longest match across categories), returns the same spec. ``db`` must not change after."""
    table: dict[str, list[tuple[str, Any]]] = {}
    for category in db.category_list:
        for chars, spec in db.d[category]["specials"].items():
            if chars:
                table.setdefault(chars[0], []).append((chars, spec))

    def test_for_specials(s: str, pos: int, parsing_state: Any = None) -> Any:
        best, best_len = None, 0
        for chars, spec in table.get(s[pos : pos + 1], ()):
            if len(chars) > best_len and s.startswith(chars, pos):
                best, best_len = spec, len(chars)
        return best

    db.test_for_specials = test_for_specials


_GLUED_CITE = re.compile(r"\\(cite[A-Za-z]*)(\*?)([\w:./,-]*)")
_CITE_MACROS = sorted((m for m in _CITE_LIKE if m.startswith("cite")), key=len, reverse=True)


def _cite_braces(match: re.Match[str]) -> str:
    """ "\\citettaddy13mnir" -> "\\citet{taddy13mnir}": a citation whose braces were lost."""
    name, star, rest = match.groups()
    if name in _CITE_LIKE and not rest[:1].isalnum():
        return match.group(0)  # "\\citet{key}", "\\cite[p. 2]{key}"
    macro = next(m for m in _CITE_MACROS if name.startswith(m))
    keys = (name[len(macro) :] + rest).rstrip(",.:;")
    tail = (name[len(macro) :] + rest)[len(keys) :]
    return f"\\{macro}{star}{{{keys}}}{tail}" if keys else match.group(0)


def _unglued(text: str, text_db: Any, walker_db: Any) -> str:
    """Macros whose braces the corpus lost: "\\mathbbR" -> "\\mathbb{R}", "\\urlhttps://..."
    -> "https://...". Only names pylatexenc does not know are split, at the longest known
    one-argument macro they start with, and only when a letter or two is left over."""
    text = _BARE_URL_MACRO.sub("", text)
    text = _GLUED_CITE.sub(_cite_braces, text)

    def split(match: re.Match[str]) -> str:
        name = match.group(1)
        if walker_db.get_macro_spec(name) or text_db.get_macro_spec(name):
            return match.group(0)
        for cut in range(len(name) - 1, max(1, len(name) - 3), -1):
            spec = walker_db.get_macro_spec(name[:cut])
            if spec is not None and getattr(spec.args_parser, "argspec", "") in ("{", "[{"):
                return f"\\{name[:cut]}{{{name[cut:]}}}"
        return match.group(0)

    return _MACRO.sub(split, text)


def has_latex(text: str) -> bool:
    return "\\" in text or "$" in text


def needs_rendering(text: str) -> bool:
    """Whether `plain_text` changes more than spacing: LaTeX, or a word broken at a line end."""
    return has_latex(text) or _BROKEN_WORD.search(text) is not None


# Words of a closed class (articles, prepositions, conjunctions, pronouns, auxiliaries): never a
# name when one starts a sentence, never the second half of a word broken at a line end.
_CLOSED_CLASS = """
a an the this that these those such some any each every all both either neither no
and or nor but so yet versus vs as if than then when while whereas although though because
of in on at by for from to into onto with within without via per over under about across
after before between through during against among upon toward towards beyond
is are was were be been being has have had do does did can could may might must shall should
will would it its they them their we our us he she his her there here which who whom whose
what where how why not also only
"""
FUNCTION_WORDS = frozenset(_CLOSED_CLASS.split())

# "train- ing", "eigendecompo- sition": a word the corpus broke at a line end (PDF text keeps
# the hyphen and the line break). "first- and second-order" is no broken word.
_BROKEN_WORD = re.compile(r"(?<!\w)([^\W\d_]+|\d+)- ([^\W\d_A-Z][^\W\d_]*)((?:-[^\W\d_]+)*)")


@lru_cache(maxsize=1)
def english_words() -> Any:
    """pyspellchecker's English word list, loaded once."""
    from spellchecker import SpellChecker  # an English word list (~0.2 s to load)

    return SpellChecker(language="en", distance=1).word_frequency


def english_word(word: str) -> bool:
    """Whether the English word list knows ``word`` (case ignored)."""
    return bool(english_words()[word.casefold()] > 0)


def one_edit(word: str) -> tuple[set[str], set[str], set[str]]:
    """The strings one edit from ``word`` (lower-case letters), by how likely a typist made the
    edit that they undo: a letter inserted or two neighbours swapped back (a dropped or swapped
    letter: "datset", "infernce", "grpah"); a letter deleted (a doubled or extra one); a letter
    replaced. The first letter is kept as typed, where typos are rare."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    head, body = word[:1], word[1:]
    splits = [(body[:i], body[i:]) for i in range(len(body) + 1)]
    inserts = {a + c + b for a, b in splits for c in letters}
    swaps = {a + b[1] + b[0] + b[2:] for a, b in splits if len(b) > 1}
    deletes = {a + b[1:] for a, b in splits if b}
    replaces = {a + c + b[1:] for a, b in splits if b for c in letters}
    kinds = (inserts | swaps, deletes, replaces)
    return tuple({head + w for w in kind} - {word} for kind in kinds)  # type: ignore[return-value]


def dehyphenate(text: str) -> str:
    """Words broken at a line end joined again: "train- ing" -> "training", "How- ever" ->
    "However"; a compound broken at its own hyphen keeps it ("high- dimensional" ->
    "high-dimensional", "state-of- the-art" -> "state-of-the-art"); "first- and second-order"
    and "data- or model-parallel" are left alone. A joined word is one the English word list
    or the text itself knows; else the halves join with a hyphen when the second is a word."""
    if _BROKEN_WORD.search(text) is None:
        return text
    known = english_words()
    own = {w.casefold() for w in re.findall(r"[^\W\d_]{3,}", _BROKEN_WORD.sub(" ", text))}

    def word(w: str) -> bool:  # three letters are too few: "ing", "cal" are words and suffixes
        return len(w) > 3 and (w.casefold() in own or known[w.casefold()] > 0)

    def join(m: re.Match[str]) -> str:
        head, tail, more = m.group(1), m.group(2), m.group(3)
        joined = head + tail
        if not head.isdigit() and (word(joined) or (joined[-1] == "s" and word(joined[:-1]))):
            return joined + more  # "pa- per", "in- variances"
        if tail.casefold() in FUNCTION_WORDS and not more:
            return m.group(0)  # a suspended hyphen ("pre- and post-training") or a dash
        if word(tail) or more:
            return f"{head}-{tail}{more}"
        if head.isdigit():
            return m.group(0)  # "1- e" may be arithmetic
        return head + tail + more  # "sition", "rithm": no word alone

    return _BROKEN_WORD.sub(join, text)


def plain_text(text: str) -> str:
    """LaTeX markup turned into readable Unicode: ``40\\%`` -> ``40%``, ``\\emph{x}`` -> ``x``,
    ``\\texttt{DASHA}`` -> ``DASHA``, ``\\url{https://x.org}`` -> ``https://x.org``."""
    if has_latex(text):
        renderer, text_db, walker_db = _latex()
        # A bare % starts a LaTeX comment; in an abstract it means percent, so keep it.
        escaped = _unglued(_UNESCAPED_PERCENT.sub(r"\\%", text), text_db, walker_db)
        try:
            text = renderer.latex_to_text(escaped, latex_context=walker_db, tolerant_parsing=True)
        except Exception:  # pylatexenc is lenient, yet some inputs still raise
            # keep every word: drop the backslashes of macros and the braces
            text = re.sub(r"[{}]", "", _MACRO.sub(r"\1", text.replace("$", "")))
    return dehyphenate(_SPACES.sub(" ", unicodedata.normalize("NFKC", text)).strip())


def fingerprint(*parts: str) -> str:
    """A short stable hash of text (used for ids of untitled papers and content hashes)."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\x1f")
    return h.hexdigest()[:16]


@lru_cache(maxsize=1)
def _id_renderer() -> LatexNodes2Text:
    return LatexNodes2Text(math_mode="text", strict_latex_spaces=False)


def normalise_for_id(abstract: str) -> str:
    """Case, spacing and LaTeX differences do not make a different paper.

    Ids must never change, so this keeps the first renderer (pylatexenc's defaults) frozen:
    improving `plain_text` re-renders the index but gives no paper a new id."""
    text = abstract
    if has_latex(text):
        escaped = _UNESCAPED_PERCENT.sub(r"\\%", text)
        with contextlib.suppress(Exception):
            text = _id_renderer().latex_to_text(escaped)
    return _SPACES.sub(" ", unicodedata.normalize("NFKC", text)).strip().casefold()


_PARTICLES = {"van", "der", "den", "de", "von", "la", "le", "di", "da", "del", "du", "dos", "ter"}


def name_tokens(name: str) -> list[str]:
    """A person's name as plain lower-case words: accents, case and punctuation do not count
    ("B. Schölkopf" -> ["b", "scholkopf"])."""
    decomposed = unicodedata.normalize("NFKD", name)
    bare = "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()
    return re.findall(r"[^\W\d_]+", bare)


def _name_words(name: str) -> list[list[str]]:
    """A name's words, each as its letter runs, accents and case dropped: "C.-L. Li" ->
    [["c", "l"], ["li"]], "Chun-Liang Li" -> [["chun", "liang"], ["li"]]."""
    decomposed = unicodedata.normalize("NFKD", name)
    bare = "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()
    words = (re.findall(r"[^\W\d_]+", w) for w in re.split(r"[\s.]+(?=[^\W\d_])", bare))
    return [w for w in words if w]


def author_key(name: str) -> str | None:
    """The key an author is indexed and looked up by: the surname ("levine")."""
    words = name_tokens(name)
    return words[-1] if words else None


def _first_name(name: str) -> list[str]:
    """The parts of the first given name ("Chun-Liang" -> ["chun", "liang"]; none for a
    surname alone). Particles before the surname are no given names ("van der Maaten"), but a
    first word is one when a given name follows it ("Van H. Vu")."""
    before = _name_words(name)[:-1]
    if all(len(w) == 1 and w[0] in _PARTICLES for w in before):
        return []
    return before[0]


def same_author(typed: str, indexed: str) -> bool:
    """Whether a name as typed can be this indexed author: the same surname, and a compatible
    first name (the same, one the initial of the other, or one a prefix of the other, as Greg
    and Gregory); middle names are not compared. "Furong Huang" is not Feihu Huang."""
    key = author_key(typed)
    if key is None or key != author_key(indexed):
        return False
    a, b = _first_name(typed), _first_name(indexed)
    if not a or not b:
        return True
    if any(len(part) == 1 for part in a + b):  # initials: "C.-L." against "Chun-Liang"
        x, y = "".join(p[0] for p in a), "".join(p[0] for p in b)
        return x[: len(y)] == y[: len(x)]
    x, y = "".join(a), "".join(b)
    return x.startswith(y) or y.startswith(x)


def matching_authors(typed: str, by_key: Mapping[str, Iterable[str]]) -> list[str]:
    """The indexed names (``by_key``: surname key to names) that a typed name can be."""
    key = author_key(typed)
    if key is None:
        return []
    return [name for name in by_key.get(key, ()) if same_author(typed, name)]


# A sentence ends at . ! ? (optionally followed by a closing quote or bracket) and whitespace,
# when the next word starts like a sentence, and the period does not close a common abbreviation.
_ABBREVIATIONS = (
    "e.g",
    "i.e",
    "et al",
    "etc",
    "vs",
    "cf",
    "fig",
    "figs",
    "eq",
    "eqs",
    "sec",
    "approx",
    "resp",
    "dr",
    "mr",
    "ms",
    "no",
    "al",
    "viz",
    "ref",
)
_BOUNDARY = re.compile(r"""[.!?]["')\]]*\s+(?=["'(\[]?[A-Z0-9$\\])""")
_ABBREV_TAIL = re.compile(
    r"(?:\b(?i:" + "|".join(re.escape(a) for a in _ABBREVIATIONS) + r")|\b[A-Z])\.$"
)


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """Character spans of the sentences of ``text``, in order, leading/trailing spaces excluded."""
    spans: list[tuple[int, int]] = []
    start = 0
    for match in _BOUNDARY.finditer(text):
        head = text[start : match.start() + 1]
        if text[match.start()] == "." and _ABBREV_TAIL.search(head):
            continue
        spans.append((start, match.start() + len(match.group(0).rstrip())))
        start = match.end()
    spans.append((start, len(text)))
    return [_strip_span(text, s, e) for s, e in spans if text[s:e].strip()]


def _strip_span(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def derive_title(abstract: str, max_chars: int = 90) -> str:
    """A display title for a paper that has none: the start of its first sentence."""
    text = plain_text(abstract)
    spans = sentence_spans(text)
    first = text[spans[0][0] : spans[0][1]] if spans else text
    first = first.rstrip(".")
    if len(first) <= max_chars:
        return first
    cut = first[:max_chars].rsplit(" ", 1)[0]
    return cut.rstrip(",;:") + "…"
