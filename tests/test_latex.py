"""LaTeX in abstracts never erases words: unit cases from real corpora and a property test."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pylatexenc.macrospec import LatexContextDb

from core.text import _latex, dehyphenate, normalise_for_id, plain_text


@pytest.mark.parametrize(
    ("latex", "expected"),
    [
        (
            r"We present \texttt{DAGSurv}, a survival model.",
            "We present DAGSurv, a survival model.",
        ),
        (r"using the \textsf{JAX} library", "using the JAX library"),
        (r"with $\texttt{RandK}$ sparsification", "with RandK sparsification"),
        (r"using a $\texttt{softmax}$ operation", "using a softmax operation"),
        (r"Code: \urlhttps://github.com/a/b.", "Code: https://github.com/a/b."),
        (r"Code: \url{https://github.com/a/b_c}.", "Code: https://github.com/a/b_c."),
        (r"see \href{https://x.org}{our site} now", "see our site (https://x.org) now"),
        (r"as shown by \cite{smith2020} and \citep{a,b}", "as shown by (smith2020) and (a,b)"),
        (r"{\tt old} and {\bf bold} switches", "old and bold switches"),
        (r"regret $\tildeO(\sqrtT)$ in $\mathbbR^d$", "regret Õ(√(T)) in R^d"),
        (r"using \alpha and \ours methods", "using \u03b1 and ours methods"),
        (r"\emph{ensemble} and 40\% and 3%", "ensemble and 40% and 3%"),
        (r"\mbox{TRPO} and \textup{PPO}", "TRPO and PPO"),
        (
            r"disparity metrics\footnote{Known as fairness metrics.}. Here",
            "disparity metrics (Known as fairness metrics.). Here",
        ),
    ],
)
def test_macros_keep_their_words(latex: str, expected: str) -> None:
    assert plain_text(latex) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [  # from the 22k corpus: PDF text keeps the hyphen of a word broken at a line end
        ("its eigendecompo- sition is", "its eigendecomposition is"),
        ("the train- ing set", "the training set"),
        ("How- ever, we", "However, we"),
        ("we use in- variances", "we use invariances"),
        ("in high- dimensional spaces", "in high-dimensional spaces"),
        ("state-of- the-art results", "state-of-the-art results"),
        ("is NP- hard", "is NP-hard"),
        ("first- and second-order methods", "first- and second-order methods"),
        ("data- or model-parallel", "data- or model-parallel"),
        ("an 11- transistor circuit", "an 11-transistor circuit"),
        ("where 1- e holds", "where 1- e holds"),
        ("high-dimensional and well-known", "high-dimensional and well-known"),
        ("our \\citettaddy13mnir proposed", "our (taddy13mnir) proposed"),
        ("control \\citeBoydIOC,ng00irl, treats", "control (BoydIOC,ng00irl), treats"),
        ("as \\citep*{a,b} showed", "as (a,b) showed"),
        ("as \\citeauthor{smith} showed", "as (smith) showed"),
    ],
)
def test_broken_words_and_glued_citations_read_as_words(text: str, expected: str) -> None:
    assert plain_text(text) == expected


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.from_regex(r"[A-Za-z]{1,8}(-[a-z]{1,6})?", fullmatch=True)
        | st.sampled_from(["- ", "-", " and ", " or ", "1", " "]),
        min_size=1,
        max_size=20,
    ).map(" ".join)
)
def test_rejoining_broken_words_keeps_every_letter_and_every_compound(text: str) -> None:
    text = " ".join(text.split())
    out = dehyphenate(text)
    assert re.sub(r"[\s-]", "", out) == re.sub(r"[\s-]", "", text)  # no letter lost or added
    for compound in re.findall(r"(?<![\w-])[A-Za-z]+-[a-z]+(?![\w-])", text):
        assert compound in out  # a hyphenated word with no space in it is never merged
    if "- " not in text:
        assert out == text


def test_paper_ids_do_not_change_with_the_renderer() -> None:
    # ids hash the first renderer's text: \texttt{...} rendered as nothing there, and must stay
    # so, or a re-ingest would give known papers new ids and index them twice
    assert normalise_for_id(r"We present \texttt{DAGSurv} here.") == "we present here."


MACROS = [
    "texttt", "textsf", "textbf", "textit", "emph", "textsc", "textrm", "mbox", "textup",
    "textnormal", "text", "mathrm", "mathbf", "mathtt", "mathsf", "mathcal", "mathit",
    "operatorname", "underline", "footnote", "url", "cite", "citep", "citet", "ref", "label",
    "eqref", "textcolor{red}", "unknownmacro", "myname",
]  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(
    before=st.lists(st.from_regex(r"[A-Za-z]{2,9}", fullmatch=True), max_size=4),
    macro=st.sampled_from(MACROS),
    words=st.lists(st.from_regex(r"[A-Za-z]{2,12}", fullmatch=True), min_size=1, max_size=3),
    math=st.booleans(),
    after=st.lists(st.from_regex(r"[A-Za-z]{2,9}", fullmatch=True), max_size=4),
)
def test_no_alphabetic_word_inside_braces_is_lost(
    before: list[str], macro: str, words: list[str], math: bool, after: list[str]
) -> None:
    inner = f"\\{macro}{{{' '.join(words)}}}"
    if math:
        inner = f"${inner}$"
    rendered = plain_text(" ".join([*before, inner, *after]))
    # math fonts map letters to styled Unicode; NFKC in plain_text maps them back
    flat = re.sub(r"\s+", "", rendered).casefold()
    for word in [*before, *words, *after]:
        assert word.casefold() in flat, (inner, rendered)


def test_the_indexed_specials_search_finds_what_pylatexenc_finds() -> None:
    """`plain_text` swaps pylatexenc's specials search for an indexed one; at every position of
    text full of specials (dashes, quotes, ties, accents) it must return the very same spec."""
    _, _, walker_db = _latex()
    text = (
        "A -- B --- C ``quoted'' `single' ~tie ?` !` & # ^ _ \\% {x} $a_1$ "
        "\\'e \\\"o -- -x- ``` ''' ~~ ---- \\\\ end."
    )
    for pos in range(len(text) + 1):
        assert walker_db.test_for_specials(text, pos) is LatexContextDb.test_for_specials(
            walker_db, text, pos
        ), (pos, text[pos : pos + 4])
