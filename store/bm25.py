"""The lexical side of the store: BM25 over every chunk, with the per-chunk facts a query needs
without asking Chroma (facets for filters, the chunk vectors), saved beside Chroma as segments
(`store.segments`) that a write adds to and a merge folds together.

BM25 is scored when asked, from each segment's term counts, as Lucene does: nothing in a segment
depends on the others, so adding papers writes only theirs. The formula is bm25s's "lucene"
variant (its default, k1 1.5, b 0.75), which the tests hold it to. Words come from
`core.tokens.words`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import compress
from pathlib import Path
from typing import Any

import numpy as np

from core.models import Filters
from core.text import author_key, english_word, one_edit, same_author
from core.tokens import TOKEN, words
from store.records import StoredChunk
from store.segments import FACETS, Manifest, Part, Segment

K1 = 1.5
B = 0.75


@dataclass(frozen=True, eq=False)
class Block:
    """A segment as one generation sees it: the rows it keeps, and where they sit among all."""

    segment: Segment
    keep: np.ndarray
    rows: np.ndarray
    """Row among every chunk of each of the segment's rows (-1 for a deleted one)."""


class AuthorRows(Mapping[str, dict[str, np.ndarray]]):
    """Each author's rows among every chunk, by surname key and then by the name as written,
    gathered from the segments' own tables when a key is asked for: a write costs the authors of
    its own papers, not a table of every author again."""

    def __init__(self, blocks: Sequence[Block]) -> None:
        self._blocks = blocks
        self._found: dict[str, dict[str, np.ndarray]] = {}

    def __getitem__(self, key: str) -> dict[str, np.ndarray]:
        if key not in self._found:
            named: dict[str, list[np.ndarray]] = {}
            for block in self._blocks:
                for name, local in block.segment.authors.get(key, {}).items():
                    rows = block.rows[local]
                    named.setdefault(name, []).append(rows[rows >= 0])
            found = {name: np.concatenate(r) for name, r in named.items()}
            self._found[key] = {name: r for name, r in found.items() if len(r)}
        if not self._found[key]:
            raise KeyError(key)
        return self._found[key]

    @cached_property
    def _keys(self) -> list[str]:
        keys = {key for block in self._blocks for key in block.segment.authors}
        return sorted(key for key in keys if key in self)

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __bool__(self) -> bool:
        return any(block.keep.any() and block.segment.authors for block in self._blocks)


def _kept(values: Any, keep: np.ndarray) -> Any:
    """The values ``keep`` marks: ``values`` itself when it keeps them all."""
    if keep.all():
        return values
    if isinstance(values, np.ndarray):
        return values[keep]
    return list(compress(values, keep))


def _joined(arrays: list[np.ndarray], empty: tuple[int, ...]) -> np.ndarray:
    """One array of ``arrays`` (not a copy when there is one)."""
    if len(arrays) == 1:
        return arrays[0]
    return np.concatenate(arrays) if arrays else np.zeros(empty, dtype=np.float32)


# A misspelt word is at most this long (one_edit grows with the square of a word's length), and
# a word English does not know is meant only if this many chunks hold it ("seriatal" is no word)
MAX_TYPO = 20
MIN_MEANT_DF = 5


