"""Index side: RAPTOR's tree on a small fixed corpus with a deterministic summariser, the
multi-representation children → parents index, idempotent re-builds."""

import json

import numpy as np
import pytest

from selfrag.kb.indexes import build_index, cluster_embeddings, index_retriever, stale_index, stale_indexes
from selfrag.kb.indexes.common import sibling

TOPICS = {
    "bike": ["Heron cargo bike range: Heron cargo bike rides 80 km.",
             "Heron cargo bike battery: Heron cargo bike charges in 4 hours.",
             "Heron cargo bike frame: Heron cargo bike carries 2 children.",
             "Heron cargo bike brakes: Heron cargo bike uses hydraulic discs."],
    "bread": ["Sourdough bread starter: sourdough bread needs flour and water.",
              "Sourdough bread dough: sourdough bread rises overnight.",
              "Sourdough bread baking: sourdough bread bakes at 250 degrees.",
              "Sourdough bread crust: sourdough bread crust gets crisp."],
    "moon": ["Moon orbit facts: Moon orbit lasts 27 days.", "Moon surface facts: Moon surface has craters.",
             "Moon tide facts: Moon tide follows gravity.", "Moon landing facts: Moon landing was in 1969."],
}
TOPIC_OF = {text: topic for topic, texts in TOPICS.items() for text in texts}


class FakeSummariser:
    """Deterministic: the sorted first two words of each text; records every call."""

    def __init__(self, fail_on: str | None = None):
        self.calls: list[list[str]] = []
        self.fail_on = fail_on

    def __call__(self, texts):
        self.calls.append(list(texts))
        if self.fail_on and any(self.fail_on in t for t in texts):
            raise RuntimeError("LM timed out")
        return "Summary of " + "; ".join(sorted(" ".join(t.split()[:3]) for t in texts))


@pytest.fixture
def topic_kb(make_kb):
    kb = make_kb("topics")
    kb.add_documents([(t, {"doc_id": f"{topic}{i}", "title": topic})
                      for topic, texts in TOPICS.items() for i, t in enumerate(texts)])
    return kb


def nodes(kb):
    tree = sibling(kb, "raptor")
    return {cid: (text, meta) for cid, text, meta in tree.store.iter_all()}


def test_raptor_builds_one_summary_per_topic_and_a_root(topic_kb):
    summarise = FakeSummariser()
    report = build_index(topic_kb, "raptor", summarise=summarise, progress=False)
    assert report.levels == [12, 3, 1] and report.lm_calls == 4 == len(summarise.calls)
    assert report.nodes_total == report.nodes_added == 16 and report.collection == "topics.raptor"
    tree = nodes(topic_kb)
    level1 = [(cid, meta) for cid, (_t, meta) in tree.items() if meta.get("raptor_level") == 1]
    leaves = {cid: text for cid, (text, meta) in tree.items() if meta.get("raptor_level") == 0}
    assert len(leaves) == 12 and len(level1) == 3
    topics_covered = sorted(sorted({TOPIC_OF[leaves[c]] for c in json.loads(meta["children"])}) for _, meta in level1)
    assert topics_covered == [["bike"], ["bread"], ["moon"]]  # each cluster is one topic
    root = [meta for _t, meta in tree.values() if meta.get("raptor_level") == 2]
    assert len(root) == 1 and sorted(json.loads(root[0]["children"])) == sorted(cid for cid, _ in level1)
    assert sorted(len(c) for c in summarise.calls) == [3, 4, 4, 4]


def test_collapsed_tree_retrieval_returns_leaves_and_summaries(topic_kb):
    build_index(topic_kb, "raptor", summarise=FakeSummariser(), progress=False)
    got = index_retriever(topic_kb, "raptor").retrieve("Heron cargo bike", k=5)
    levels = {p.metadata["raptor_level"] for p in got}
    assert levels == {0, 1} and all("Heron" in p.text for p in got)


def test_raptor_rebuild_is_idempotent_and_only_changed_clusters_are_resummarised(topic_kb):
    build_index(topic_kb, "raptor", summarise=FakeSummariser(), progress=False)
    before = nodes(topic_kb)
    again = FakeSummariser()
    report = build_index(topic_kb, "raptor", summarise=again, progress=False)
    assert again.calls == [] and report.nodes_added == 0 and report.nodes_removed == 0
    assert nodes(topic_kb) == before
    topic_kb.add_documents([("Heron cargo bike lights: Heron cargo bike lights use a dynamo.", {"doc_id": "bike9"})])
    changed = FakeSummariser()
    report = build_index(topic_kb, "raptor", summarise=changed, progress=False)
    assert len(changed.calls) == 2  # the bike cluster and the root; bread and moon come from the cache
    assert any("Heron cargo bike lights:" in t for t in changed.calls[0])
    assert report.nodes_removed == 2 and report.nodes_added == 3  # new leaf, new bike summary, new root
    assert report.levels == [13, 3, 1]


