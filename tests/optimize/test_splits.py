"""Split building (determinism, disjointness), loaders and the committed split files."""

import hashlib
import json

import dspy
import numpy as np
import pytest

from optimize import splits as S
from optimize.errors import DataError
from optimize.records import MAX_PASSAGE_CHARS
from optimize.sources import RETRIEVE_FILE, corpus_documents, split_of
from selfrag import paths

DATASETS = paths.datasets_dir()
SPLITS = paths.splits_dir()
RETRIEVE = paths.data_dir() / RETRIEVE_FILE
needs_datasets = pytest.mark.skipif(not (DATASETS / "clapnq").is_dir(), reason="shared datasets not present")


def hash_embed(texts):
    """Cheap deterministic stand-in for MiniLM: hashed bag of words, unit rows."""
    out = np.zeros((len(texts), 64), dtype=np.float32)
    for i, t in enumerate(texts):
        for w in t.lower().split():
            out[i, int(hashlib.md5(w.encode()).hexdigest()[:6], 16) % 64] += 1.0
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.where(norms == 0, 1, norms)


@pytest.fixture(scope="module")
def small_builds(tmp_path_factory):
    a, b = tmp_path_factory.mktemp("a"), tmp_path_factory.mktemp("b")
    caps = {"train": 40, "dev": 20}
    ma = S.build_splits(DATASETS, a, RETRIEVE, limit=24, embed_fn=hash_embed, caps=caps)
    mb = S.build_splits(DATASETS, b, RETRIEVE, limit=24, embed_fn=hash_embed, caps=caps)
    return (a, ma), (b, mb)


@needs_datasets
def test_build_is_deterministic(small_builds):
    (a, ma), (b, mb) = small_builds
    assert ma["dataset_hash"] == mb["dataset_hash"]
    assert ma["files"] == mb["files"]
    for rel in ma["files"]:
        assert (a / rel).read_bytes() == (b / rel).read_bytes()
    assert json.loads((a / "manifest.json").read_text()) == ma
    assert S.verify_manifest(a) == []


@needs_datasets
def test_manifest_counts_and_hashes(small_builds):
    (a, ma), _ = small_builds
    assert set(ma["files"]) == {f"{t}/{s}.jsonl" for t in S.TASKS for s in S.SPLITS}
    for rel, meta in ma["files"].items():
        data = (a / rel).read_bytes()
        assert meta["sha256"] == hashlib.sha256(data).hexdigest()
        assert meta["count"] == len(data.splitlines())
        assert meta["count"] <= {"train": 40, "dev": 20}[rel.split("/")[1][:-6]]
    combined = "".join(f"{k} {v['sha256']}\n" for k, v in sorted(ma["files"].items()))
    assert ma["dataset_hash"] == hashlib.sha256(combined.encode()).hexdigest()


@needs_datasets
def test_train_dev_disjoint_by_id_and_group(small_builds):
    (a, _), _ = small_builds
    train_groups, dev_groups = set(), set()
    for task in S.TASKS:
        train = [json.loads(l) for l in (a / task / "train.jsonl").read_text().splitlines()]
        dev = [json.loads(l) for l in (a / task / "dev.jsonl").read_text().splitlines()]
        assert not {r["id"] for r in train} & {r["id"] for r in dev}
        assert not {r["question"] for r in train} & {r["question"] for r in dev} or task == "usefulness"
        assert len({r["id"] for r in train + dev}) == len(train + dev)
        train_groups |= {r["group"] for r in train}
        dev_groups |= {r["group"] for r in dev}
    assert not train_groups & dev_groups  # one source question never sits in both splits of any task
    assert all(split_of(g) == "dev" for g in dev_groups)


@needs_datasets
@pytest.mark.parametrize("task", S.TASKS)
def test_load_split_returns_examples_with_inputs(small_builds, task):
    (a, _), _ = small_builds
    for split in S.SPLITS:
        examples = S.load_split(task, split, a)
        assert examples, (task, split)
        for e in examples:
            assert isinstance(e, dspy.Example)
            assert set(e.inputs().keys()) == set(S.TASK_INPUTS[task])
            assert e.id and e.group


