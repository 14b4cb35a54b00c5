"""RAPTOR (Sarthi et al. 2024): a tree of LM summaries over clustered chunks, retrieved as a collapsed tree.

Level 0 is the collection's chunks. Each level's node embeddings are reduced (PCA; the paper uses
UMAP) and clustered with a Gaussian mixture whose number of components is chosen by BIC
(scikit-learn ``GaussianMixture``, fixed seed), clusters larger than ``max_cluster_size`` split
again; each cluster of two or more nodes is summarised by the LM into a node of the next level (a
single node is carried up as it is). It recurses until one node is left, a level no longer
merges anything, or ``max_levels`` levels of summaries exist.

All levels live in one sibling collection ``<collection>.raptor`` (the chunks copied with their
embeddings, the summaries embedded by the collection's embedder): its ordinary hybrid retriever is
the collapsed-tree retrieval (:class:`RaptorRetriever`). A summary's id hashes its members' ids, which are
content-derived, so a re-build reuses every unchanged cluster's summary (no LM call) and deletes nodes no
longer in the tree.

Filters: a summary carries the metadata all the chunks under it agree on (``title``, ``language``, any key
with one value among them) — except ``source``, which stays ``raptor:<collection>`` (its text is no
document's) — and, in ``_raptor_members`` (a JSON string: Chroma metadata holds no lists), each key's
values among those chunks. :class:`RaptorRetriever` lets a summary through a filter only when every chunk
under it would pass: ``{"source": {"$ne": "a.md"}}`` drops every summary over a chunk of ``a.md``,
``{"source": "a.md"}`` keeps the summaries of ``a.md``'s chunks alone (in the dense and the BM25 search
alike). A condition is tested on each of its key's values among the chunks (a chunk without the key as
Chroma treats one; a key no chunk has, such as ``raptor_level``, on the summary's own value); ``$and``
holds when each part does, ``$or`` when one of its parts holds for every chunk (a summary whose chunks
pass different parts is left out: none is let through wrongly). A key with more than
``MAX_MEMBER_VALUES`` values among the chunks, or a summary built before they were recorded (rebuild the
index), fails every condition on it.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from programs.filter_grammar import INTERNAL_KEYS
from programs.retriever_calls import call_retriever, query_warning, retriever_embedder
from programs.types import Passage, Retriever
from selfrag.kb.filters import matches
from selfrag.kb.indexes.common import IndexReport, iter_with_embeddings, node_id, remove_stale, sibling
from selfrag.kb.ingest import _progress
from selfrag.kb.store import clean_metadata

if TYPE_CHECKING:  # pragma: no cover
    from selfrag.kb.knowledge_base import KnowledgeBase

log = logging.getLogger(__name__)

SUFFIX = "raptor"
Summariser = Callable[[list[str]], str]
MAX_SUMMARY_CHARS = 2000
LEVEL = "raptor_level"
MEMBERS = "_raptor_members"  # a summary's chunks' metadata: JSON {key: [distinct values, null: a chunk lacks it]}
MAX_ASK_FACTOR = 8  # a filtered search asks for at most 8k nodes (summaries that fail the filter are dropped)
MAX_MEMBER_VALUES = 64  # more values of a key are not recorded (null): every condition on it fails the summary
Values = dict[str, set]  # key -> the values of the chunks under a node (None: a chunk without the key)


def cluster_embeddings(vectors: np.ndarray, max_clusters: int = 8, max_cluster_size: int = 8,
                       reduce_dims: int = 10, seed: int = 0) -> list[list[int]]:
    """Groups of row indices: a BIC-chosen full-covariance Gaussian mixture over PCA-reduced vectors
    (at most ``reduce_dims`` and ``n // 3`` dimensions, so each component's covariance stays
    estimable), at most ``n // 2`` components; a lone row joins the nearest group with room; no
    group above ``max_cluster_size`` (large ones are clustered again, or cut in order when the
    mixture cannot split them). Deterministic for a given input order and seed; groups ordered by
    their first row."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):  # small matrices: BLAS threads only contend (20x slower on 2 busy cores)
        return _cluster(np.asarray(vectors), max_clusters, max_cluster_size, reduce_dims, seed)