def test_a_failed_summary_leaves_its_cluster_unmerged(topic_kb):
    summarise = FakeSummariser(fail_on="Moon")
    report = build_index(topic_kb, "raptor", summarise=summarise, progress=False)
    assert report.lm_failures >= 1
    assert not any("Moon" in text for text, meta in nodes(topic_kb).values() if meta.get("raptor_level", 0) > 0)


def test_cluster_embeddings_separates_blobs_bounds_size_and_is_deterministic():
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(3, 32)) * 5
    x = np.concatenate([c + rng.normal(size=(6, 32)) * 0.1 for c in centres])
    groups = cluster_embeddings(x, reduce_dims=5)
    assert sorted(sorted(g) for g in groups) == [list(range(0, 6)), list(range(6, 12)), list(range(12, 18))]
    assert cluster_embeddings(x, reduce_dims=5) == groups
    capped = cluster_embeddings(x, max_cluster_size=4, reduce_dims=5)
    assert max(len(g) for g in capped) <= 4 and sorted(i for g in capped for i in g) == list(range(18))
    assert cluster_embeddings(x[:1]) == [[0]]


class FakeQuestions:
    def __init__(self):
        self.calls = []

    def __call__(self, text):
        self.calls.append(text)
        return [f"What about {' '.join(text.split()[:3])}?", f"What about {' '.join(text.split()[:3])}?", "x", "y"]


def test_multi_representation_children_point_to_parents_and_rebuild_is_idempotent(topic_kb):
    summarise, questions = FakeSummariser(), FakeQuestions()
    report = build_index(topic_kb, "multi-representation", summarise=summarise, questions=questions,
                         max_questions=3, progress=False)
    assert report.lm_calls == 24 and len(summarise.calls) == 12 and len(questions.calls) == 12
    children = sibling(topic_kb, "children")
    metas = [meta for _i, _t, meta in children.store.iter_all(include_sources_only=True)]
    parent_ids = set(topic_kb.store.all_ids())
    assert {m["parent_id"] for m in metas} == parent_ids
    per_rep = {r: sum(1 for m in metas if m["representation"] == r) for r in ("sentences", "summary", "questions")}
    assert per_rep == {"sentences": 12, "summary": 12, "questions": 36}  # one sentence each: its own child; max 3 questions after dedup
    retriever = index_retriever(topic_kb, "multi-representation")
    got = retriever.retrieve("sourdough bread crust crisp", k=2)
    assert len(got) == 2 and len({p.id for p in got}) == 2 and all(p.id in parent_ids for p in got)
    assert got[0].text == "Sourdough bread crust: sourdough bread crust gets crisp." and got[0].metadata["matched"]
    again_s, again_q = FakeSummariser(), FakeQuestions()
    report = build_index(topic_kb, "multi-representation", summarise=again_s, questions=again_q, progress=False)
    assert again_s.calls == again_q.calls == [] and report.nodes_added == 0 and report.nodes_removed == 0
    removed = topic_kb.delete_source("doc:moon0")
    assert removed == 1
    report = build_index(topic_kb, "multi-representation", summarise=again_s, questions=again_q, progress=False)
    assert report.nodes_removed == 1 + 1 + 3 and again_s.calls == []


def test_multi_representation_sentences_only_needs_no_lm(topic_kb):
    report = build_index(topic_kb, "multi-representation", representations=["sentences"], progress=False)
    assert report.lm_calls == 0 and report.nodes_total == 12


@pytest.mark.parametrize("kind,kwargs,message", [
    ("tree", {}, "unknown index 'tree'"),
    ("raptor", {}, "needs a summariser"),
    ("multi-representation", {}, "needs a summariser"),
    ("multi-representation", {"representations": ["pictures"]}, "representations must be some of"),
])
def test_bad_index_requests_name_the_problem(topic_kb, kind, kwargs, message):
    with pytest.raises(ValueError, match=message):
        build_index(topic_kb, kind, progress=False, **kwargs)


def test_empty_collection_and_unbuilt_index_are_errors(make_kb, topic_kb):
    with pytest.raises(ValueError, match="is empty"):
        build_index(make_kb("empty"), "raptor", summarise=FakeSummariser())
    with pytest.raises(ValueError, match="run selfrag ingest --index raptor --collection topics first"):
        index_retriever(topic_kb, "raptor")


