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
    hits = make().search("上海", k=5)
    assert [i for i, _ in hits] == [3] and hits[0][1] > 0


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


def test_concurrent_saves_never_collide_and_leave_a_whole_index(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    versions = [BM25Index([f"id{j}" for j in range(n)], [f"text number {j} about cats" for j in range(n)],
                          [{"n": j} for j in range(n)], fingerprint=f"fp{n}") for n in (3, 5, 8, 13)]
    target = tmp_path / "bm25" / "col"
    with ThreadPoolExecutor(max_workers=4) as pool:
        saved = list(pool.map(lambda i: versions[i % 4].save(target), range(24)))
    assert all(saved)
    loaded = BM25Index.load(target)
    assert loaded is not None and loaded.consistent()
    assert loaded.fingerprint in {v.fingerprint for v in versions} and len(loaded) == int(loaded.fingerprint[2:])
    leftovers = [p.name for p in target.parent.iterdir() if p.name not in ("col", ".col.lock")]
    assert leftovers == []  # no temporary or old folders left behind


def test_a_torn_index_on_disk_is_detected(tmp_path):
    big = BM25Index([f"id{j}" for j in range(6)], [f"text {j} cats" for j in range(6)], [{}] * 6, "fp6")
    small = BM25Index(["a", "b"], ["cats", "dogs"], [{}, {}], "fp2")
    big.save(tmp_path / "big")
    small.save(tmp_path / "small")
    # the scorer of one build with the chunk list of another: every search would raise IndexError
    for name in ("chunks.jsonl", "selfrag_bm25.json"):
        (tmp_path / "big" / name).write_bytes((tmp_path / "small" / name).read_bytes())
    assert BM25Index.load(tmp_path / "big") is None
    (tmp_path / "small" / "data.csc.index.npy").write_bytes(b"\x93NUMPY truncated")
    assert BM25Index.load(tmp_path / "small") is None
    (tmp_path / "missing").mkdir()
    assert BM25Index.load(tmp_path / "missing") is None  # no index at all


def test_a_search_on_a_damaged_index_rebuilds_it_once():
    from selfrag.kb.retriever import BM25Retriever

    good = make()
    torn = BM25Index(["a"], TEXTS[:1], METAS[:1], "fp", _model=good._model)  # scorer knows 4 docs, list has 1
    repaired = []
    retriever = BM25Retriever(lambda: torn, repair=lambda: repaired.append(1) or good)
    hits = retriever.retrieve("中国", k=2)
    assert repaired == [1] and [h.id for h in hits] == ["c", "d"]
