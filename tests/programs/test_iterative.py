"""IterativeRAG and iterate_retrieval: draft → next query → merge new passages → re-draft, and its stops."""

import dspy
import pytest

from programs.iterative import IterativeRAG, iterate_retrieval, route_after_round
from programs.registry import program_class
from programs.settings import ProgramSettings
from programs.tracing import Tracer
from signatures import NextQuery
from tests.fakes import ListRetriever, passage, scripted_lm

KB = [passage("p1", "The Zephyr bridge was designed by Ada Crane."),
      passage("p2", "Ada Crane was born in Norwich in 1890."),
      passage("p3", "Norwich glass recycling is collected on Tuesdays.")]
Q = "Where was the designer of the Zephyr bridge born?"


def run(script, retriever=None, **cfg):
    lm, engine = scripted_lm(script)
    rag = IterativeRAG(retriever or ListRetriever(KB), config=ProgramSettings(**cfg), generator_lm=lm,
                       adapter=dspy.JSONAdapter())
    return rag(question=Q).result, engine


def draft_from(inp):
    if "born in Norwich" in inp["passages"]:
        return {"answer": "In Norwich.", "citations": [2], "answerable": True}
    return {"answer": "The designer was Ada Crane.", "citations": [1], "answerable": True}


def support_of(inp):
    return {"support": "fully" if inp["answer"] == "In Norwich." else "partially"}


def names(result, step):
    return [s for s in result.trace if s.step == step]


def test_requeries_from_the_draft_merges_the_new_passage_and_stops_when_supported():
    class Ranked(ListRetriever):
        def retrieve(self, query, k=5, filters=None):
            self.queries.append(query)
            return [KB[0]] if query == Q else [KB[1], KB[0]][:k]

    retriever = Ranked(KB)
    script = {"generate_answer": draft_from, "judge_support": support_of,
              "next_query": {"next_query": "Ada Crane birthplace"}}
    result, engine = run(script, retriever, k=2, max_iterations=3)
    assert engine.roles() == ["generate_answer", "judge_support", "next_query", "generate_answer", "judge_support"]
    next_inputs = engine.calls[2][1]
    assert next_inputs["draft_answer"] == "The designer was Ada Crane." and "p1" in next_inputs["passage_titles"]
    assert retriever.queries == [Q, "Ada Crane birthplace"]
    assert names(result, "merge")[0].output == ["p2"]  # p1 was already in hand
    assert engine.calls[3][1]["passages"].count("«") == 2
    assert [s.output for s in names(result, "route")] == ["requery", "confident"]
    assert result.answer == "In Norwich." and result.supported == "fully" and [c.id for c in result.citations] == ["p2"]


def test_stops_when_a_round_brings_no_new_passage():
    retriever = ListRetriever(KB[:1])
    script = {"generate_answer": draft_from, "judge_support": {"support": "partially"},
              "next_query": {"next_query": "Ada Crane"}}
    result, engine = run(script, retriever, k=2, max_iterations=5)
    assert engine.roles() == ["generate_answer", "judge_support", "next_query"]
    assert [s.output for s in names(result, "route")] == ["requery", "no_new_passages"]
    assert result.supported == "partially" and not result.abstained


def test_bounded_by_max_iterations():
    texts = iter(f"query {n}" for n in range(10))
    fresh = iter(passage(f"n{n}", f"new fact {n}") for n in range(10))

    class Endless:
        def retrieve(self, query, k=5, filters=None):
            return [next(fresh)]

    script = {"generate_answer": {"answer": "Unsure.", "citations": [1], "answerable": True},
              "judge_support": {"support": "no"}, "next_query": lambda inp: {"next_query": next(texts)}}
    result, engine = run(script, Endless(), k=1, max_iterations=3)
    assert engine.count("next_query") == 2 and engine.count("generate_answer") == 3 and engine.count("judge_support") == 3
    assert [s.output for s in names(result, "route")] == ["requery", "requery", "max_iterations"]
    assert result.supported == "no"
    assert result.usage.lm_calls == 1 + 3 * (3 - 1) + 1


def test_no_passage_at_first_then_found_by_the_next_query():
    class Later(ListRetriever):
        def retrieve(self, query, k=5, filters=None):
            self.queries.append(query)
            return [] if query == Q else [KB[1]]

    script = {"generate_answer": draft_from, "judge_support": support_of, "next_query": {"next_query": "Ada Crane born"}}
    result, engine = run(script, Later(KB), max_iterations=2)
    assert engine.roles() == ["next_query", "generate_answer", "judge_support"]
    assert engine.calls[0][1]["draft_answer"] == ""
    assert result.answer == "In Norwich."


def test_an_empty_next_query_stops_and_nothing_found_abstains():
    result, engine = run({"next_query": {"next_query": "  "}}, ListRetriever([]), max_iterations=3)
    assert engine.roles() == ["next_query"] and result.abstained
    assert names(result, "route")[-1].output == "no_query"


def test_iterate_retrieval_is_callable_from_another_program_with_an_admit_filter():
    """How SelfRAG honours "continue": its own steps, its NextQuery predictor, its grading as ``admit``."""
    lm, engine = scripted_lm({"generate_answer": draft_from, "judge_support": support_of,
                              "next_query": {"next_query": "Ada Crane born Norwich"}})
    host = IterativeRAG(ListRetriever(KB), config=ProgramSettings(k=3), generator_lm=lm, adapter=dspy.JSONAdapter())
    tracer = Tracer()
    admitted = []

    def admit(ps):
        admitted.append([p.id for p in ps])
        return [p for p in ps if "born" in p.text]

    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        first = host._draft(tracer, Q, [KB[0]])
        out = iterate_retrieval(host, tracer, Q, [KB[0]], first, next_query=dspy.Predict(NextQuery),
                                max_iterations=2, k=3, admit=admit)
    assert admitted == [["p2", "p3"]] and [p.id for p in out.passages] == ["p1", "p2"]
    assert out.stop == "confident" and out.rounds == 2 and out.draft.answer == "In Norwich."


@pytest.mark.parametrize("args,route", [
    (("fully", ("fully",), 1, 3, None), "confident"),
    (("partially", ("fully", "partially"), 1, 3, None), "confident"),
    (("partially", ("fully",), 2, 3, 0), "no_new_passages"),
    ((None, ("fully",), 3, 3, 2), "max_iterations"),
    (("no", ("fully",), 1, 1, None), "max_iterations"),
    (("no", ("fully",), 2, 3, 1), "requery"),
])
def test_route_after_round(args, route):
    assert route_after_round(*args) == route


def test_registered_as_iterative():
    assert program_class("iterative") is IterativeRAG
    assert ProgramSettings(strategy="iterative").strategy == "iterative"
