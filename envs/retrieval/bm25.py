"""An in-process BM25 retriever built with ``bm25s``: build an index, save it, load it, search it.

Tokenisation is bm25s's (lower case, words of two or more characters, English stop words removed, no
stemming), the same for passages and queries. The index directory is bm25s's own format plus the passages
as ``corpus.jsonl``; ``load(path, mmap=True)`` memory-maps both, for corpora larger than RAM.

Build an index from a jsonl corpus (``id`` and ``contents`` per line, as Search-R1's ``wiki-18.jsonl``)::

    python -m envs.retrieval.bm25 --corpus wiki-18.jsonl --out indexes/wiki-bm25
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import bm25s

from envs.retrieval.base import Passage
from envs.retrieval.corpus import read_corpus

STOPWORDS = "en"
# bm25s's numba backend compiles for several seconds on first use; numpy is instant and fast enough below
# millions of passages. Pass backend="numba" for Wikipedia-sized corpora.
DEFAULT_BACKEND = "numpy"


def _tokenize(texts: list[str], *, ids: bool):
    return bm25s.tokenize(texts, stopwords=STOPWORDS, return_ids=ids, show_progress=False)


class BM25Retriever:
    """BM25 over a fixed list of passages. Searching only reads the index, so threads may share one."""

    def __init__(self, model: bm25s.BM25, corpus: Sequence[dict[str, Any]]):
        self._model = model
        self._corpus = corpus

    @classmethod
    def build(cls, passages: Iterable[Passage], *, backend: str = DEFAULT_BACKEND) -> BM25Retriever:
        """Index ``passages`` (their ``contents``, title included)."""
        corpus = [p.document() for p in passages]
        if not corpus:
            raise ValueError("cannot build a BM25 index over an empty corpus")
        model = bm25s.BM25(backend=backend)
        model.index(_tokenize([d["contents"] for d in corpus], ids=True), show_progress=False)
        return cls(model, corpus)

    def save(self, path: str | Path) -> None:
        """Write the index and the passages to the directory ``path`` (created if missing)."""
        self._model.save(str(path), corpus=self._corpus, show_progress=False)

    @classmethod
    def load(cls, path: str | Path, *, mmap: bool = False, backend: str = DEFAULT_BACKEND) -> BM25Retriever:
        """Load an index written by :meth:`save`; ``mmap`` maps it from disk instead of into RAM."""
        path = Path(path)
        if not (path / "params.index.json").is_file() or not (path / "corpus.jsonl").is_file():
            raise FileNotFoundError(f"{path} is not a BM25 index directory written by BM25Retriever.save")
        model = bm25s.BM25.load(str(path), load_corpus=True, mmap=mmap, show_progress=False, backend=backend)
        corpus, model.corpus = model.corpus, None  # detached: retrieve() then returns indices, not documents
        return cls(model, corpus)

    def __len__(self) -> int:
        return len(self._corpus)

    def search(self, queries: list[str], topk: int) -> list[list[Passage]]:
        """Up to ``topk`` passages per query, best first; only passages sharing a term with the query."""
        if topk < 1:
            raise ValueError(f"topk must be >= 1, got {topk}")
        results: list[list[Passage]] = [[] for _ in queries]
        tokens = _tokenize([str(q) for q in queries], ids=False)
        asked = [i for i, t in enumerate(tokens) if t]
        if not asked:
            return results
        k = min(topk, len(self._corpus))
        indices, scores = self._model.retrieve([tokens[i] for i in asked], k=k, show_progress=False)
        for row, query_index in enumerate(asked):
            for doc_index, score in zip(indices[row], scores[row], strict=True):
                if score > 0:
                    passage = Passage.from_document(self._corpus[int(doc_index)], score=float(score))
                    results[query_index].append(passage)
        return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Build a BM25 index over a jsonl passage corpus.")
    parser.add_argument("--corpus", required=True, help="jsonl with id and contents (or title and text)")
    parser.add_argument("--out", required=True, help="index directory to write")
    parser.add_argument("--backend", default=DEFAULT_BACKEND, choices=("numpy", "numba"))
    args = parser.parse_args(argv)
    retriever = BM25Retriever.build(read_corpus(args.corpus), backend=args.backend)
    retriever.save(args.out)
    print(f"indexed {len(retriever)} passages into {args.out}")


if __name__ == "__main__":
    main()
