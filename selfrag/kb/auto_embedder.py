"""``kb.embedding_model = "auto"`` (the default): a collection keeps the embedder recorded with it; a
new collection gets the one its first ingest's language asks for — English text the packaged MiniLM,
Chinese or mixed text the multilingual ``use-m3`` — and records it (:class:`AutoEmbedder`).

The language guess is a plain function of the share of CJK characters (:func:`corpus_language`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from selfrag.settings import AUTO_EMBEDDER, PACKAGED_EMBEDDER

if TYPE_CHECKING:  # pragma: no cover
    from selfrag.kb.embedder import Embedder
    from selfrag.kb.store import ChromaStore

ENGLISH_EMBEDDER = PACKAGED_EMBEDDER
MULTILINGUAL_EMBEDDER = "use-m3"
MIXED_SHARE = 0.02  # CJK characters among letters from which a corpus counts as mixed (one 汉字 ~ one word)
CHINESE_SHARE = 0.5
DOCUMENT_SHARE = 0.3  # one document this Chinese makes the corpus mixed, however much English surrounds it
EMBEDDER_LANGUAGES = {ENGLISH_EMBEDDER: frozenset({"en"})}  # what an embedder without a `languages` serves

_CJK = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]")
_LATIN = re.compile(r"[A-Za-z\u00c0-\u024f]")


def letter_counts(text: str) -> tuple[int, int]:
    """``(CJK characters, Latin letters)`` of ``text`` (kana and hangul count as CJK)."""
    return len(_CJK.findall(text)), len(_LATIN.findall(text))


def cjk_share(text: str) -> float:
    """Share of CJK characters among the letters of ``text`` (0 when it has no letters)."""
    cjk, latin = letter_counts(text)
    return cjk / (cjk + latin) if cjk + latin else 0.0


def corpus_language(texts: Sequence[str]) -> str:
    """``"zh"`` (mostly CJK), ``"mixed"`` (a Chinese document among others, or a few percent CJK),
    ``"en"`` (Latin letters) or ``"und"`` (no letters at all: emoji, symbols, digits)."""
    cjk = latin = 0
    dense_document = False
    for text in texts:
        c, lat = letter_counts(text)
        cjk, latin = cjk + c, latin + lat
        dense_document = dense_document or (c + lat > 0 and c / (c + lat) >= DOCUMENT_SHARE)
    if cjk + latin == 0:
        return "und"
    share = cjk / (cjk + latin)
    if share >= CHINESE_SHARE:
        return "zh"
    return "mixed" if share >= MIXED_SHARE or dense_document else "en"


def embedder_for(texts: Sequence[str]) -> str:
    """The embedder name ``auto`` picks for a collection whose first texts are ``texts``."""
    return MULTILINGUAL_EMBEDDER if corpus_language(texts) in ("zh", "mixed") else ENGLISH_EMBEDDER


def serves(embedder: object, language: str) -> bool:
    """Whether ``embedder`` was trained for ``language`` ("en", "zh", ...; unknown embedders serve all)."""
    languages = getattr(embedder, "languages", None) or EMBEDDER_LANGUAGES.get(getattr(embedder, "name", ""))
    return languages is None or language in languages or language == "und"


class AutoEmbedder:
    """The :class:`~selfrag.kb.embedder.Embedder` of an ``auto`` knowledge base: the collection's
    recorded embedder once it has chunks; before that, :meth:`choose_for` picks one from the texts
    about to be written and sets it on the store (which records it with the first chunks). A query on
    a still-empty collection is embedded by the embedder its own language asks for, nothing recorded."""

    def __init__(self, store: "ChromaStore", batch_size: int = 64,
                 make: Callable[[str, int], "Embedder"] | None = None):
        if make is None:
            from selfrag.kb.embedder import make_embedder as make
        self.store = store
        self.batch_size = batch_size
        self._make = make
        self._chosen: "Embedder | None" = None

    def resolved(self) -> "Embedder | None":
        """The collection's embedder: chosen here, or read from the collection's record (None while it is empty)."""
        if self._chosen is None:
            recorded = self.store.recorded_embedder()
            if recorded is not None:
                self._use(recorded)
        return self._chosen

    def _use(self, name: str) -> "Embedder":
        self._chosen = self._make(name, self.batch_size)
        self.store.embedder_name = self._chosen.name
        return self._chosen

    def choose_for(self, texts: Sequence[str]) -> str:
        """The embedder that writes ``texts``: the recorded one, else the one their language asks for."""
        return (self.resolved() or self._use(embedder_for(texts))).name

    @property
    def name(self) -> str:
        chosen = self.resolved()
        return chosen.name if chosen is not None else AUTO_EMBEDDER

    @property
    def languages(self) -> frozenset[str] | None:
        chosen = self.resolved()
        return None if chosen is None else getattr(chosen, "languages", None) or EMBEDDER_LANGUAGES.get(chosen.name)

    @property
    def dim(self) -> int:
        chosen = self.resolved()
        return (chosen or self._make(ENGLISH_EMBEDDER, self.batch_size)).dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.choose_for(texts)
        assert self._chosen is not None
        return self._chosen.embed(texts)

    def embed_queries(self, queries: Sequence[str]) -> np.ndarray:
        from selfrag.kb.embedder_support import query_vectors

        chosen = self.resolved() or self._make(embedder_for(queries), self.batch_size)
        return query_vectors(chosen, queries)
