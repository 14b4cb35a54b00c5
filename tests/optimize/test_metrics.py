"""Metric arithmetic with hand-computed values."""

import dspy
import pytest

from optimize import metrics as M


def ex(**kw):
    return dspy.Example(**kw).with_inputs("question")


def pred(**kw):
    return dspy.Prediction(**kw)


def test_token_f1_english_hand_computed():
    # pred tokens: [cat, sat, on, mat] (articles dropped), gold: [cat, sat]: P=2/4, R=1 -> F1=2/3
    assert M.token_f1("The cat sat on the mat.", "a cat sat") == pytest.approx(2 / 3)
    assert M.token_f1("Paris", "Paris") == 1.0
    assert M.token_f1("London", "Paris") == 0.0
    # pred [paris, paris], gold [paris]: overlap 1, P=1/2, R=1
    assert M.token_f1("Paris Paris", "Paris") == pytest.approx(2 / 3)
    assert M.token_f1("", "") == 1.0 and M.token_f1("", "x") == 0.0


def test_exact_match_normalisation():
    assert M.exact("The  Eiffel Tower!", "eiffel tower") == 1.0
    assert M.exact("An apple.", "apple") == 1.0
    assert M.exact("Eiffel Towers", "Eiffel Tower") == 0.0
    e = ex(question="q", answer="Tower", answers=["Eiffel Tower", "the tower"], answerable=True)
    assert M.exact_match(e, pred(answer="Tower!")) == 1.0  # matches "the tower"
    assert M.exact_match(e, pred(answer="Eiffel")) == 0.0
    assert M.exact_match(e, pred(answer="tower"), trace=object()) is True


def test_chinese_character_f1():
    # pred 北京大学 (4 chars), gold 北京 (2 chars): common 2, P=2/4, R=1 -> F1=2/3
    assert M.token_f1("北京大学", "北京") == pytest.approx(2 / 3)
    # punctuation (full width) and spaces ignored: identical after normalisation
    assert M.token_f1("北京，大学。", "北京 大学") == 1.0
    assert M.exact("“踢爆”。", "踢爆") == 1.0
    # mixed text: ["1998", "年"] vs ["1998", "年", "春"]: P=1, R=2/3 -> F1=0.8
    assert M.token_f1("1998年", "1998年春") == pytest.approx(0.8)
    assert M.tokens("Nexon开发") == ["nexon", "开", "发"]
    # Latin words stay words in Chinese text (a space separates them; it is not deleted first)
    assert M.tokens("使用 Apache Kafka 和 Redis") == ["使", "用", "apache", "kafka", "和", "redis"]
    assert M.token_f1("答案是 New York City", "New York") == pytest.approx(0.5)
    assert M.token_f1("１２３", "123") == 1.0  # full width is the same token


def test_answer_f1_best_over_answers_and_trace_threshold():
    e = ex(question="q", answer="a", answers=["red apple pie", "pie"], answerable=True)
    assert M.answer_f1(e, pred(answer="pie")) == 1.0
    assert M.answer_f1(e, pred(answer="red")) == pytest.approx(0.5)  # vs "red apple pie": P=1, R=1/3
    assert M.answer_f1(e, pred(answer="red"), trace=object()) is True  # 0.5 >= threshold 0.5
    assert M.answer_f1(e, pred(answer="green"), trace=object()) is False


def test_abstention_both_ways():
    ans, unans = ex(question="q", answerable=True), ex(question="q", answerable=False)
    assert M.abstention_correct(ans, pred(abstained=False)) == 1.0
    assert M.abstention_correct(ans, pred(abstained=True)) == 0.0
    assert M.abstention_correct(unans, pred(abstained=True)) == 1.0
    assert M.abstention_correct(unans, pred(abstained=False)) == 0.0
    assert M.abstention_correct(unans, pred(abstained=True), trace=1) is True


