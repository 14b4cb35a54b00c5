"""OfflineWebSearch (fake retriever), the offline corpus builder and StaticWebSearch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from programs.types import Passage, WebSearch, WebSearchError
from selfrag.web.offline import OfflineWebSearch, offline_web_documents, pseudo_url, slugify
from selfrag.paths import datasets_dir
from selfrag.web.static import StaticWebSearch

SHARED_DATASETS = datasets_dir()


class FakeRetriever:
    def __init__(self, passages: list[Passage], error: Exception | None = None):
        self.passages = passages
        self.error = error
        self.calls: list[tuple[str, int]] = []

    def retrieve(self, query: str, k: int = 5, filters=None) -> list[Passage]:
        self.calls.append((query, k))
        if self.error:
            raise self.error
        return self.passages[:k]


PASSAGES = [
    Passage(id="c1", text="Denver won Super Bowl 50.", score=0.9, metadata={"title": "Super Bowl 50"}),
    Passage(id="c2", text="Levi's Stadium is in Santa Clara.", score=0.7, metadata={"doc_id": "xquad/levis#p2"}),
    Passage(id="c3", text="Kept url.", score=0.5, metadata={"url": "offline://web/halueval/0001-x", "title": "X"}),
    Passage(id="c4", text="No metadata at all.", score=0.3),
]


def test_offline_gives_stable_pseudo_urls_and_keeps_order():
    retriever = FakeRetriever(PASSAGES)
    web = OfflineWebSearch(retriever, collection="web", max_results=4)
    assert isinstance(web, WebSearch)

    out = web.search("super bowl", max_results=4)

    assert [p.source for p in out] == [
        "offline://web/super-bowl-50",
        "offline://web/xquad/levis#p2",
        "offline://web/halueval/0001-x",
        "offline://web/c4",
    ]
    assert [p.score for p in out] == [0.9, 0.7, 0.5, 0.3]  # the retriever's ranking is kept
    assert [p.id for p in out] == ["web:c1", "web:c2", "web:c3", "web:c4"]
    assert all(p.metadata["origin"] == "web" and p.metadata["source"] == p.metadata["url"] for p in out)
    assert out[0].title == "Super Bowl 50" and out[3].title == "offline://web/c4"
    assert retriever.calls == [("super bowl", 4)]
    assert web.search("super bowl", max_results=4) == out  # stable across calls


def test_offline_defaults_and_limits():
    retriever = FakeRetriever(PASSAGES)
    out = OfflineWebSearch(retriever, collection="My Web", max_results=2).search("q")
    assert len(out) == 2 and retriever.calls == [("q", 2)]
    assert out[0].source == "offline://my-web/super-bowl-50"


def test_web_max_results_caps_what_a_program_asks_for():
    # A program asks for its k per round; the web search built with web.max_results = 1 gives 1.
    retriever = FakeRetriever(PASSAGES)
    out = OfflineWebSearch(retriever, max_results=1).search("q", max_results=3)
    assert len(out) == 1 and retriever.calls == [("q", 1)]


def test_offline_empty_and_failures_are_web_errors():
    with pytest.raises(WebSearchError) as err:
        OfflineWebSearch(FakeRetriever([])).search("nothing here")
    assert err.value.kind == "empty" and "'web'" in str(err.value)

    with pytest.raises(WebSearchError) as err:
        OfflineWebSearch(FakeRetriever([], error=RuntimeError("collection gone"))).search("q")
    assert err.value.kind == "offline_error" and "collection gone" in str(err.value)


def test_offline_rejects_a_non_retriever():
    with pytest.raises(TypeError, match="retrieve"):
        OfflineWebSearch(object())


def test_slug_and_pseudo_url():
    assert slugify("Super_Bowl 50!") == "super-bowl-50"
    assert slugify("Ñandú café") == "nandu-cafe"
    assert slugify("???") == "untitled"
    assert slugify("Magazine (1844–1846)") == "magazine-1844-1846"
    assert slugify("alpha beta gamma", max_len=12) == "alpha-beta"  # cut at a word boundary
    assert slugify("abcdefghijklmnop", max_len=5) == "abcde"
    assert pseudo_url("web", "xquad/Super_Bowl_50#p3") == "offline://web/xquad/super-bowl-50#p3"


@pytest.fixture
def datasets(tmp_path: Path) -> Path:
    (tmp_path / "xquad").mkdir()
    (tmp_path / "halueval").mkdir()
    xquad = {
        "version": "1.1",
        "data": [
            {"title": "Super_Bowl_50", "paragraphs": [
                {"context": "Super Bowl 50 was an American football game.", "qas": []},
                {"context": "The game was played at Levi's Stadium.", "qas": []},
            ]},
            {"title": "Warsaw", "paragraphs": [{"context": "Warsaw is the capital of Poland.", "qas": []}]},
        ],
    }
    (tmp_path / "xquad" / "en.json").write_text(json.dumps(xquad), encoding="utf-8")
    rows = [
        {"knowledge": "Arthur's Magazine (1844-1846) was a periodical.First for Women is a magazine.", "question": "q"},
        {"knowledge": "Arthur's Magazine (1844-1846) was a periodical.First for Women is a magazine.", "question": "dup"},
        {"knowledge": "", "question": "no knowledge"},
        {"knowledge": "The Oberoi Group is a hotel company.", "question": "q"},
    ]
    lines = [json.dumps(r) for r in rows]
    lines.insert(2, "not json")
    (tmp_path / "halueval" / "qa.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return tmp_path


def test_offline_web_documents(datasets: Path):
    docs = offline_web_documents(datasets)
    texts = [t for t, _ in docs]
    assert len(docs) == 5  # 3 paragraphs + 2 distinct knowledge snippets (dup, empty, bad line skipped)
    assert texts[0] == "Super Bowl 50 was an American football game."
    meta = docs[0][1]
    assert meta == {
        "title": "Super Bowl 50",
        "url": "offline://web/xquad/super-bowl-50#p0",
        "source": "offline://web/xquad/super-bowl-50#p0",
        "dataset": "xquad",
        "doc_id": "xquad/super-bowl-50#p0",
    }
    hal = docs[3]
    assert hal[0] == "Arthur's Magazine (1844-1846) was a periodical. First for Women is a magazine."  # unglued
    assert hal[1]["dataset"] == "halueval"
    assert hal[1]["url"].startswith("offline://web/halueval/0001-arthur-s-magazine")
    assert hal[1]["title"].startswith("Arthur's Magazine")
    assert len({m["url"] for _, m in docs}) == len(docs)  # urls are unique
    for _, m in docs:
        assert all(isinstance(v, (str, int, float, bool)) for v in m.values())  # Chroma-safe metadata


def test_offline_web_documents_limit_and_collection(datasets: Path):
    docs = offline_web_documents(datasets, collection="demo", limit_per_source=1)
    assert [m["dataset"] for _, m in docs] == ["xquad", "halueval"]
    assert docs[0][1]["url"].startswith("offline://demo/")


def test_offline_web_documents_missing(tmp_path: Path, datasets: Path):
    with pytest.raises(FileNotFoundError, match="xquad"):
        offline_web_documents(tmp_path / "nowhere")
    (datasets / "halueval" / "qa.jsonl").unlink()
    assert len(offline_web_documents(datasets)) == 3  # one source missing is only a warning


@pytest.mark.skipif(not (SHARED_DATASETS / "xquad" / "en.json").is_file(), reason="shared datasets not present")
def test_offline_web_documents_on_shared_datasets():
    docs = offline_web_documents(SHARED_DATASETS)
    datasets = {m["dataset"] for _, m in docs}
    assert datasets == {"xquad", "halueval"}
    assert sum(m["dataset"] == "xquad" for _, m in docs) == 240
    assert len({m["url"] for _, m in docs}) == len(docs)


def test_offline_over_static_collection_end_to_end():
    """OfflineWebSearch composes with anything that retrieves, e.g. a StaticWebSearch adapter."""
    static = StaticWebSearch(PASSAGES[:2])

    class Adapter:
        def retrieve(self, query: str, k: int = 5) -> list[Passage]:
            return static.search(query, max_results=k)

    out = OfflineWebSearch(Adapter()).search("Who won Super Bowl 50?")
    assert out[0].text == "Denver won Super Bowl 50."


def test_static_ranks_by_token_overlap():
    web = StaticWebSearch(
        [
            Passage(id="a", text="Warsaw is the capital of Poland."),
            Passage(id="b", text="Denver won Super Bowl 50 in Santa Clara."),
            Passage(id="c", text="Super Bowl 51 was in Houston.", metadata={"url": "https://x.test/sb51"}),
        ]
    )
    assert isinstance(web, WebSearch)
    out = web.search("Where was Super Bowl 50 played?")
    assert [p.id for p in out] == ["b", "c"]  # 'a' shares no word and is not returned
    assert out[0].score > out[1].score
    assert out[0].source == "static://b" and out[1].source == "https://x.test/sb51"
    assert all(p.metadata["origin"] == "web" for p in out)
    assert web.search("super bowl", max_results=1)[0].id == "b"  # ties keep the given order
    assert web.calls == ["Where was Super Bowl 50 played?", "super bowl"]


def test_static_cjk_and_empty():
    web = StaticWebSearch([Passage(id="zh", text="北京是中国的首都。")])
    assert web.search("中国的首都是哪里")[0].id == "zh"
    with pytest.raises(WebSearchError) as err:
        web.search("nothing matches")
    assert err.value.kind == "empty"
    with pytest.raises(WebSearchError) as err:
        web.search("the of ?")
    assert err.value.kind == "bad_request"
