from __future__ import annotations

from selfrag.kb.bm25 import BM25Index
from selfrag.kb.filters import matches

TEXTS = [
    "The cat sat on the mat.",
    "Dogs chase cats in the park.",
    "北京是中国的首都。",
    "上海是中国最大的城市。",
]
METAS = [{"language": "en", "n": 1}, {"language": "en", "n": 2}, {"language": "zh", "n": 3}, {"language": "zh", "n": 4}]


def make():
    return BM25Index(["a", "b", "c", "d"], TEXTS, METAS, fingerprint="fp")


def test_chinese_query_finds_chinese_passage():
    hits = make().search("中国的首都是哪里", k=2)
    assert hits[0][0] == 2
    assert make().search("上海", k=5) == [(3, make().search("上海", k=5)[0][1])]


def test_english_stemming_and_filter():
    idx = make()
    assert {i for i, _ in idx.search("cats", k=5)} == {0, 1}
    only_two = idx.search("cats", k=5, keep=lambda m: matches({"n": {"$gte": 2}}, m))
    assert [i for i, _ in only_two] == [1]


def test_no_match_and_empty_index():
    assert make().search("zebra", k=3) == []
    assert BM25Index([], [], [], "empty").search("cat", k=3) == []


def test_persistence_roundtrip(tmp_path):
    idx = make()
    idx.save(tmp_path / "bm25")
    assert BM25Index.stored_fingerprint(tmp_path / "bm25") == "fp"
    loaded = BM25Index.load(tmp_path / "bm25")
    assert loaded is not None and loaded.ids == idx.ids and loaded.metadatas == METAS
    assert loaded.search("北京", k=1) == idx.search("北京", k=1)


def test_filter_operators():
    m = {"language": "zh", "n": 3}
    assert matches({"language": "zh"}, m)
    assert not matches({"language": {"$ne": "zh"}}, m)
    assert matches({"$and": [{"n": {"$gt": 2}}, {"language": {"$in": ["zh", "ja"]}}]}, m)
    assert matches({"$or": [{"n": 1}, {"language": "zh"}]}, m)
    assert not matches({"missing": "x"}, m)
    assert matches({"missing": {"$nin": ["x"]}}, m)