def test_task_inputs_match_signatures():
    from signatures import GenerateAnswer, GradeRelevance, JudgeSupport, JudgeUsefulness, RetrieveDecision

    pairs = [("retrieve", RetrieveDecision), ("relevance", GradeRelevance), ("support", JudgeSupport),
             ("usefulness", JudgeUsefulness)]
    for task, sig in pairs:
        assert set(S.TASK_INPUTS[task]) == set(sig.input_fields)
    assert set(S.TASK_INPUTS["qa_en"]) <= set(GenerateAnswer.input_fields)


def test_load_split_rejects_unknown():
    with pytest.raises(ValueError):
        S.load_split("nope", "train", SPLITS)
    with pytest.raises(ValueError):
        S.load_split("qa_en", "test", SPLITS)


def test_missing_split_files_and_datasets_are_data_errors(tmp_path):
    with pytest.raises(DataError, match="selfrag data build"):
        S.load_split("qa_en", "dev", tmp_path)
    with pytest.raises(DataError, match="selfrag data build"):
        S.verify_manifest(tmp_path)
    with pytest.raises(DataError, match="clapnq"):
        S.build_splits(tmp_path, tmp_path / "out", RETRIEVE)
    assert S.dataset_hash(tmp_path) is None


# ---------------------------------------------------------------- the committed files


MAX_STORED_PASSAGE = 2 * MAX_PASSAGE_CHARS  # answer sentences are never cut, see window_passage
COMMITTED = SPLITS / "manifest.json"
needs_committed = pytest.mark.skipif(not COMMITTED.exists(), reason="data/splits not built")


@needs_committed
def test_committed_splits_match_manifest():
    assert S.verify_manifest(SPLITS) == []


@needs_committed
def test_committed_labels_and_fields():
    labels = {"retrieve": ("decision", {"yes", "no"}), "relevance": ("relevance", {"relevant", "irrelevant"}),
              "support": ("support", {"fully", "no"}), "usefulness": ("usefulness", {1, 4, 5})}
    for task, (field, allowed) in labels.items():
        for split in S.SPLITS:
            examples = S.load_split(task, split, SPLITS)
            assert {getattr(e, field) for e in examples} == allowed, (task, split)
    for split in S.SPLITS:
        for e in S.load_split("qa_en", split, SPLITS):
            assert e.answerable == bool(e.gold_doc_ids) == bool(e.answer)
            assert all(d.startswith("clapnq:") for d in e.related_doc_ids)
        for e in S.load_split("qa_zh", split, SPLITS):
            assert e.answerable == bool(e.gold_doc_ids) == bool(e.answer) and e.language == "zh"
            assert all(d.startswith("cmrc:") for d in e.related_doc_ids)
        for e in S.load_split("relevance", split, SPLITS) + S.load_split("support", split, SPLITS):
            text = e.get("passage") or e.get("passages")
            assert text and len(text) <= MAX_STORED_PASSAGE


@needs_committed
@needs_datasets
def test_gold_doc_ids_exist_in_corpus():
    en = {m["doc_id"] for _, m in corpus_documents("clapnq", DATASETS)}
    zh = {m["doc_id"] for _, m in corpus_documents("cmrc", DATASETS)}
    for split in S.SPLITS:
        for e in S.load_split("qa_en", split, SPLITS):
            assert set(e.related_doc_ids) <= en
        qa_corpus = {m["doc_id"] for _, m in corpus_documents("cmrc-qa", DATASETS)}
        for e in S.load_split("qa_zh", split, SPLITS):
            assert set(e.gold_doc_ids) <= qa_corpus and set(e.related_doc_ids) <= zh
            assert e.answerable == (e.related_doc_ids[0] in qa_corpus)  # unanswerable: its paragraph is held out
