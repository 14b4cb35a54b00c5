"""The training-data builder on a toy collection (hashing embedder, hybrid retrieval): gold passages by
source or answer span, hard negatives from the retriever, every support/usefulness/retrieve/answer kind
with its provenance, grouped deterministic splits, the derived folder (atomic, versioned, checked)."""

import json
import re

import pytest

from optimize.derive import assign_splits, derive_records, no_retrieval_records
from optimize.derived_data import FORMAT_VERSION, derived_loader, load_derived, read_manifest, write_derived
from optimize.errors import DataError
from optimize.qa_format import load_qa_file
from optimize.sources import RETRIEVE_FILE, read_retrieve_file
from selfrag import paths
from tests.optimize.user_data import QA, catalog, hash_kb, write_qa

NO_QUESTIONS = read_retrieve_file(paths.data_dir() / RETRIEVE_FILE)


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("toy")
    kb = hash_kb(tmp)
    items = load_qa_file(write_qa(tmp / "qa.jsonl"))
    return tmp, kb, items, derive_records(items, kb.retriever(), catalog(kb), NO_QUESTIONS, collection="toy")


def by_id(derived, task):
    return {r["id"]: r for r in derived.records[task]}


def test_gold_passages_come_from_the_gold_source_or_an_answer_span(toy):
    _, _, _, derived = toy
    rel = by_id(derived, "relevance")
    bridge = rel["rel:b1:pos"]
    assert bridge["relevance"] == "relevant" and bridge["how"] == "gold_doc"
    assert bridge["provenance"]["source"].endswith("bridge.md") and "1931" in bridge["passage"]
    assert "opened in 1931" in bridge["decides"]
    trout = rel["rel:t1:pos"]  # no gold given: the retrieved chunk holding "silver blue"
    assert trout["how"] == "answer_span" and "silver blue" in trout["passage"]
    for r in derived.records["relevance"]:
        if r["relevance"] == "irrelevant":  # a retrieved chunk of another document, holding none of the answer
            assert r["how"] == "hard_negative" and r["provenance"]["rank"] >= 1
            pos = rel[r["id"].replace(":neg", ":pos")]
            assert r["provenance"]["source"] != pos["provenance"]["source"]
    assert "1931" not in rel["rel:b1:neg"]["passage"]
    assert all(r["group"] and r["source"] == "user" and r["how"] and r["provenance"] for r in derived.records["relevance"])


def test_support_has_fully_partially_and_no_with_the_claim_not_backed(toy):
    _, _, _, derived = toy
    sup = by_id(derived, "support")
    assert sup["sup:b1:fully"]["support"] == "fully" and "opened in 1931" in sup["sup:b1:fully"]["passages"]
    assert sup["sup:b1:fully"]["passages"].startswith("[1] ")
    unrelated = sup["sup:b1:no"]
    assert unrelated["how"] == "unrelated_passage" and unrelated["unsupported_claim"] == "1931"
    partial = sup["sup:b1:partially"]
    assert partial["support"] == "partially" and partial["answer"].startswith("1931. ")
    assert partial["unsupported_claim"] in partial["answer"] and partial["unsupported_claim"] not in partial["passages"]
    changed = sup["sup:b1:changed"]
    assert changed["support"] == "no" and changed["how"] == "changed_number"
    old, new = changed["provenance"]["changed"]
    assert old == "1931" and changed["answer"] == new and new not in changed["passages"]
    assert sup["sup:t2:changed"]["how"] == "changed_name" and "October" not in sup["sup:t2:changed"]["answer"]
    labels = {r["support"] for r in derived.records["support"]}
    assert labels == {"fully", "partially", "no"}


def test_usefulness_retrieve_answer_and_qa_records(toy):
    _, _, items, derived = toy
    use = derived.records["usefulness"]
    assert {r["kind"] for r in use} <= {"gold", "evasive", "off_topic"} and {r["usefulness"] for r in use} == {1, 5}
    for r in use:
        if r["kind"] == "off_topic":  # another question's answer, from the same split
            other = next(q for q in QA if q["id"] == r["provenance"]["answer_of"])
            assert r["answer"] == other["answers"][0] and other["question"] != r["question"]
            assert derived.splits[r["group"]] == derived.splits[next(i.group for i in items if i.id == other["id"])]
    rd = derived.records["retrieve"]
    yes = [r for r in rd if r["decision"] == "yes"]
    no = [r for r in rd if r["decision"] == "no"]
    assert len(yes) == 6 and len(no) == 8  # at least 8 bundled no-retrieval questions
    assert all(r["how"] == "bundled_no_retrieval" and r["source"] == "selfrag-handwritten" for r in no)
    assert {r["question"] for r in no} <= {q["question"] for q in NO_QUESTIONS if q["decision"] == "no"}
    ans = by_id(derived, "answer")
    good = ans["ans:b1"]
    assert good["answerable"] and good["answer"] == "1931"
    cited = re.split(r"^\[\d+\] ", good["passages"], flags=re.M)[good["citations"][0]]
    assert "opened in 1931" in cited
    assert ans["ans:u1"]["answerable"] is False and ans["ans:u1"]["how"] == "qa_unanswerable"
    qa = by_id(derived, "qa")
    assert set(qa) == {q["id"] for q in QA}
    assert qa["b1"]["gold_doc_ids"] and qa["b1"]["gold_sources"] == ["bridge.md"] and qa["u1"]["gold_doc_ids"] == []


