"""SelfRAG honours the retrieve judge's ``continue``: a low-confidence draft is shown to the judge as
the answer so far, and "continue" runs answer-guided re-query rounds (iterate_retrieval), bounded."""

import dspy

from programs.selfrag import SelfRAG
from programs.settings import ProgramSettings
from tests.fakes import ListRetriever, passage, scripted_lm
from tests.programs.test_iterative import draft_from

KB = [passage("p1", "The Zephyr bridge was designed by Ada Crane."),
      passage("p2", "Ada Crane was born in Norwich in 1890."),
      passage("p3", "Norwich glass recycling is collected on Tuesdays."),
      passage("p4", "Ada Crane also designed the Oda lock.")]
Q = "Where was the designer of the Zephyr bridge born?"


class Table(ListRetriever):
    """Returns fixed passages per query (the first ones for any query it does not know)."""

    def __init__(self, table):
        super().__init__(KB)
        self.table = table

    def retrieve(self, query, k=5, filters=None):
        self.queries.append(query)
        return [KB[i] for i in self.table.get(query, self.table[Q])][:k]


def decide(continue_answer="continue"):
    """"yes" for the question alone; ``continue_answer`` once an answer so far is shown."""
    return lambda inp: {"decision": continue_answer if inp.get("answer_so_far") else "yes"}


def support_of(inp):
    return {"support": "fully" if inp["answer"] == "In Norwich." else "no"}


def not_glass(inp):
    return {"relevance": "irrelevant" if "glass" in inp["passage"] else "relevant"}


SCRIPT = {"retrieve_decision": decide(), "grade_relevance": not_glass, "generate_answer": draft_from,
          "judge_support": support_of, "next_query": {"next_query": "Ada Crane birthplace"},
          "check_answer": {"stated": "yes"}}


def run(script, retriever, **cfg):
    lm, engine = scripted_lm(script)
    rag = SelfRAG(retriever, config=ProgramSettings(**{"k": 1, "max_regenerations": 0, "grade_pool": 2,
                                                           "retrieve_rules": False, "continue_retrieval": True, **cfg}), generator_lm=lm,
                  adapter=dspy.JSONAdapter())
    return rag(question=Q).result, engine


def steps(result, name):
    return [s for s in result.trace if s.step == name]


def test_continue_requeries_from_the_draft_merges_new_relevant_passages_and_answers():
    retriever = Table({Q: [0], "Ada Crane birthplace": [1, 0]})
    result, engine = run(SCRIPT, retriever)
    assert engine.roles() == ["retrieve_decision", "grade_relevance", "check_answer", "generate_answer",
                              "judge_support", "retrieve_decision", "next_query", "grade_relevance",
                              "generate_answer", "judge_support"]
    assert engine.calls[5][1]["answer_so_far"] == "The designer was Ada Crane."
    assert engine.calls[6][1]["draft_answer"] == "The designer was Ada Crane."
    assert retriever.queries == [Q, "Ada Crane birthplace"]
    assert steps(result, "merge")[0].output == ["p2"]  # p1 was already in hand: only the new one is graded
    assert steps(result, "continue_decision")[0].output == "continue"
    routes = [s.output for s in steps(result, "route")]
    assert routes[routes.index("continue"):] == ["continue", "requery", "confident", "accept"]
    assert result.answer == "In Norwich." and result.supported == "fully" and not result.abstained
    assert [c.id for c in result.citations] == ["p2"]


def test_the_rounds_are_bounded_by_max_iterations():
    queries = iter(["q2", "q3", "q4", "q5"])
    retriever = Table({Q: [0], "q2": [3], "q3": [1], "q4": [2]})
    script = {**SCRIPT, "judge_support": {"support": "no"}, "next_query": lambda inp: {"next_query": next(queries)},
              "generate_answer": {"answer": "Unknown.", "citations": [1], "answerable": True}}
    result, engine = run(script, retriever, max_iterations=3)
    assert engine.count("next_query") == 2  # 3 retrieval rounds, the first included
    assert retriever.queries == [Q, "q2", "q3"]
    assert [s.output for s in steps(result, "merge")] == [["p4"], ["p2"]]
    assert "max_iterations" in [s.output for s in steps(result, "route")]
    assert result.abstained and result.abstain_reason == "unsupported"


def test_a_round_without_a_new_relevant_passage_stops():
    retriever = Table({Q: [0], "Ada Crane birthplace": [2, 0]})  # only the glass passage is new: graded irrelevant
    result, engine = run({**SCRIPT, "judge_support": {"support": "no"}}, retriever)
    assert engine.count("next_query") == 1 and engine.count("generate_answer") == 1
    assert steps(result, "merge")[0].output == []
    assert "no_new_passages" in [s.output for s in steps(result, "route")]


def test_yes_no_continue_a_confident_draft_or_the_setting_off_skip_the_rounds():
    retriever = Table({Q: [0]})
    result, engine = run({**SCRIPT, "retrieve_decision": decide("yes")}, retriever)
    assert engine.count("retrieve_decision") == 2 and engine.count("next_query") == 0
    assert "stop" in [s.output for s in steps(result, "route")]
    result, engine = run({**SCRIPT, "judge_support": {"support": "fully"}}, retriever)
    assert engine.count("retrieve_decision") == 1 and not steps(result, "continue_decision")
    result, engine = run(SCRIPT, retriever, continue_retrieval=False)
    assert engine.count("retrieve_decision") == 1 and engine.count("next_query") == 0


def test_a_failed_continue_judgement_stops_and_the_draft_goes_on():
    calls = []

    def garbled(inp):
        calls.append(inp)
        return "not json" if inp.get("answer_so_far") else {"decision": "yes"}

    result, engine = run({**SCRIPT, "retrieve_decision": garbled}, Table({Q: [0]}))
    step = steps(result, "continue_decision")[0]
    assert not step.ok and engine.count("next_query") == 0
    assert result.abstained and result.abstain_reason == "unsupported"


def test_the_token_budget_drops_the_continuation():
    result, engine = run(SCRIPT, Table({Q: [0]}), token_budget=100)
    assert engine.count("next_query") == 0 and not steps(result, "continue_decision")
    budget = steps(result, "token_budget")[0].output
    assert "continuation" in [d["step"] for d in budget["dropped"]]


def test_continue_is_opt_in():
    assert ProgramSettings().continue_retrieval is False
