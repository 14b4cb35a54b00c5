"""Chunkers: recursive character splitting (paragraph > line > sentence > clause > word > char)
and semantic splitting (break where adjacent sentences' embeddings stop resembling each other).

Sentence ends cover Chinese/Japanese (。！？ and full-width ；) as well as Latin punctuation, and
nothing assumes words are separated by whitespace.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:  # pragma: no cover
    from selfrag.kb.embedder import Embedder

_CLOSERS = "\"'”’」』）)】》\\]"
# A sentence ends after CJK terminators (no space needed), after !? runs, or after a period that
# is followed by whitespace / end of text (so "3.14" and "e.g.x" do not split); closing quotes
# and trailing whitespace stay with the sentence. Newlines also end sentences.
_SENTENCE_END_RE = re.compile(
    rf"(?:[。！？｡]+|[!?]+|…+|\.(?=[\s{_CLOSERS}]|$))[{_CLOSERS}]*\s*|\n+\s*"
)
_SENTENCE = object()  # marker separator: split into sentences
_SEPARATORS: tuple[object, ...] = ("\n\n", "\n", _SENTENCE, "；", ";", "，", "、", ", ", " ")


def split_sentences(text: str) -> list[str]:
    """Split into sentences keeping terminators and trailing whitespace: ``"".join(out) == text``."""
    out: list[str] = []
    start = 0
    for m in _SENTENCE_END_RE.finditer(text):
        end = m.end()
        if end > start:
            out.append(text[start:end])
            start = end
    if start < len(text):
        out.append(text[start:])
    return out


def _split_keep(text: str, sep: object) -> list[str]:
    if sep is _SENTENCE:
        return split_sentences(text)
    assert isinstance(sep, str)
    parts = text.split(sep)
    pieces = [p + sep for p in parts[:-1]] + [parts[-1]]
    return [p for p in pieces if p]


@runtime_checkable
class Chunker(Protocol):
    def chunk(self, text: str) -> list[str]: ...


class RecursiveChunker:
    """Split on the coarsest separator that yields pieces within ``size`` characters, then merge
    neighbouring pieces into chunks of at most ``size`` characters, carrying up to ``overlap``
    characters of whole trailing pieces into the next chunk."""

    def __init__(self, size: int = 800, overlap: int = 100):
        if not isinstance(size, int) or size < 1:
            raise ValueError(f"chunk size must be a positive int, got {size!r}")
        if not isinstance(overlap, int) or overlap < 0 or overlap >= size:
            raise ValueError(f"chunk overlap must be an int in [0, size={size}), got {overlap!r}")
        self.size = size
        self.overlap = overlap

    def atoms(self, text: str, seps: tuple[object, ...] = _SEPARATORS) -> list[str]:
        """Pieces of at most ``size`` characters that concatenate back to ``text``."""
        if len(text) <= self.size:
            return [text] if text else []
        for i, sep in enumerate(seps):
            pieces = _split_keep(text, sep)
            if len(pieces) > 1:
                out: list[str] = []
                for p in pieces:
                    out.extend(self.atoms(p, seps[i + 1:]) if len(p) > self.size else [p])
                return out
        # no separator at all (e.g. unpunctuated CJK): hard character windows
        return [text[i:i + self.size] for i in range(0, len(text), self.size)]

    def merge(self, atoms: list[str]) -> list[str]:
        chunks: list[str] = []
        cur: list[str] = []
        cur_len = 0
        for atom in atoms:
            if cur and cur_len + len(atom) > self.size:
                chunks.append("".join(cur))
                while cur and (cur_len > self.overlap or cur_len + len(atom) > self.size):
                    cur_len -= len(cur.pop(0))
            cur.append(atom)
            cur_len += len(atom)
        if cur:
            chunks.append("".join(cur))
        return [c.strip() for c in chunks if c.strip()]

    def chunk(self, text: str) -> list[str]:
        return self.merge(self.atoms(text))


class SemanticChunker:
    """Group consecutive sentences; start a new chunk where the cosine similarity of adjacent
    sentences drops below ``threshold`` or the chunk would exceed ``size`` characters.
    Sentences longer than ``size`` are split recursively first."""

    def __init__(self, embedder: "Embedder", threshold: float = 0.5, size: int = 800, overlap: int = 0):
        if not -1.0 <= float(threshold) <= 1.0:
            raise ValueError(f"semantic threshold must be in [-1, 1], got {threshold!r}")
        self.embedder = embedder
        self.threshold = float(threshold)
        self._recursive = RecursiveChunker(size, min(overlap, size - 1))
        self.size = size

    def chunk(self, text: str) -> list[str]:
        sentences: list[str] = []
        for s in split_sentences(text):
            sentences.extend(self._recursive.atoms(s) if len(s) > self.size else [s])
        sentences = [s for s in sentences if s.strip()]
        if len(sentences) <= 1:
            return [s.strip() for s in sentences]
        vecs = self.embedder.embed([s.strip() for s in sentences])
        sims = (vecs[:-1] * vecs[1:]).sum(axis=1)
        chunks: list[str] = []
        cur = [sentences[0]]
        cur_len = len(sentences[0])
        for sent, sim in zip(sentences[1:], sims):
            if sim < self.threshold or cur_len + len(sent) > self.size:
                chunks.append("".join(cur))
                cur, cur_len = [], 0
            cur.append(sent)
            cur_len += len(sent)
        chunks.append("".join(cur))
        return [c.strip() for c in chunks if c.strip()]