def test_no_retrieval_questions_follow_the_languages_and_the_number_of_yes():
    en = no_retrieval_records(NO_QUESTIONS, {"en"}, 30)
    assert len(en) == 30 and not any("\u4e00" <= ch <= "\u9fff" for r in en for ch in r["question"])
    zh = no_retrieval_records(NO_QUESTIONS, {"zh"}, 2)
    assert len(zh) == 8 and all(any("\u4e00" <= ch <= "\u9fff" for ch in r["question"]) for r in zh)


def test_splits_are_grouped_by_question_and_never_leave_one_empty():
    groups = [f"g{i}" for i in range(40)]
    a = assign_splits(groups)
    assert a == assign_splits(reversed(groups)) and set(a.values()) == {"train", "dev"}
    assert 4 <= list(a.values()).count("dev") <= 18
    assert set(assign_splits(["only-one"]).values()) <= {"train", "dev"}
    two = assign_splits(["x", "y"])
    assert sorted(two.values()) == ["dev", "train"]


def test_the_derived_folder_is_deterministic_grouped_and_versioned(toy, tmp_path):
    _, _, _, derived = toy
    meta = {"collection": "toy", "qa_file": "qa.jsonl"}
    m1 = write_derived(derived, tmp_path / "a", meta)
    m2 = write_derived(derived, tmp_path / "b", meta)
    assert m1 == m2 and m1["format_version"] == FORMAT_VERSION and m1["collection"] == "toy"
    for rel in m1["files"]:
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes()
    assert m1["provenance"]["support"]["partial_answer"] >= 1 and m1["counts"]["qa"]["dev"]
    for task in ("relevance", "support", "usefulness", "answer", "qa"):
        train = {ex.group for ex in load_derived(task, "train", tmp_path / "a")}
        dev = {ex.group for ex in load_derived(task, "dev", tmp_path / "a")}
        assert train and not train & dev
    loader = derived_loader(tmp_path / "a")
    assert [ex.id for ex in loader("qa_en", "dev")] == [ex.id for ex in loader("qa", "dev")]
    assert set(loader("support", "train")[0].inputs().keys()) == {"question", "passages", "answer"}
    assert set(loader("answer", "train")[0].inputs().keys()) == {"question", "passages"}
    assert {p.name for p in tmp_path.iterdir()} == {"a", "b"}  # no temporary folder left


def test_a_folder_of_another_version_or_changed_files_is_refused(toy, tmp_path):
    _, _, _, derived = toy
    out = tmp_path / "d"
    write_derived(derived, out, {"collection": "toy"})
    manifest = json.loads((out / "manifest.json").read_text())
    (out / "manifest.json").write_text(json.dumps({**manifest, "format_version": 99}))
    with pytest.raises(DataError, match="derived in format version 99; this selfrag reads version 1"):
        read_manifest(out)
    (out / "manifest.json").write_text(json.dumps(manifest))
    (out / "support" / "dev.jsonl").write_text("{}\n")
    with pytest.raises(DataError, match="support/dev.jsonl changed since it was derived"):
        derived_loader(out)
    with pytest.raises(DataError, match="not a derived data folder"):
        read_manifest(paths.splits_dir())
    with pytest.raises(DataError, match="not found"):
        read_manifest(tmp_path / "nope")