def _cluster(vectors: np.ndarray, max_clusters: int, max_cluster_size: int, reduce_dims: int,
             seed: int) -> list[list[int]]:
    from sklearn.decomposition import PCA
    from sklearn.mixture import GaussianMixture

    n = len(vectors)
    if n <= 1:
        return [list(range(n))]
    x = np.asarray(vectors, dtype=np.float64)
    dims = min(reduce_dims, max(2, n // 3), n - 1, x.shape[1])
    if dims < x.shape[1]:
        x = PCA(n_components=dims, random_state=seed).fit_transform(x)
    low = max(1, math.ceil(n / max_cluster_size))
    high = max(low, min(max_clusters, n // 2))
    best, best_bic = None, math.inf
    for k in range(low, high + 1):
        gmm = GaussianMixture(n_components=k, covariance_type="full", reg_covar=1e-3, n_init=3,
                              random_state=seed).fit(x)
        bic = gmm.bic(x)
        if bic < best_bic:
            best, best_bic = gmm, bic
    labels = best.predict(x)
    groups: dict[int, list[int]] = {}
    for row, label in enumerate(labels):
        groups.setdefault(int(label), []).append(row)
    _adopt_lone_rows(groups, x, max_cluster_size)
    out: list[list[int]] = []
    for rows in groups.values():
        if len(rows) <= max_cluster_size:
            out.append(rows)
        elif len(groups) > 1:  # the mixture split something: cluster the large group again
            sub = _cluster(vectors[rows], max_clusters, max_cluster_size, reduce_dims, seed)
            out.extend([rows[i] for i in g] for g in sub)
        else:
            out.extend(rows[s:s + max_cluster_size] for s in range(0, len(rows), max_cluster_size))
    return sorted(out, key=lambda g: g[0])


def _adopt_lone_rows(groups: dict[int, list[int]], x: np.ndarray, max_size: int) -> None:
    """Move each single-row group into the group with the nearest centroid that has room (in place)."""
    for label in [g for g, rows in groups.items() if len(rows) == 1]:
        row = groups[label][0]
        others = [(float(np.linalg.norm(x[row] - x[rows].mean(axis=0))), g) for g, rows in groups.items()
                  if g != label and len(rows) > 1 and len(rows) < max_size]
        if others:
            groups[min(others)[1]].append(row)
            del groups[label]


def build_raptor(kb: "KnowledgeBase", summarise: Summariser, *, max_levels: int = 3, max_clusters: int = 8,
                 max_cluster_size: int = 8, reduce_dims: int = 10, seed: int = 0,
                 progress: bool = True) -> IndexReport:
    """Build or update ``<collection>.raptor`` for ``kb`` (see the module doc); idempotent."""
    if max_levels < 1 or max_cluster_size < 2 or max_clusters < 1:
        raise ValueError("raptor needs max_levels >= 1, max_clusters >= 1 and max_cluster_size >= 2")
    t0 = time.perf_counter()
    target = sibling(kb, SUFFIX)
    report = IndexReport(kind="raptor", collection=target.name)
    leaves = sorted(iter_with_embeddings(kb.store), key=lambda row: row[0])
    stored = set(target.store.all_ids())

    todo = [row for row in leaves if row[0] not in stored]
    for s in range(0, len(todo), kb.write_batch):
        batch = todo[s:s + kb.write_batch]
        target.store.add([r[0] for r in batch], [r[1] for r in batch], np.stack([r[3] for r in batch]),
                         [{**r[2], "raptor_level": 0} for r in batch])
    copies = target.store.metadatas([row[0] for row in leaves if row[0] in stored])  # a chunk's new metadata:
    moved = [(r[0], {**r[2], "raptor_level": 0}) for r in leaves if r[0] in copies]   # its copy follows
    moved = [(cid, meta) for cid, meta in moved if copies[cid] != clean_metadata(meta)]
    target.store.replace_metadata([cid for cid, _ in moved], [meta for _, meta in moved])
    report.nodes_added += len(todo)
    report.nodes_unchanged += len(leaves) - len(todo)
    keep = {row[0] for row in leaves}
    report.levels.append(len(leaves))

    nodes = [(cid, text, vec, _leaf_values(meta)) for cid, text, meta, vec in leaves]
    restamp: dict[str, dict] = {}  # reused summaries whose chunks' metadata changed
    for level in range(1, max_levels + 1):
        if len(nodes) < 2:
            break
        groups = cluster_embeddings(np.stack([n[2] for n in nodes]), max_clusters, max_cluster_size,
                                    reduce_dims, seed)
        if all(len(g) == 1 for g in groups):
            break
        merged = [g for g in groups if len(g) > 1]
        ids = {tuple(g): node_id("raptor", *sorted(nodes[i][0] for i in g)) for g in merged}
        cached = target.store.get([i for i in ids.values() if i in stored])
        cached_vecs = _embeddings(target, list(cached))
        bar = _progress(progress and len(cached) < len(merged), len(merged) - len(cached),
                        f"summarising level {level}")
        next_nodes = []
        try:
            for g in groups:
                if len(g) == 1:
                    next_nodes.append(nodes[g[0]])
                    continue
                sid = ids[tuple(g)]
                members = sorted((nodes[i] for i in g), key=lambda n: n[0])
                values = _merge([m[3] for m in members])
                meta = summary_metadata(kb.name, level, [m[0] for m in members], values)
                if sid in cached:
                    report.nodes_unchanged += 1
                    if cached[sid][1] != clean_metadata(meta):
                        restamp[sid] = meta
                    next_nodes.append((sid, cached[sid][0], cached_vecs[sid], values))
                else:
                    summary = _summarise(summarise, [m[1] for m in members], report)
                    if bar is not None:
                        bar.advance(bar.task_ids[0])
                    if summary is None:  # a failed summary: its members go up unmerged
                        next_nodes.extend(members)
                        continue
                    vec = target.embedder.embed([summary])[0]
                    target.store.add([sid], [summary], vec[None, :], [meta])
                    report.nodes_added += 1
                    next_nodes.append((sid, summary, vec, values))
                keep.add(sid)
        finally:
            if bar is not None:
                bar.stop()
        report.levels.append(sum(1 for n in next_nodes if n[0] in ids.values()))
        if len(next_nodes) == len(nodes):
            break
        nodes = next_nodes
    target.store.replace_metadata(list(restamp), list(restamp.values()))
    report.nodes_removed = remove_stale(target.store, keep)
    report.nodes_total = len(keep)
    report.seconds = time.perf_counter() - t0
    log.info("raptor %s: %d nodes (levels %s), %d added, %d removed, %d LM calls", target.name, report.nodes_total,
             report.levels, report.nodes_added, report.nodes_removed, report.lm_calls)
    return report


def _summarise(summarise: Summariser, texts: Sequence[str], report: IndexReport) -> str | None:
    report.lm_calls += 1
    try:
        summary = " ".join(str(summarise(list(texts)) or "").split())[:MAX_SUMMARY_CHARS]
    except Exception as exc:  # noqa: BLE001 - one failed summary leaves its cluster unmerged, recorded
        log.warning("raptor summary failed: %s: %s", type(exc).__name__, exc)
        summary = ""
    if not summary:
        report.lm_failures += 1
        return None
    return summary


def _embeddings(target: "KnowledgeBase", ids: list[str]) -> dict[str, np.ndarray]:
    if not ids:
        return {}
    got = target.store.collection.get(ids=ids, include=["embeddings"])
    return {i: np.asarray(e, dtype=np.float32) for i, e in zip(got["ids"], got["embeddings"])}


def _leaf_values(meta: dict) -> Values:
    return {key: {value} for key, value in meta.items() if key not in INTERNAL_KEYS}


def _merge(members: list[Values]) -> Values:
    """The values of each key over the chunks under ``members`` (None for a chunk without it)."""
    keys = set().union(*members)
    return {key: set().union(*(m.get(key, {None}) for m in members)) for key in keys}


def summary_metadata(kb_name: str, level: int, children: list[str], values: Values) -> dict:
    """A summary node's metadata: what its chunks agree on, its own source and level, its children's
    ids and its chunks' values per key (:data:`MEMBERS`)."""
    shared = {key: next(iter(vs)) for key, vs in values.items() if len(vs) == 1 and None not in vs}
    listed = {key: sorted(vs, key=lambda v: (type(v).__name__, str(v))) if len(vs) <= MAX_MEMBER_VALUES else None
              for key, vs in values.items()}
    return {"title": f"summary, level {level}", **shared, "source": f"raptor:{kb_name}", LEVEL: level,
            "kind": "summary", "children": json.dumps(children), MEMBERS: json.dumps(listed, sort_keys=True)}


def summary_passes(where: dict, metadata: dict) -> bool:
    """Whether every chunk under the summary with ``metadata`` passes the Chroma ``where`` (the module doc)."""
    try:
        members = json.loads(metadata[MEMBERS])
    except (KeyError, TypeError, ValueError):
        return False  # built before members were recorded
    return _all_pass(where, members, metadata)


def _all_pass(where: dict, members: dict, own: dict) -> bool:
    for key, cond in where.items():
        if key == "$and":
            ok = all(_all_pass(sub, members, own) for sub in cond)
        elif key == "$or":
            ok = any(_all_pass(sub, members, own) for sub in cond)
        else:  # a key no chunk carries (raptor_level, kind): the summary's own value
            values = members[key] if key in members else [own.get(key)]
            ok = values is not None and all(matches({key: cond}, {} if v is None else {key: v}) for v in values)
        if not ok:
            return False
    return True


class RaptorRetriever:
    """The collapsed tree: ``tree`` (the ``.raptor`` collection's own retriever) with a filter applied to a
    summary as to every chunk under it (:func:`summary_passes`). With a filter, ``tree`` is asked for the
    chunks that pass it and every summary, and more (doubling up to ``MAX_ASK_FACTOR`` × ``k`` and the node
    count ``size()``) while the summaries that fail leave fewer than ``k``: a very selective filter may then
    return fewer than ``k``. Passages come back without :data:`MEMBERS`."""

    def __init__(self, tree: Retriever, size: Callable[[], int]):
        self.tree = tree
        self.size = size

    @property
    def embedder_name(self) -> str | None:
        return retriever_embedder(self.tree)

    def query_warning(self, query: str) -> str | None:
        return query_warning(self.tree, query)

    def retrieve(self, query: str, k: int = 5, filters: dict | None = None, *,
                 dense_query: str | None = None) -> list[Passage]:
        if not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be a positive int, got {k!r}")
        if not filters:
            return [_shown(p) for p in call_retriever(self.tree, query, k, dense_query=dense_query)]
        where = {"$or": [filters, {LEVEL: {"$gt": 0}}]}
        ask, most = k, k * MAX_ASK_FACTOR  # bounded: a selective filter must not pull every summary each query
        while True:
            got = call_retriever(self.tree, query, ask, where, dense_query=dense_query)
            kept = [p for p in got if not p.metadata.get(LEVEL) or summary_passes(filters, p.metadata)]
            if len(kept) >= k or len(got) < ask or ask >= min(most, size := self.size()):
                return [_shown(p) for p in kept[:k]]
            ask = min(ask * 2, most, size)


def _shown(passage: Passage) -> Passage:
    if MEMBERS not in passage.metadata:
        return passage
    return passage.model_copy(update={"metadata": {k: v for k, v in passage.metadata.items() if k != MEMBERS}})