def test_citation_hit():
    e = ex(question="q", answerable=True, gold_doc_ids=["clapnq:1"])
    assert M.citation_hit(e, pred(cited_doc_ids=["xquad:3", "clapnq:1"])) == 1.0
    assert M.citation_hit(e, pred(cited_doc_ids=["clapnq:1#2"])) == 1.0  # chunk of the gold doc
    assert M.citation_hit(e, pred(cited_doc_ids=["clapnq:12"])) == 0.0
    assert M.citation_hit(e, pred(cited_doc_ids=[])) == 0.0
    u = ex(question="q", answerable=False, gold_doc_ids=[])
    assert M.citation_hit(u, pred(cited_doc_ids=[])) == 1.0
    assert M.citation_hit(u, pred(cited_doc_ids=["clapnq:1"])) == 0.0
    # answerable without gold documents: nothing to hit — not scored (was 1 when nothing was cited: an
    # abstention won), whatever is cited
    g = ex(question="q", answerable=True, gold_doc_ids=[])
    assert M.citation_hit(g, pred(cited_doc_ids=[])) is None
    assert M.citation_hit(g, pred(cited_doc_ids=["clapnq:1"])) is None


def test_citation_ids_from_selfrag_result_citations():
    from programs.types import Citation, RAGResult

    r = RAGResult(question="q", answer="a", citations=[Citation(id="cmrc:TRIAL_1")])
    assert M.cited_ids(r) == ["cmrc:TRIAL_1"]
    e = ex(question="q", answerable=True, gold_doc_ids=["cmrc:TRIAL_1"])
    assert M.citation_hit(e, r) == 1.0


def test_e2e_metric():
    e = ex(question="q", answer="blue whale", answers=["blue whale"], answerable=True)
    assert M.e2e_metric(e, pred(answer="the blue whale", abstained=False)) == 1.0
    assert M.e2e_metric(e, pred(answer="blue whale", abstained=True)) == 0.0  # gated by abstention
    assert M.e2e_metric(e, pred(answer="whale shark", abstained=False)) == pytest.approx(0.5)
    u = ex(question="q", answer="", answers=[], answerable=False)
    assert M.e2e_metric(u, pred(answer="no idea", abstained=True)) == 1.0
    assert M.e2e_metric(u, pred(answer="blue whale", abstained=False)) == 0.0
    assert M.e2e_metric(e, pred(answer="whale shark", abstained=False), trace=object()) is True
    assert M.e2e_metric(e, pred(answer="orca", abstained=False), trace=object()) is False


def test_judgement_accuracies():
    assert M.retrieve_accuracy(dspy.Example(decision="yes"), pred(decision="Yes")) == 1.0
    assert M.retrieve_accuracy(dspy.Example(decision="yes"), pred(decision="no")) == 0.0
    assert M.relevance_accuracy(dspy.Example(relevance="irrelevant"), pred(relevance="irrelevant"), 1) is True
    assert M.support_accuracy(dspy.Example(support="fully"), pred(support="partially")) == 0.0
    assert M.support_accuracy(dspy.Example(support="no"), pred(support="no")) == 1.0
    assert M.retrieve_accuracy(dspy.Example(decision="yes"), pred()) == 0.0  # missing field


def test_continue_before_any_answer_counts_as_retrieve():
    assert M.retrieve_accuracy(dspy.Example(decision="yes", answer_so_far=""), pred(decision="continue")) == 1.0
    assert M.retrieve_accuracy(dspy.Example(decision="no", answer_so_far=""), pred(decision="continue")) == 0.0
    # with an answer so far, "continue" is its own label
    assert M.retrieve_accuracy(dspy.Example(decision="yes", answer_so_far="It opened in"),
                               pred(decision="continue")) == 0.0


@pytest.mark.parametrize(
    "gold,got,ok",
    [(5, 4, 1.0), (4, 5, 1.0), (5, "5", 1.0), (1, 2, 1.0), (1, 1, 1.0), (5, 3, 0.0), (1, 3, 0.0),
     (4, 2, 0.0), (1, 5, 0.0), (5, None, 0.0), (5, "n/a", 0.0)],
)
def test_usefulness_tolerant(gold, got, ok):
    assert M.usefulness_accuracy(dspy.Example(usefulness=gold), pred(usefulness=got)) == ok
