"""An offline "web": a separate local collection searched like the web, for tests and demos.

:class:`OfflineWebSearch` wraps any retriever (``retrieve(query, k) -> list[Passage]``; in practice the
knowledge base's retriever over the collection named by ``WebSettings.offline_collection``) and makes
its passages look like web results: a stable pseudo-URL ``offline://<collection>/<doc>`` in
``metadata["url"]``, a title and ``origin = "web"``.

:func:`offline_web_documents` builds that collection's documents from XQuAD paragraphs and HaluEval
knowledge snippets as ``(text, metadata)`` pairs for ``KnowledgeBase.add_documents``.
"""

from __future__ import annotations

import json
import logging
import re
import unicodedata
from pathlib import Path
from typing import Any

from programs.types import Passage, Retriever, WebSearchError

logger = logging.getLogger(__name__)

SCHEME = "offline"
XQUAD_FILE = Path("xquad") / "en.json"
HALUEVAL_FILE = Path("halueval") / "qa.jsonl"


def slugify(text: str, max_len: int = 60) -> str:
    """Lower-case ASCII slug: ``"Super_Bowl 50!"`` -> ``"super-bowl-50"``; ``""`` -> ``"untitled"``."""
    decomposed = unicodedata.normalize("NFKD", text)
    # Accents go ("é" -> "e"); any other non-ASCII character ("–", "中") separates words.
    ascii_text = "".join(c if c.isascii() else " " for c in decomposed if not unicodedata.combining(c))
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")
    if len(slug) > max_len:
        cut = slug[: max_len + 1]
        slug = cut[: cut.rfind("-")] if "-" in cut[1:] else slug[:max_len]
    return slug.strip("-") or "untitled"


def pseudo_url(collection: str, doc: str) -> str:
    """``offline://<collection>/<doc>``; ``doc`` may contain ``/`` and ``#``, each segment is slugged."""
    path, _, frag = doc.partition("#")
    segments = "/".join(slugify(seg) for seg in path.split("/") if seg) or "untitled"
    return f"{SCHEME}://{slugify(collection)}/{segments}" + (f"#{slugify(frag)}" if frag else "")


class OfflineWebSearch:
    """:class:`~programs.types.WebSearch` over a local retriever; raises ``WebSearchError`` on failure.

    A passage keeps its text and score; its metadata gains ``url`` (kept if it already is one, else a
    pseudo-URL from its document id or title), ``title``, ``source`` (= url) and ``origin = "web"``.
    Its id becomes ``web:<original id>`` so it never collides with a knowledge-base chunk id.
    """

    def __init__(self, retriever: Retriever, collection: str = "web", max_results: int = 3):
        if not callable(getattr(retriever, "retrieve", None)):
            raise TypeError(f"OfflineWebSearch needs an object with retrieve(query, k); got {type(retriever).__name__}")
        if max_results < 1:
            raise ValueError(f"max_results must be >= 1, got {max_results}")
        self.retriever = retriever
        self.collection = collection
        self.max_results = max_results

    def __repr__(self) -> str:
        return f"OfflineWebSearch(collection={self.collection!r}, retriever={type(self.retriever).__name__})"

    def search(self, query: str, max_results: int | None = None) -> list[Passage]:
        n = self.max_results if max_results is None else min(max_results, self.max_results)  # web.max_results caps
        if n < 1:
            raise ValueError(f"max_results must be >= 1, got {n}")
        if not query or not query.strip():
            raise WebSearchError("bad_request", "the search query is empty")
        try:
            found = self.retriever.retrieve(query, k=n)
        except WebSearchError:
            raise
        except Exception as exc:  # the local "web" failing is a web failure, recorded by the caller
            raise WebSearchError(
                "offline_error", f"offline web collection {self.collection!r} failed: {type(exc).__name__}: {exc}"
            ) from exc
        passages = [self._as_web(p) for p in found[:n] if p.text.strip()]
        if not passages:
            raise WebSearchError("empty", f"offline web collection {self.collection!r} has no result for {query!r}")
        logger.info("offline web: %d result(s) for %r from %r", len(passages), query, self.collection)
        return passages

    def _as_web(self, p: Passage) -> Passage:
        meta: dict[str, Any] = dict(p.metadata)
        url = str(meta.get("url") or "")
        if not url:
            doc = str(meta.get("doc_id") or meta.get("title") or p.id)
            url = pseudo_url(self.collection, doc)
        title = str(meta.get("title") or url)
        meta.update(url=url, title=title, source=url, origin="web")
        pid = p.id if p.id.startswith("web:") else f"web:{p.id}"
        return Passage(id=pid, text=p.text, score=p.score, metadata=meta)


