"""Reading a passage corpus from disk: jsonl with ``id`` and ``contents`` (Search-R1's ``wiki-18.jsonl``), or
with ``title`` and ``text``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from envs.retrieval.base import Passage


def read_corpus(path: str | Path) -> Iterator[Passage]:
    """The passages of a jsonl corpus, streamed; a row without an ``id`` gets its line number."""
    with Path(path).open(encoding="utf-8") as f:
        for number, line in enumerate(f):
            if not line.strip():
                continue
            row = json.loads(line)
            row.setdefault("id", str(number))
            yield Passage.from_document(row)