@pytest.mark.parametrize("kind", ["raptor", "multi-representation"])
def test_an_index_knows_when_its_collection_changed_since_it_was_built(topic_kb, kind, caplog):
    """A RAPTOR index holds copies of the chunks and neither index sees new ones: once chunks are added
    or removed it is stale, retrieving over it warns with the command that rebuilds it, and a rebuild
    (idempotent) makes it current again."""
    build_index(topic_kb, kind, summarise=FakeSummariser(), questions=lambda text: ["Q?"], progress=False)
    assert stale_index(topic_kb, kind) is None and stale_indexes(topic_kb) == []
    ids = [cid for cid, _t, meta in topic_kb.store.iter_all() if meta.get("doc_id") == "moon0"]
    assert topic_kb.delete_ids(ids) == 1
    why = stale_index(topic_kb, kind)
    assert why and f"selfrag ingest --index {kind} --collection topics" in why
    assert stale_indexes(topic_kb) == [why]
    with caplog.at_level("WARNING"):
        index_retriever(topic_kb, kind)
    assert why in caplog.text
    build_index(topic_kb, kind, summarise=FakeSummariser(), questions=lambda text: ["Q?"], progress=False)
    assert stale_index(topic_kb, kind) is None
    topic_kb.add_documents([("Moon phase facts: Moon phase changes weekly.", {"doc_id": "moon9"})])
    assert stale_index(topic_kb, kind) is not None


@pytest.mark.parametrize("kind", ["raptor", "multi-representation"])
def test_new_metadata_of_unchanged_chunks_makes_an_index_stale_and_a_rebuild_carries_it(topic_kb, kind):
    build_index(topic_kb, kind, summarise=FakeSummariser(), questions=lambda text: ["Q?"], progress=False)
    moved = [(t, {"doc_id": f"moon{i}", "title": "lunar"}) for i, t in enumerate(TOPICS["moon"])]
    assert topic_kb.add_documents(moved).chunks_updated == 4
    assert stale_index(topic_kb, kind) is not None
    summarise = FakeSummariser()
    build_index(topic_kb, kind, summarise=summarise, questions=lambda text: ["Q?"], progress=False)
    assert stale_index(topic_kb, kind) is None and summarise.calls == []  # no text changed: nothing resummarised
    hits = index_retriever(topic_kb, kind, "bm25").retrieve("Moon orbit", k=3, filters={"title": "lunar"})
    assert hits and all(p.metadata["title"] == "lunar" for p in hits)
    assert index_retriever(topic_kb, kind, "bm25").retrieve("Moon orbit", k=3, filters={"title": "moon"}) == []
    if kind == "raptor":  # the reused moon summary carries its chunks' new metadata too
        got = index_retriever(topic_kb, kind, "bm25").retrieve("Summary of Moon", k=8, filters={"title": "lunar"})
        assert [p.metadata["title"] for p in got if p.metadata["raptor_level"] == 1] == ["lunar"]


def test_only_built_indexes_are_checked_and_none_is_created(topic_kb):
    from selfrag.kb.store import list_collections

    assert stale_indexes(topic_kb) == []
    assert [name for name, _n in list_collections(topic_kb.store.client)] == ["topics"]


class ChildrenOf:
    """A children retriever: ``children`` best first; records each k asked for."""

    def __init__(self, children):
        self.children, self.asked = children, []

    def retrieve(self, query, k=5, filters=None):
        self.asked.append(k)
        return self.children[:k]


class Parents:
    def get(self, ids):
        return {i: (f"chunk {i}", {"source": i}) for i in ids}


def child(cid, parent, score):
    from programs.types import Passage

    return Passage(id=cid, text=cid, score=score, metadata={"parent_id": parent, "representation": "sentences"})


def test_parent_retriever_asks_for_more_children_until_k_parents_are_found():
    """One parent's many matching children fill the first k * fanout; the request grows until k parents."""
    from selfrag.kb.indexes import ParentDocumentRetriever

    children = ChildrenOf([child(f"a{i}", "A", 1 - i / 100) for i in range(30)]
                          + [child(f"{p}0", p, 0.5) for p in "BCDEF"])
    got = ParentDocumentRetriever(children, Parents(), fanout=2).retrieve("q", k=5)
    assert [p.id for p in got] == ["A", "B", "C", "D", "E"] and got[0].score == 1
    assert children.asked == [10, 20, 40]


