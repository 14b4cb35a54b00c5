"""Split building (determinism, disjointness), loaders and the hand-written retrieve-decision set."""

import hashlib
import json
import os
from collections import Counter
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import dspy
import numpy as np
import pytest

from optimize import datasets as D

DATASETS = D.default_datasets_dir()
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
    ma = D.build_splits(DATASETS, a, limit=24, embed_fn=hash_embed, caps=caps)
    mb = D.build_splits(DATASETS, b, limit=24, embed_fn=hash_embed, caps=caps)
    return (a, ma), (b, mb)


@needs_datasets
def test_build_is_deterministic(small_builds):
    (a, ma), (b, mb) = small_builds
    assert ma["dataset_hash"] == mb["dataset_hash"]
    assert ma["files"] == mb["files"]
    for rel in ma["files"]:
        assert (a / rel).read_bytes() == (b / rel).read_bytes()
    assert json.loads((a / "manifest.json").read_text()) == ma
    assert D.verify_manifest(a) == []


@needs_datasets
def test_manifest_counts_and_hashes(small_builds):
    (a, ma), _ = small_builds
    assert set(ma["files"]) == {f"{t}/{s}.jsonl" for t in D.TASKS for s in D.SPLITS}
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
    for task in D.TASKS:
        train = [json.loads(l) for l in (a / task / "train.jsonl").read_text().splitlines()]
        dev = [json.loads(l) for l in (a / task / "dev.jsonl").read_text().splitlines()]
        assert not {r["id"] for r in train} & {r["id"] for r in dev}
        assert not {r["question"] for r in train} & {r["question"] for r in dev} or task == "usefulness"
        assert len({r["id"] for r in train + dev}) == len(train + dev)
        train_groups |= {r["group"] for r in train}
        dev_groups |= {r["group"] for r in dev}
    assert not train_groups & dev_groups  # one source question never sits in both splits of any task
    assert all(D.split_of(g) == "dev" for g in dev_groups)


@needs_datasets
@pytest.mark.parametrize("task", D.TASKS)
def test_load_split_returns_examples_with_inputs(small_builds, task):
    (a, _), _ = small_builds
    for split in D.SPLITS:
        examples = D.load_split(task, split, a)
        assert examples, (task, split)
        for e in examples:
            assert isinstance(e, dspy.Example)
            assert set(e.inputs().keys()) == set(D.TASK_INPUTS[task])
            assert e.id and e.group


def test_task_inputs_match_signatures():
    from signatures import GenerateAnswer, GradeRelevance, JudgeSupport, JudgeUsefulness, RetrieveDecision

    pairs = [("retrieve", RetrieveDecision), ("relevance", GradeRelevance), ("support", JudgeSupport),
             ("usefulness", JudgeUsefulness)]
    for task, sig in pairs:
        assert set(D.TASK_INPUTS[task]) == set(sig.input_fields)
    assert set(D.TASK_INPUTS["qa_en"]) <= set(GenerateAnswer.input_fields)


def test_load_split_rejects_unknown():
    with pytest.raises(ValueError):
        D.load_split("nope", "train")
    with pytest.raises(ValueError):
        D.load_split("qa_en", "test")


# ---------------------------------------------------------------- the committed files


MAX_STORED_PASSAGE = 2 * D.MAX_PASSAGE_CHARS  # answer sentences are never cut, see window_passage
COMMITTED = D.SPLITS_DIR / "manifest.json"
needs_committed = pytest.mark.skipif(not COMMITTED.exists(), reason="data/splits not built")


@needs_committed
def test_committed_splits_match_manifest():
    assert D.verify_manifest() == []


@needs_committed
def test_committed_labels_and_fields():
    labels = {"retrieve": ("decision", {"yes", "no"}), "relevance": ("relevance", {"relevant", "irrelevant"}),
              "support": ("support", {"fully", "no"}), "usefulness": ("usefulness", {1, 4, 5})}
    for task, (field, allowed) in labels.items():
        for split in D.SPLITS:
            examples = D.load_split(task, split)
            assert {getattr(e, field) for e in examples} == allowed, (task, split)
    for split in D.SPLITS:
        for e in D.load_split("qa_en", split):
            assert e.answerable == bool(e.gold_doc_ids) == bool(e.answer)
            assert all(d.startswith("clapnq:") for d in e.related_doc_ids)
        for e in D.load_split("qa_zh", split):
            assert e.answerable and e.gold_doc_ids[0].startswith("cmrc:") and e.language == "zh"
        for e in D.load_split("relevance", split) + D.load_split("support", split):
            text = e.get("passage") or e.get("passages")
            assert text and len(text) <= MAX_STORED_PASSAGE


@needs_committed
@needs_datasets
def test_gold_doc_ids_exist_in_corpus():
    en = {m["doc_id"] for _, m in D.corpus_documents("clapnq")}
    zh = {m["doc_id"] for _, m in D.corpus_documents("cmrc")}
    for split in D.SPLITS:
        for e in D.load_split("qa_en", split):
            assert set(e.related_doc_ids) <= en
        for e in D.load_split("qa_zh", split):
            assert set(e.gold_doc_ids) <= zh


@needs_datasets
def test_corpus_documents_shape():
    en = D.corpus_documents("clapnq")
    assert all(set(m) == {"doc_id", "title", "source"} and t for t, m in en)
    ids = [m["doc_id"] for _, m in en]
    assert len(ids) == len(set(ids)) == len({t for t, _ in en})
    assert Counter(m["source"] for _, m in en)["xquad"] == 240
    assert len(D.corpus_documents("clapnq", distractors=False)) == len(ids) - 240
    zh = D.corpus_documents("cmrc")
    assert len(zh) == 256 and all(m["source"] == "cmrc2018" for _, m in zh)


# ---------------------------------------------------------------- hand-written retrieve decisions


def test_retrieve_file_balanced_and_well_formed():
    rows = D.read_retrieve_file()
    assert len(rows) >= 80
    counts = Counter(r["decision"] for r in rows)
    assert set(counts) == {"yes", "no"}
    assert 0.4 <= counts["yes"] / len(rows) <= 0.6
    assert len({r["id"] for r in rows}) == len(rows)
    assert len({r["question"] for r in rows}) == len(rows)
    assert all(r["answer_so_far"] == "" and r["question"].strip() for r in rows)


@needs_datasets
def test_retrieve_file_has_no_dataset_question():
    dataset_questions = D.all_dataset_questions()
    assert len(dataset_questions) > 2000
    for r in D.read_retrieve_file():
        assert D._norm_q(r["question"]) not in dataset_questions, r["question"]


# ---------------------------------------------------------------- passage helpers


def test_window_passage_keeps_selected_sentences():
    sents = [f"Sentence number {i} is here." for i in range(100)]
    out = D.window_passage(sents, [sents[40], sents[42]], max_chars=200)
    assert sents[40] in out and sents[41] in out and sents[42] in out and len(out) <= 200
    far = D.window_passage(sents, [sents[1], sents[90]], max_chars=200)
    assert far == f"{sents[1]} ... {sents[90]}"


def test_truncate_at_sentence_end():
    text = "One two three. " * 200
    out = D.truncate(text, 100)
    assert len(out) <= 100 and out.endswith(".")
