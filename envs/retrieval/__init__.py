"""Passage retrieval for the search env: one interface, an in-process BM25 index, and an HTTP client and
server speaking Search-R1's ``POST /retrieve`` protocol."""

from envs.retrieval.base import Passage, RetrievalError, Retriever

__all__ = ["Passage", "RetrievalError", "Retriever"]