def offline_web_documents(
    datasets_dir: Path,
    collection: str = "web",
    *,
    limit_per_source: int | None = None,
) -> list[tuple[str, dict[str, Any]]]:
    """Documents for the offline web collection: XQuAD (en) paragraphs and HaluEval QA knowledge.

    Reads ``<datasets_dir>/xquad/en.json`` (``data[].title``, ``data[].paragraphs[].context``) and
    ``<datasets_dir>/halueval/qa.jsonl`` (field ``knowledge``); a missing file is skipped with a warning,
    both missing is a ``FileNotFoundError``. Texts are deduplicated. Each metadata has ``title``,
    ``url`` (``offline://<collection>/<dataset>/<slug>``, unique), ``source`` (= url), ``dataset``
    and ``doc_id``.
    """
    datasets_dir = Path(datasets_dir)
    xquad, halueval = datasets_dir / XQUAD_FILE, datasets_dir / HALUEVAL_FILE
    if not xquad.is_file() and not halueval.is_file():
        raise FileNotFoundError(f"no offline web sources under {datasets_dir}: expected {xquad} and/or {halueval}")
    docs: list[tuple[str, dict[str, Any]]] = []
    seen: set[str] = set()
    for path, reader in ((xquad, _xquad_docs), (halueval, _halueval_docs)):
        if not path.is_file():
            logger.warning("offline web: %s not found; skipping it", path)
            continue
        count = 0
        for text, title, doc in reader(path):
            if limit_per_source is not None and count >= limit_per_source:
                break
            key = " ".join(text.split())
            if not key or key in seen:
                continue
            seen.add(key)
            url = pseudo_url(collection, doc)
            docs.append((text, {"title": title, "url": url, "source": url, "dataset": doc.split("/")[0], "doc_id": doc}))
            count += 1
        logger.info("offline web: %d document(s) from %s", count, path)
    return docs


def _xquad_docs(path: Path):
    data = json.loads(path.read_text(encoding="utf-8"))
    for article in data.get("data", []):
        raw_title = str(article.get("title") or "untitled")
        title = raw_title.replace("_", " ")
        for i, para in enumerate(article.get("paragraphs", [])):
            text = str(para.get("context") or "").strip()
            if text:
                yield text, title, f"xquad/{slugify(raw_title)}#p{i}"


_GLUED_SENTENCE = re.compile(r"(?<=[a-z0-9)\]\"'])\.(?=[A-Z][a-z])")


def _halueval_docs(path: Path):
    with path.open(encoding="utf-8") as fh:
        for line_no, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                logger.warning("offline web: %s line %d is not JSON (%s); skipping it", path, line_no, exc)
                continue
            # HaluEval glues its Wikipedia snippets together ("...century.First for Women is...").
            text = _GLUED_SENTENCE.sub(". ", str(row.get("knowledge") or "")).strip()
            if text:
                title = _title_from_text(text)
                yield text, title, f"halueval/{line_no:04d}-{slugify(title, 40)}"


def _title_from_text(text: str, words: int = 8) -> str:
    first = re.split(r"(?<=[.!?])\s", text, maxsplit=1)[0]
    parts = first.split()
    return " ".join(parts[:words]) + ("…" if len(parts) > words else "")
