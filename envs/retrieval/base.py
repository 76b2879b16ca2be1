"""The retriever interface and the passage record every retriever returns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable


class RetrievalError(RuntimeError):
    """A retriever could not answer (server unreachable, bad reply, bad request)."""


@dataclass(frozen=True)
class Passage:
    """One passage of a corpus.

    ``contents`` follows the Search-R1 / FlashRAG corpus convention: the title in double quotes on the first
    line, then the text (``"Title"\\ntext``); a passage without a newline has no title.
    """

    contents: str
    id: str = ""
    score: float | None = None

    @property
    def title(self) -> str:
        head, sep, _ = self.contents.partition("\n")
        return head.strip().strip('"') if sep else ""

    @property
    def text(self) -> str:
        head, sep, rest = self.contents.partition("\n")
        return rest.strip() if sep else head.strip()

    def document(self) -> dict[str, Any]:
        """The passage as Search-R1's retriever returns a document."""
        return {"id": self.id, "contents": self.contents}

    @classmethod
    def from_document(cls, document: dict[str, Any], score: float | None = None) -> Passage:
        """A passage from a document dict: ``contents``, or ``title`` and ``text`` (``id`` optional)."""
        if "contents" in document:
            contents = str(document["contents"])
        elif "text" in document:
            title = document.get("title")
            contents = f'"{title}"\n{document["text"]}' if title else str(document["text"])
        else:
            raise ValueError(f"a document needs 'contents' or 'text'; got keys {sorted(document)}")
        return cls(contents=contents, id=str(document.get("id", "")), score=score)


@runtime_checkable
class Retriever(Protocol):
    """Anything that returns, for each query, up to ``topk`` passages, best first."""

    def search(self, queries: list[str], topk: int) -> list[list[Passage]]: ...
