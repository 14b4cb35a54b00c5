"""Serial decomposition: sub-questions answered in order with the answers so far, then composed."""

import dspy

from programs.decomposed import SerialDecomposition
from programs.registry import program_class
from programs.settings import ProgramSettings
from tests.fakes import ListRetriever, passage, scripted_lm

KB = [passage("p1", "The Zephyr bridge was designed by Ada Crane."),
      passage("p2", "Ada Crane was born in Norwich in 1890."),
      passage("p3", "Trout season runs from April.")]
Q = "Where was the designer of the Zephyr bridge born?"


def sub_answer(inp):
    return {"sub_answer": "Ada Crane" if "designed" in inp["sub_question"] else "Norwich"}


SCRIPT = {"decompose_question": {"sub_questions": ["Who designed the Zephyr bridge?", "Where was that person born?",
                                                   "Who designed the Zephyr bridge?"]},
          "answer_sub_question": sub_answer,
          "generate_answer": {"answer": "In Norwich.", "citations": [2], "answerable": True},  # ComposeAnswer
          "judge_support": {"support": "fully"}}


def run(script, retriever=None, **cfg):
    lm, engine = scripted_lm(script)
    rag = SerialDecomposition(retriever or ListRetriever(KB), config=ProgramSettings(**cfg), generator_lm=lm,
                              adapter=dspy.JSONAdapter())
    return rag(question=Q).result, engine


class ByTopic(ListRetriever):
    def retrieve(self, query, k=5, filters=None):
        self.queries.append(query)
        return [KB[1] if "born" in query else KB[0]][:k]


def test_sub_questions_in_order_with_the_answers_so_far_then_composed():
    retriever = ByTopic(KB)
    result, engine = run(SCRIPT, retriever, k=1, max_subquestions=3)
    assert engine.roles() == ["decompose_question", "answer_sub_question", "answer_sub_question", "generate_answer",
                              "judge_support"]
    assert retriever.queries == ["Who designed the Zephyr bridge?", "Where was that person born? (Ada Crane)"]
    second = engine.calls[2][1]
    assert "Who designed the Zephyr bridge?" in second["answers_so_far"] and "Ada Crane" in second["answers_so_far"] and "born in Norwich" in second["passages"]
    compose = engine.calls[3][1]
    assert "Where was that person born?" in compose["sub_answers"] and "Norwich" in compose["sub_answers"]
    assert compose["passages"].count("«") == 2
    assert result.answer == "In Norwich." and result.supported == "fully" and [c.id for c in result.citations] == ["p2"]
    assert engine.calls[4][1]["passages"].count("«") == 1  # support judged against the cited passage


def test_bounded_by_max_subquestions():
    script = dict(SCRIPT, decompose_question={"sub_questions": [f"part {i}?" for i in range(6)]})
    result, engine = run(script, max_subquestions=2)
    assert engine.count("answer_sub_question") == 2
    assert [s for s in result.trace if s.step == "sub_questions"][0].inputs["cut"] == "4"


def test_a_question_that_does_not_decompose_is_answered_from_its_own_retrieval():
    script = dict(SCRIPT, decompose_question={"sub_questions": [Q]})
    retriever = ListRetriever(KB)
    result, engine = run(script, retriever, k=2)
    assert engine.roles() == ["decompose_question", "generate_answer", "judge_support"]
    assert retriever.queries == [Q] and not result.abstained


def test_failed_decomposition_and_nothing_found_abstains():
    result, engine = run({"decompose_question": "garbage"}, ListRetriever([]))
    assert engine.roles() == ["decompose_question"] and result.abstained


def test_registered():
    assert program_class("decompose-serial") is SerialDecomposition
    assert {n for n, _ in SerialDecomposition(ListRetriever([])).named_predictors()} == set(SerialDecomposition.PREDICTORS)


def test_each_sub_question_is_filtered_on_its_own_words():
    # Self-query plans per sub-question: the 2023 part is not searched under the 2021 part's filter.
    from tests.programs.test_retrieval_pipeline import SCHEMA, FilteringRetriever

    docs = [passage("m21", "Heron manual 2021: the range is 60 km.", year=2021, doc_type="manual"),
            passage("m23", "Heron manual 2023: the range is 80 km.", year=2023, doc_type="manual")]

    def filters(inp):
        years = [y for y in (2021, 2023) if str(y) in inp["question"]]
        return {"filters": [{"field": "year", "op": "eq", "value": years[0]}] if len(years) == 1 else []}

    script = dict(SCRIPT, decompose_question={"sub_questions": ["What is the range in the 2021 manual?",
                                                                "What is the range in the 2023 manual?"]},
                  extract_filters=filters)
    lm, engine = scripted_lm(script)
    retriever = FilteringRetriever(docs)
    rag = SerialDecomposition(retriever, config=ProgramSettings(self_query=True, k=2), generator_lm=lm,
                              adapter=dspy.JSONAdapter(), metadata_schema=SCHEMA)
    rag(question="How did the Heron's range change between the 2021 and the 2023 manual?")
    assert retriever.filters == [{"year": {"$eq": 2021}}, {"year": {"$eq": 2023}}]
    assert engine.count("extract_filters") == 2


def test_a_sub_answer_of_unknown_in_chinese_adds_nothing_to_the_next_query():
    script = dict(SCRIPT, answer_sub_question=lambda inp: {"sub_answer": "未知。"})
    retriever = ByTopic(KB)
    run(script, retriever)
    assert all("(" not in q for q in retriever.queries)  # no "(未知)" appended as a known answer
