"""The Chinese labelled sets derived from CMRC 2018 (optimize.records_zh): unanswerable questions whose
answer no QA-corpus paragraph contains, lexical hard negatives holding none of the answer, changed spans
the passage does not back, and the committed *_zh splits."""

import pytest

from optimize import splits as S
from optimize.records_zh import (ZH_TASKS, changed_span, contains_answer, held_out, judgement_zh_records,
                                 lexical_similarity, qa_zh_records)
from optimize.sources import Paragraph, corpus_documents, read_cmrc
from selfrag import paths

DATASETS = paths.datasets_dir()
SPLITS = paths.splits_dir()
needs_cmrc = pytest.mark.skipif(not (DATASETS / "cmrc2018" / "trial.json").is_file(), reason="no CMRC file")


def test_changed_span_changes_digits_else_takes_an_alternative_the_passage_lacks():
    passage = "该公司成立于1998年，总部位于上海。"
    assert changed_span("1998年", passage, []) == "2009年"
    assert changed_span("上海", passage, ["上海", "北京"]) == "北京"
    assert changed_span("上海", passage, ["上海"]) is None


def test_lexical_similarity_prefers_shared_bigrams():
    sims = lexical_similarity(["苍鹭的续航是多少"], ["苍鹭的续航约八十公里", "雨燕的车重二十九公斤"])
    assert sims[0, 0] > sims[0, 1] >= 0


def test_toy_records_are_consistent():
    paras = [Paragraph(f"cmrc:P{i}", f"标题{i % 3}", f"第{i}段：这座城市建于{1900 + i}年，人口{i}万。",
                       [{"id": f"Q{i}", "question": f"第{i}段的城市建于哪一年？",
                         "answers": [{"text": f"{1900 + i}年", "answer_start": 0}]}]) for i in range(30)]
    qa = qa_zh_records(paras)
    assert {r["answerable"] for r in qa} == {True, False}
    for r in qa:
        assert r["answerable"] == (not held_out(r["group"])) == bool(r["answer"])
    recs = judgement_zh_records(paras)
    assert {r["relevance"] for r in recs["relevance_zh"]} == {"relevant", "irrelevant"}
    changed = [r for r in recs["support_zh"] if r.get("kind") == "changed_span"]
    assert changed and all(r["support"] == "no" and r["answer"] not in r["passages"] for r in changed)


@pytest.fixture(scope="module")
def cmrc():
    return read_cmrc(DATASETS)


@needs_cmrc
def test_unanswerable_questions_are_a_third_and_no_qa_paragraph_holds_their_answer(cmrc):
    qa = qa_zh_records(cmrc)
    corpus = [t for t, _ in corpus_documents("cmrc-qa", DATASETS)]
    answers = {q["id"]: [a["text"] for a in qa_["answers"]] for p in cmrc for qa_ in p.qas
               for q in [{"id": f"cmrc:{qa_['id']}"}]}
    no = [r for r in qa if not r["answerable"]]
    assert 0.25 <= len(no) / len(qa) <= 0.40
    for r in no:
        assert not any(contains_answer(t, answers[r["id"]]) for t in corpus)
    assert len(corpus) + len({p.doc_id for p in cmrc if held_out(p.doc_id)}) == len(cmrc)


@needs_cmrc
def test_judgement_records_on_cmrc(cmrc):
    recs = judgement_zh_records(cmrc)
    by_id = {p.doc_id: p for p in cmrc}
    for r in recs["relevance_zh"]:
        if r["relevance"] == "irrelevant":
            assert by_id[r["negative_of"]].title != by_id[r["group"]].title
    for r in recs["support_zh"]:
        if r["support"] == "fully":
            assert r["answer"] in r["passages"]
        elif r.get("kind") == "changed_span":
            assert not contains_answer(r["passages"], [r["answer"]])
    kinds = {r["kind"] for r in recs["usefulness_zh"]}
    assert kinds == {"gold", "off_topic", "evasive"}


@pytest.mark.skipif(not (SPLITS / "relevance_zh").is_dir(), reason="data/splits not built with the zh sets")
def test_committed_zh_splits_load_and_the_language_loader_maps_tasks():
    for task in ZH_TASKS:
        for split in S.SPLITS:
            assert S.load_split(task, split, SPLITS), (task, split)
    load = S.language_loader(lambda task, split: S.load_split(task, split, SPLITS), "zh")
    assert load("relevance", "dev")[0].question == S.load_split("relevance_zh", "dev", SPLITS)[0].question
    assert all(e.language == "zh" for e in load("qa_en", "dev"))
    dev = S.load_split("qa_zh", "dev", SPLITS)
    assert 0.2 <= sum(not e.answerable for e in dev) / len(dev) <= 0.45
    assert {e.support for e in S.load_split("support_zh", "train", SPLITS)} == {"fully", "no"}