class BM25Index:
    """BM25 over every chunk, plus facets for filters and the chunk vectors (row ``i`` is
    ``chunk_ids[i]``), so a chunk only BM25 found gets its dense similarity locally."""

    def __init__(
        self,
        parts: Sequence[tuple[Segment, np.ndarray]],
        generation: str,
        manifest: str | None = None,
    ) -> None:
        """The rows of each segment its mask keeps, in order: one generation of the index;
        ``manifest`` names the saved manifest it was read from."""
        self.generation = generation
        self.manifest = manifest
        blocks = []
        offset = 0
        for segment, keep in parts:
            kept = np.cumsum(keep) - 1 + offset
            blocks.append(Block(segment, keep, np.where(keep, kept, -1)))
            offset += int(keep.sum())
        self.blocks: tuple[Block, ...] = tuple(blocks)
        # what a block keeps whole is taken as it is (a list extended, an array not copied):
        # after a write that only added papers, this costs little more than the new rows
        self.chunk_ids: list[str] = []
        self.facets: dict[str, list[Any]] = {name: [] for name in FACETS}
        for b in blocks:
            self.chunk_ids.extend(_kept(b.segment.chunk_ids, b.keep))
            for name in FACETS:
                self.facets[name].extend(_kept(b.segment.facets[name], b.keep))
        dim = max((b.segment.vectors.shape[1] for b in blocks), default=0)
        self.vectors: np.ndarray = _joined(
            [_kept(b.segment.vectors, b.keep) for b in blocks if b.keep.any()], (0, dim)
        )
        lengths = _joined([_kept(b.segment.lengths, b.keep) for b in blocks], (0,))
        self._lengths = lengths
        self._avgdl = float(lengths.mean()) if len(lengths) else 1.0

    @classmethod
    def build(
        cls, rows: Iterable[tuple[StoredChunk, np.ndarray | None]], generation: str
    ) -> BM25Index:
        """From every stored chunk (with its text) and its vector: one segment."""
        segment = Segment.build(rows)
        return cls([(segment, np.ones(len(segment), dtype=bool))], generation)

    # --- what filters and the app read -------------------------------------------------------
    @cached_property
    def facet_arrays(self) -> dict[str, np.ndarray]:
        """The facets as arrays: year (-1 when unknown), venue and decision case-folded."""
        return {
            "year": np.array(
                [y if isinstance(y, int) else -1 for y in self.facets["year"]], dtype=np.int64
            ),
            **{
                name: np.array(
                    [v.casefold() if isinstance(v, str) else "" for v in self.facets[name]],
                    dtype=str,
                )
                for name in ("venue", "decision")
            },
        }

    @cached_property
    def venues(self) -> set[str]:
        """Every venue of the index, as written."""
        return {v for v in self.facets["venue"] if isinstance(v, str)}

    @cached_property
    def years(self) -> set[int]:
        """Every known year of the index."""
        return {int(y) for y in set(self.facet_arrays["year"].tolist()) if y >= 0}

    @cached_property
    def author_rows(self) -> AuthorRows:
        """Rows of the chunks of each author, by surname key ("levine") and then by the name as
        the corpus writes it: the author filter is a union of these, as fast as the other
        facets."""
        return AuthorRows(self.blocks)

    @cached_property
    def author_names(self) -> list[str]:
        """Every author as written in the corpus, most papers first (for the app's search)."""
        counts: Counter[str] = Counter()
        seen: set[tuple[str, str]] = set()
        for names, paper in zip(self.facets["authors"], self.facets["paper_id"], strict=True):
            for name in names:
                if (name, paper) not in seen:
                    seen.add((name, paper))
                    counts[name] += 1
        return [name for name, _ in counts.most_common()]

    def passing(self, filters: Filters) -> np.ndarray | None:
        """A boolean array over the rows: True where the chunk passes ``filters`` (None when
        they restrict nothing). An author filter passes a paper with any of the names."""
        if not filters.active:
            return None
        facets = self.facet_arrays
        years = facets["year"]
        keep = np.ones(len(years), dtype=bool)
        if filters.year_from is not None or filters.year_to is not None:
            keep &= years >= 0
            if filters.year_from is not None:
                keep &= years >= filters.year_from
            if filters.year_to is not None:
                keep &= years <= filters.year_to
        for name, wanted in (("venue", filters.venues), ("decision", filters.decisions)):
            if wanted:
                keep &= np.isin(facets[name], [w.casefold() for w in wanted])
        if filters.authors:
            by_author = np.zeros(len(years), dtype=bool)
            for typed in filters.authors:
                for name, rows in self.author_rows.get(author_key(typed) or "", {}).items():
                    if same_author(typed, name):
                        by_author[rows] = True
            keep &= by_author
        return keep

    @cached_property
    def centroid(self) -> np.ndarray:
        """The unit mean of the chunk vectors: what a typical question of this corpus is near."""
        if not len(self.vectors):
            return np.zeros(0, dtype=np.float32)
        mean = self.vectors.mean(axis=0)
        return np.asarray(mean / (np.linalg.norm(mean) or 1.0), dtype=np.float32)

    @cached_property
    def position(self) -> dict[str, int]:
        """Row of each chunk id."""
        return {cid: i for i, cid in enumerate(self.chunk_ids)}

    # --- lexical scores ----------------------------------------------------------------------
    def _postings(self, term: str) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """The rows holding ``term`` and its count in each, segment by segment."""
        for block in self.blocks:
            column = block.segment.vocab.get(term)
            if column is None:
                continue
            postings = block.segment.postings
            start, end = postings.indptr[column], postings.indptr[column + 1]
            rows = block.rows[postings.indices[start:end]]
            alive = rows >= 0
            yield rows[alive], postings.data[start:end][alive]

    def df(self, term: str) -> int:
        """How many chunks hold ``term``."""
        return sum(len(rows) for rows, _ in self._postings(term))

    def _idf(self, df: int) -> float:
        n = len(self.chunk_ids)
        return float(np.log(1 + (n - df + 0.5) / (df + 0.5)))

    def scores(self, terms: Sequence[str]) -> np.ndarray:
        """BM25 score of every chunk for a query's search words (`core.tokens.words`; a word
        given twice counts twice); zeros when none is indexed."""
        out = np.zeros(len(self.chunk_ids), dtype=np.float32)
        for term, times in Counter(terms).items():
            postings = list(self._postings(term))
            df = sum(len(rows) for rows, _ in postings)
            if not df:
                continue
            idf = np.float32(self._idf(df) * times)
            for rows, tf in postings:
                norm = K1 * (1 - B + B * self._lengths[rows] / self._avgdl)
                out[rows] += idf * (tf / (norm + tf)).astype(np.float32)
        return out

    def holding_all(self, terms: Sequence[str]) -> np.ndarray:
        """Which chunks hold every one of a query's search words."""
        tokens = sorted(set(terms))
        keep = np.ones(len(self.chunk_ids), dtype=bool)
        for token in tokens:
            has = np.zeros(len(self.chunk_ids), dtype=bool)
            for rows, _ in self._postings(token):
                has[rows] = True
            keep &= has
        return keep if tokens else np.zeros(len(self.chunk_ids), dtype=bool)

    def unseen(self, names: list[str]) -> list[str]:
        """The names no indexed chunk contains (compared as search words: case and stem)."""
        return [
            name
            for name, tokens in zip(names, words(names), strict=True)
            if tokens and not any(self.df(t) for t in tokens)
        ]

    def spelled(self, text: str) -> list[str]:
        """``text``'s search words (as `core.tokens.words` gives them), a misspelt one searched
        as the word meant.

        A misspelt word is typed in lower-case ASCII letters, 4 to MAX_TYPO letters long, no
        chunk holds its search word and English does not know it ("benchmakrs"). The word
        meant is one edit away (`core.text.one_edit`), of the likeliest kind of edit that
        reaches any candidate: an English word whose search word the index holds first, then
        the search word most chunks hold (at least MIN_MEANT_DF of them, for a word English does
        not know); failing all, the indexed search word one edit from its own. A misspelt
        stopword ("thier", "papres") is dropped. Capitalised words (names), words with digits or
        accents, and words nothing is near are searched as typed."""
        out: list[str] = []
        for typed in TOKEN.findall(text):
            found = words([typed])[0]
            if len(found) == 1 and self._typo(typed, found[0]):
                meant = self._meant(typed, found[0])
                found = [] if meant == "" else [meant or found[0]]
            out.extend(found)
        return out

    def _typo(self, typed: str, term: str) -> bool:
        return (
            4 <= len(typed) <= MAX_TYPO
            and typed.isascii()
            and typed.isalpha()
            and typed.islower()
            and not english_word(typed)
            and not self.df(term)
        )

    def _meant(self, typed: str, term: str) -> str | None:
        """The search word meant by ``typed`` (whose search word is ``term``); "" for a
        stopword, None when nothing indexed is near."""
        for near in one_edit(typed):
            candidates = sorted(near)
            scored = []
            for word, found in zip(candidates, words(candidates), strict=True):
                if not found:
                    if english_word(word):  # a stopword: "their" for "thier"
                        return ""
                    continue
                english, df = english_word(word), self.df(found[0])
                if df and (english or df >= MIN_MEANT_DF):
                    scored.append((english, df, found[0]))
            if scored:
                return max(scored)[2]
        stems = [(self.df(t), t) for t in sorted(set().union(*one_edit(term)))]
        best = max(stems, default=(0, ""))
        return best[1] if best[0] >= MIN_MEANT_DF else None

    def coverage(self, query: Sequence[str], texts: list[str]) -> list[float]:
        """For each text, the share of the query's word weight (idf) that it contains; the
        query as its search words.

        A word the index has never seen weighs the most, so a question about something absent
        from the corpus scores low even when its common words match."""
        terms = set(query)
        if not terms:
            return [0.0] * len(texts)
        weight = {term: self._idf(self.df(term)) for term in terms}
        total = sum(weight.values())
        return [
            sum(w for t, w in weight.items() if t in set(toks)) / total for toks in words(texts)
        ]

    # --- persistence -------------------------------------------------------------------------
    def save(self, root: Path) -> None:
        """Write the index as one segment under a new manifest (a full build's way)."""
        if len(self.blocks) == 1 and self.blocks[0].keep.all():
            segment = self.blocks[0].segment
        else:
            segment = Segment.merge([(b.segment, b.keep) for b in self.blocks])
        segment.save(root)
        Manifest(self.generation, (Part(segment.name, len(segment)),)).save(root)
        self.manifest = Manifest.current(root)

    @staticmethod
    def saved_generation(root: Path) -> str | None:
        """The generation of the index saved under ``root``, without loading it."""
        saved = Manifest.load(root)
        return None if saved is None else saved[0].generation

    @classmethod
    def load(cls, root: Path, reuse: BM25Index | None = None) -> BM25Index | None:
        """The saved index, or None when there is none, it is damaged or it has another layout.
        Segments ``reuse`` holds are taken from it, not read again: after a write, only the
        segment it added is read."""
        saved = Manifest.load(root)
        if saved is None:
            return None
        manifest, name = saved
        have = {b.segment.name: b.segment for b in reuse.blocks} if reuse is not None else {}
        try:
            parts = []
            for part in manifest.parts:
                segment = have.get(part.name) or Segment.load(root, part.name)
                if len(segment) != part.rows:
                    return None
                parts.append((segment, part.keep()))
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return cls(parts, manifest.generation, name)
