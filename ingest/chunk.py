"""Token-aware chunking on sentence boundaries, with overlap, counted with tiktoken offline."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor

from core.models import Chunk, Paper, chunk_id
from core.text import fingerprint, plain_text, sentence_spans
from core.tokens import count_tokens, encoding


def _pieces(text: str, max_tokens: int) -> list[tuple[int, int, int]]:
    """Sentence spans with token counts; a sentence over the limit is cut at token boundaries."""
    enc = encoding()
    spans = sentence_spans(text)
    # encode_ordinary per sentence: encode_batch spins a thread pool per call, 4 ms each
    counts = [enc.encode_ordinary(text[s:e]) for s, e in spans]
    pieces: list[tuple[int, int, int]] = []
    for (start, end), tokens in zip(spans, counts, strict=True):
        if len(tokens) <= max_tokens:
            pieces.append((start, end, len(tokens)))
            continue
        pieces += _cut(text[start:end], start, tokens, max_tokens)
    return pieces


def _cut(
    sentence: str, start: int, tokens: list[int], max_tokens: int
) -> list[tuple[int, int, int]]:
    """A sentence over the limit cut at token boundaries into pieces of at most ``max_tokens``.

    Cut points are where tokens start, and each piece is measured again: a character that
    several byte-level tokens encode makes a slice cost more than its share of tokens."""
    enc = encoding()
    _, offsets = enc.decode_with_offsets(tokens)
    bounds = sorted({*offsets, len(sentence)} - {0})
    pieces: list[tuple[int, int, int]] = []
    a, i = 0, 0
    while a < len(sentence):
        j = min(i + max_tokens, len(bounds)) - 1
        while True:
            count = len(enc.encode_ordinary(sentence[a : bounds[j]]))
            if count <= max_tokens or j == i:
                break
            j -= 1
        pieces.append((start + a, start + bounds[j], count))
        a, i = bounds[j], j + 1
    return pieces


def split_spans(text: str, max_tokens: int, overlap_tokens: int) -> list[tuple[int, int]]:
    """Spans of consecutive sentences of at most ``max_tokens`` each; each chunk after the first
    starts with up to ``overlap_tokens`` of the previous chunk's last sentences."""
    pieces = _pieces(text, max_tokens)
    chunks: list[tuple[int, int]] = []
    i = 0
    while i < len(pieces):
        total, j = 0, i
        while j < len(pieces) and (j == i or total + pieces[j][2] <= max_tokens):
            total += pieces[j][2]
            j += 1
        # sentences counted apart can cost a token more once joined: measure the chunk itself
        while j - i > 1 and count_tokens(text[pieces[i][0] : pieces[j - 1][1]]) > max_tokens:
            j -= 1
        chunks.append((pieces[i][0], pieces[j - 1][1]))
        if j == len(pieces):
            break
        # step back over whole sentences that fit in the overlap, never to where we started
        back, k = 0, j
        while k - 1 > i and back + pieces[k - 1][2] <= overlap_tokens:
            back += pieces[k - 1][2]
            k -= 1
        i = k
    return chunks


def chunk_paper(paper: Paper, max_tokens: int, overlap_tokens: int) -> list[Chunk]:
    """The chunks of one paper; each embedded text starts with the paper's title as context."""
    context = "" if paper.title_derived else plain_text(paper.title) + ". "
    budget = max(16, max_tokens - count_tokens(context))
    chunks = []
    for index, (start, end) in enumerate(split_spans(paper.abstract, budget, overlap_tokens)):
        text = paper.abstract[start:end]
        plain = plain_text(text)
        embed_text = context + plain
        chunks.append(
            Chunk(
                chunk_id=chunk_id(paper.paper_id, index),
                paper_id=paper.paper_id,
                index=index,
                start=start,
                end=end,
                text=text,
                plain=plain,
                embed_text=embed_text,
                content_hash=fingerprint(embed_text),
            )
        )
    return chunks


PAPERS_PER_PROCESS = 1000
"""With fewer papers per process, starting the processes costs more than they save."""


def chunk_papers(
    chunker: Callable[[Paper], list[Chunk]],
    papers: Sequence[Paper],
    processes: int = 1,
    per_process: int = PAPERS_PER_PROCESS,
) -> list[list[Chunk]]:
    """``chunker`` applied to each paper, in order, split over up to ``processes`` processes
    when there are enough papers (rendering LaTeX is pure Python: 31 s for the 22k corpus).

    The processes are spawned, never forked (an app or server may be running threads a fork
    would copy in a locked state), so the caller's main module must be import-safe (``if
    __name__ == "__main__":``): the CLI opts in, a library call stays in one process unless
    asked. ``chunker`` must be picklable."""
    workers = min(processes, len(papers) // per_process)
    if workers < 2:
        return [chunker(paper) for paper in papers]
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(workers, mp_context=context) as pool:
        size = -(-len(papers) // (workers * 4))
        return list(pool.map(chunker, papers, chunksize=size))
