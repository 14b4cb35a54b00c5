"""Parent-document / multi-representation index: small child units point to their parent chunk.

For every chunk (the parent) of a collection, child units are indexed in the sibling collection
``<collection>.children``: its sentences, an LM summary and hypothetical questions the chunk answers
(``representations``). Each child carries ``parent_id`` and its ``representation`` and a copy of the
parent's metadata, so filters work on children too. :class:`ParentDocumentRetriever` matches the
children and returns the parents, deduplicated, best match first.

Idempotent: sentence children have content-derived ids; an LM child is made once per parent chunk
(whose id is content-derived) and kept while that chunk exists (new metadata of the chunk is copied to
its children on a rebuild); children of removed chunks are deleted.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from programs.retriever_calls import call_retriever
from programs.types import Passage, Retriever
from selfrag.kb.chunking import split_sentences
from selfrag.kb.indexes.common import IndexReport, node_id, remove_stale, sibling
from selfrag.kb.ingest import ChunkRecord, _progress, write_chunks
from selfrag.kb.store import ChromaStore, clean_metadata

if TYPE_CHECKING:  # pragma: no cover
    from selfrag.kb.knowledge_base import KnowledgeBase

log = logging.getLogger(__name__)

SUFFIX = "children"
REPRESENTATIONS = ("sentences", "summary", "questions")
LM_REPRESENTATIONS = ("summary", "questions")
Summariser = Callable[[list[str]], str]
QuestionWriter = Callable[[str], list[str]]
MAX_CHILD_CHARS = 1000


def build_multi_representation(kb: "KnowledgeBase", *, representations: Sequence[str] = REPRESENTATIONS,
                               summarise: Summariser | None = None, questions: QuestionWriter | None = None,
                               max_questions: int = 3, progress: bool = True) -> IndexReport:
    """Build or update ``<collection>.children`` for ``kb`` (see the module doc)."""
    unknown = [r for r in representations if r not in REPRESENTATIONS]
    if unknown or not representations:
        raise ValueError(f"representations must be some of {', '.join(REPRESENTATIONS)}; got {list(representations)}")
    if "summary" in representations and summarise is None:
        raise ValueError("the summary representation needs a summariser")
    if "questions" in representations and questions is None:
        raise ValueError("the questions representation needs a question writer")
    t0 = time.perf_counter()
    target = sibling(kb, SUFFIX)
    report = IndexReport(kind="multi-representation", collection=target.name)
    existing: dict[tuple[str, str], list[str]] = {}
    stored: dict[str, dict[str, Any]] = {}  # child id -> its metadata
    for cid, _text, meta in target.store.iter_all(include_sources_only=True):
        existing.setdefault((str(meta.get("parent_id")), str(meta.get("representation"))), []).append(cid)
        stored[cid] = meta
    parents = sorted(kb.store.iter_all(), key=lambda row: row[0])
    needs_lm = sum(1 for pid, _t, _m in parents for r in representations
                   if r in LM_REPRESENTATIONS and (pid, r) not in existing)
    bar = _progress(progress and needs_lm > 0, needs_lm, "writing child representations")
    records: list[ChunkRecord] = []
    keep: set[str] = set()
    restamp: dict[str, dict[str, Any]] = {}  # kept LM children whose parent's metadata changed
    try:
        for pid, text, meta in parents:
            base = {k: v for k, v in meta.items() if k not in ("content_hash", "chunk_index")}
            for rep in representations:
                if rep in LM_REPRESENTATIONS and (pid, rep) in existing:
                    keep.update(existing[(pid, rep)])
                    meta_now = {**base, "parent_id": pid, "representation": rep}
                    restamp.update((cid, meta_now) for cid in existing[(pid, rep)]
                                   if stored[cid] != clean_metadata(meta_now))
                    continue
                texts = _children(rep, text, summarise, questions, max_questions, report)
                if rep in LM_REPRESENTATIONS and bar is not None:
                    bar.advance(bar.task_ids[0])
                for n, child in enumerate(texts):
                    cid = node_id("child", pid, rep, str(n), child)
                    keep.add(cid)
                    records.append(ChunkRecord(cid, child, {**base, "parent_id": pid, "representation": rep}))
    finally:
        if bar is not None:
            bar.stop()
    written = write_chunks(target.store, target.embedder, records, batch_size=kb.write_batch, progress=progress)
    target.store.replace_metadata(list(restamp), list(restamp.values()))
    report.nodes_added = written.chunks_added
    report.nodes_unchanged = len(keep) - written.chunks_added
    report.nodes_removed = remove_stale(target.store, keep)
    report.nodes_total = len(keep)
    report.seconds = time.perf_counter() - t0
    log.info("multi-representation %s: %d children of %d chunks, %d added, %d removed, %d LM calls",
             target.name, report.nodes_total, len(parents), report.nodes_added, report.nodes_removed, report.lm_calls)
    return report


def _children(rep: str, text: str, summarise: Summariser | None, questions: QuestionWriter | None,
              max_questions: int, report: IndexReport) -> list[str]:
    if rep == "sentences":
        sentences = [s.strip() for s in split_sentences(text) if s.strip()]
        return sentences if len(sentences) > 1 else [" ".join(text.split())[:MAX_CHILD_CHARS]]  # its own child
    report.lm_calls += 1
    try:
        out = [summarise([text])] if rep == "summary" else list(questions(text))  # type: ignore[misc]
    except Exception as exc:  # noqa: BLE001 - one failed LM child is skipped (made again next build), recorded
        log.warning("%s for a chunk failed: %s: %s", rep, type(exc).__name__, exc)
        out = []
    cleaned = [" ".join(str(t).split())[:MAX_CHILD_CHARS] for t in out if str(t or "").strip()]
    if not cleaned:
        report.lm_failures += 1
    return list(dict.fromkeys(cleaned))[: 1 if rep == "summary" else max_questions]


class ParentDocumentRetriever:
    """Retrieve over the children, return their parents (deduplicated, in order of their best child).

    ``fanout``: children fetched per parent wanted (``k * fanout`` children are searched first). When
    they name fewer than ``k`` parents — one parent's many children can fill the list — the request is
    doubled until ``k`` parents are found, the children run out (fewer came back than were asked for) or
    ``max_children`` were asked for. A parent gets the score of its best child and
    ``metadata["matched"]`` = that child's representation. ``dense_query`` (HyDE) goes to the children's
    retriever when it takes one.
    """

    def __init__(self, children: Retriever, parents: ChromaStore, fanout: int = 4, max_children: int = 1024):
        if fanout < 1:
            raise ValueError(f"fanout must be >= 1, got {fanout!r}")
        if max_children < 1:
            raise ValueError(f"max_children must be >= 1, got {max_children!r}")
        self.children = children
        self.parents = parents
        self.fanout = fanout
        self.max_children = max_children

    def retrieve(self, query: str, k: int = 5, filters: dict[str, Any] | None = None, *,
                 dense_query: str | None = None) -> list[Passage]:
        if not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be a positive int, got {k!r}")
        ask = min(k * self.fanout, self.max_children)
        while True:
            children = call_retriever(self.children, query, ask, filters, dense_query=dense_query)
            out = self._parents(children, k)
            if len(out) >= k or len(children) < ask or ask >= self.max_children:
                return out
            ask = min(ask * 2, self.max_children)

    def _parents(self, children: list[Passage], k: int) -> list[Passage]:
        """The first ``k`` stored parents of ``children``, each with its best child's score."""
        best: dict[str, Passage] = {}
        for child in children:
            pid = str(child.metadata.get("parent_id") or "")
            if pid and pid not in best:
                best[pid] = child
        found = self.parents.get(list(best))
        out = []
        for pid, child in best.items():
            if pid in found:
                text, meta = found[pid]
                meta["matched"] = str(child.metadata.get("representation", ""))
                out.append(Passage(id=pid, text=text, score=child.score, metadata=meta))
            if len(out) == k:
                break
        return out