def test_parent_retriever_stops_when_the_children_run_out_or_at_its_cap():
    from selfrag.kb.indexes import ParentDocumentRetriever

    few = ChildrenOf([child(f"a{i}", "A", 1 - i / 100) for i in range(12)] + [child("b0", "B", 0.1)])
    assert [p.id for p in ParentDocumentRetriever(few, Parents(), fanout=2).retrieve("q", k=5)] == ["A", "B"]
    assert few.asked == [10, 20]  # 13 came back for 20: there are no more
    endless = ChildrenOf([child(f"a{i}", "A", 1.0) for i in range(10_000)])
    got = ParentDocumentRetriever(endless, Parents(), fanout=2, max_children=100).retrieve("q", k=5)
    assert [p.id for p in got] == ["A"] and endless.asked == [10, 20, 40, 80, 100]


def leaf_sources(tree, cid):
    """The sources of the chunks under RAPTOR node ``cid`` (read from the tree's children, not its metadata)."""
    text, meta = tree[cid]
    if not meta.get("raptor_level"):
        return {meta["source"]}
    return set().union(*(leaf_sources(tree, child) for child in json.loads(meta["children"])))


@pytest.mark.parametrize("mode", ["dense", "bm25", "hybrid"])
def test_a_raptor_summary_passes_a_filter_only_when_every_chunk_under_it_does(topic_kb, mode):
    """$ne on a source never returns a summary over one of its chunks (Chroma's where and the BM25
    post-filter alike); a positive filter returns the summaries whose chunks all match, and no other."""
    build_index(topic_kb, "raptor", summarise=FakeSummariser(), progress=False)
    tree, retriever = nodes(topic_kb), index_retriever(topic_kb, "raptor", mode)
    excluded = retriever.retrieve("Summary of Moon facts", k=16, filters={"source": {"$ne": "doc:moon0"}})
    assert excluded and all("doc:moon0" not in leaf_sources(tree, p.id) for p in excluded)
    assert not any("Moon" in p.text for p in excluded if p.metadata["raptor_level"] > 0)  # the moon summary, the root
    moon = [f"doc:moon{i}" for i in range(4)]
    kept = retriever.retrieve("Summary of Moon facts", k=16, filters={"source": {"$in": moon}})
    summaries = [p for p in kept if p.metadata["raptor_level"] > 0]
    assert all(leaf_sources(tree, p.id) <= set(moon) for p in kept)
    assert [(p.metadata["raptor_level"], p.metadata["title"]) for p in summaries] == [(1, "moon")]  # shared title
    assert "_raptor_members" not in summaries[0].metadata  # internal: not shown with the passage


def test_a_summary_built_before_members_were_recorded_or_with_too_many_values_fails_every_filter():
    from selfrag.kb.indexes.raptor import summary_passes

    members = {"_raptor_members": json.dumps({"source": ["a", "b"], "page": None}), "raptor_level": 1}
    assert summary_passes({"source": {"$nin": ["c"]}}, members)
    assert not summary_passes({"source": {"$ne": "b"}}, members) and not summary_passes({"source": "a"}, members)
    assert summary_passes({"$or": [{"source": {"$in": ["a", "b"]}}, {"page": 3}]}, members)
    assert not summary_passes({"page": {"$ne": 3}}, members)  # too many pages to record
    assert summary_passes({"year": {"$ne": 2020}}, members) and not summary_passes({"year": 2020}, members)
    assert summary_passes({"raptor_level": 1}, members)  # the summary's own key
    assert not summary_passes({"source": {"$ne": "c"}}, {"raptor_level": 1})  # an old summary


def test_raptor_retriever_asks_for_more_while_failing_summaries_leave_fewer_than_k():
    from programs.types import Passage
    from selfrag.kb.indexes import RaptorRetriever

    summary = {"raptor_level": 1, "_raptor_members": json.dumps({"source": ["x"]})}
    leaf = Passage(id="leaf", text="l", metadata={"raptor_level": 0, "source": "y"})
    tree = ChildrenOf([Passage(id=f"s{i}", text="s", metadata=summary) for i in range(12)] + [leaf])
    got = RaptorRetriever(tree, size=lambda: 13).retrieve("q", k=2, filters={"source": {"$ne": "x"}})
    assert [p.id for p in got] == ["leaf"] and tree.asked == [2, 4, 8, 13]
    # bounded at 8k: a filter that only the 41st node passes is not worth pulling every summary for
    tree = ChildrenOf([Passage(id=f"s{i}", text="s", metadata=summary) for i in range(40)] + [leaf])
    got = RaptorRetriever(tree, size=lambda: 41).retrieve("q", k=2, filters={"source": {"$ne": "x"}})
    assert got == [] and tree.asked == [2, 4, 8, 16]