def test_writing_replaces_a_derived_folder_refuses_any_other_and_leaves_nothing_half_written(toy, tmp_path,
                                                                                          monkeypatch):
    _, _, _, derived = toy
    out = tmp_path / "d"
    write_derived(derived, out, {"collection": "toy"})
    write_derived(derived, out, {"collection": "again"})  # a derived folder is replaced
    assert read_manifest(out)["collection"] == "again"
    other = tmp_path / "mine"
    other.mkdir()
    (other / "notes.txt").write_text("keep me")
    with pytest.raises(DataError, match="exists and is not a derived data folder"):
        write_derived(derived, other, {})
    assert [p.name for p in other.iterdir()] == ["notes.txt"]

    def boom(records):
        raise OSError("disk full")

    monkeypatch.setattr("optimize.derived_data.dump_records", boom)
    with pytest.raises(OSError):
        write_derived(derived, out, {"collection": "third"})
    with pytest.raises(OSError):
        write_derived(derived, tmp_path / "new", {})
    assert read_manifest(out)["collection"] == "again"  # the old folder is intact
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d", "mine"]  # no temp folder, no "new"


def test_bad_input_is_refused_before_anything_is_derived(toy, tmp_path):
    _, kb, items, _ = toy
    unanswerable = [i for i in items if not i.answerable]
    with pytest.raises(DataError, match="no answerable question"):
        derive_records(unanswerable, kb.retriever(), catalog(kb), NO_QUESTIONS)
    stray = load_qa_file(write_qa(tmp_path / "stray.jsonl", [
        {"question": "When did the Zephyr bridge open?", "answers": ["1931"], "gold_sources": ["elsewhere.md"]}]))
    with pytest.raises(DataError, match=r"collection 'toy' holds none of the gold documents .*line 1: 'elsewhere.md'"):
        derive_records(stray, kb.retriever(), catalog(kb), NO_QUESTIONS, collection="collection 'toy'")
    nowhere = load_qa_file(write_qa(tmp_path / "nowhere.jsonl", [
        {"question": "What is the airspeed of a swallow?", "answers": ["eleven metres a second"]}]))
    with pytest.raises(DataError, match="no question got a gold passage .*line 1, none of the 5 retrieved"):
        derive_records(nowhere, kb.retriever(), catalog(kb), NO_QUESTIONS)


def test_a_question_without_its_gold_in_the_collection_is_skipped_with_the_reason(toy, tmp_path):
    _, kb, _, _ = toy
    rows = [QA[0], {"id": "gone", "question": "Who built the old ferry?", "answers": ["The ferry guild"],
                    "gold_sources": ["ferry.md"]}]
    derived = derive_records(load_qa_file(write_qa(tmp_path / "two.jsonl", rows)), kb.retriever(), catalog(kb),
                             NO_QUESTIONS)
    assert derived.skipped == [{"line": 2, "id": "gone", "reason": "none of its gold documents is in the collection"}]
    assert {r["id"] for r in derived.records["qa"]} == {"b1"}


class _Listed:
    """A retriever returning its passages in order (those of a source when filtered by it)."""

    def __init__(self, passages):
        self.passages = passages

    def retrieve(self, question, k=5, filters=None):
        wanted = (filters or {}).items()
        return [p for p in self.passages if all(p.metadata.get(a) == b for a, b in wanted)][:k]


ZH_CHUNKS = [("z1", "faq.md", "产假有多长？员工可享受十六周的带薪产假。"),
             ("z2", "handbook.md", "根据员工手册，员工可享受十六周的带薪产假，需提前一个月申请。"),
             ("z3", "canteen.md", "食堂由索迪斯公司经营。")]


def _zh_derived(rows, tmp_path):
    from optimize.qa_format import Catalog
    from programs.types import Passage

    passages = [Passage(id=i, text=t, metadata={"source": s, "title": s}) for i, s, t in ZH_CHUNKS]
    items = load_qa_file(write_qa(tmp_path / "zh.jsonl", rows))
    return derive_records(items, _Listed(passages), Catalog.from_chunks((p.id, p.metadata) for p in passages),
                          NO_QUESTIONS)


def test_chinese_answers_are_found_in_passages_without_spaces(tmp_path):
    derived = _zh_derived([
        {"id": "z", "question": "产假有多长？", "answers": ["十六周"], "gold_sources": ["faq.md"]},
        {"id": "y", "question": "食堂由谁经营？", "answers": ["索迪斯公司"]}], tmp_path)
    rel, sup = by_id(derived, "relevance"), by_id(derived, "support")
    # another document stating the answer is no negative: the one that does not is
    negative = rel["rel:z:neg"]
    assert negative["provenance"]["source"] == "canteen.md" and "十六周" not in negative["passage"]
    assert "十六周" not in sup["sup:z:no"]["passages"]
    # no gold documents given: the retrieved chunk stating the answer is the gold passage
    gold = rel["rel:y:pos"]
    assert gold["how"] == "answer_span" and gold["provenance"]["source"] == "canteen.md"
