"""RAGModule: the shared plumbing every program uses (copying, predictors, the shared steps)."""

import copy
import logging
import threading

import dspy
import pytest

from programs.baselines import GradedRAG, NoRetrieval, VanillaRAG
from programs.crag import CorrectiveRAG
from programs.selfrag import SelfRAG
from programs.settings import ProgramSettings
from tests.fakes import FakeWeb, ListRetriever, passage, scripted_lm

KB = [passage("p1", "The Zephyr bridge opened in 1931."), passage("p2", "Trout season runs from April.")]
PROGRAMS = [SelfRAG, CorrectiveRAG, VanillaRAG, NoRetrieval, GradedRAG]


class StoreRetriever(ListRetriever):
    """A retriever holding a lock, like a store client: it cannot be deep-copied."""

    def __init__(self, passages):
        super().__init__(passages)
        self.lock = threading.Lock()


def components():
    lm, _ = scripted_lm({})
    critic, _ = scripted_lm({})
    return dict(retriever=StoreRetriever(KB), web_search=FakeWeb(KB), generator_lm=lm, critic_lm=critic,
                adapter=dspy.JSONAdapter())


def test_the_store_stand_in_really_cannot_be_deep_copied():
    with pytest.raises(TypeError):
        copy.deepcopy(StoreRetriever(KB))


@pytest.mark.parametrize("cls", PROGRAMS)
def test_copies_share_the_components_and_copy_the_predictors_without_warnings(cls, caplog):
    parts = components()
    program = cls(**parts, config=ProgramSettings(k=2))
    name, predictor = next(iter(program.named_predictors()))
    predictor.demos = [dspy.Example(question="Who?", answer="Ann")]
    caplog.set_level(logging.WARNING)
    copies = [program.deepcopy(), program.reset_copy(), copy.deepcopy(program)]
    for clone in copies:
        assert type(clone) is cls
        for attr, value in parts.items():
            assert getattr(clone, attr) is value, attr
        assert clone.config == program.config and clone.config is not program.config
        assert dict(clone.named_predictors())[name] is not predictor
    deep, reset, _ = copies
    deep_predictor = dict(deep.named_predictors())[name]
    assert deep_predictor.demos == predictor.demos
    deep_predictor.demos.append(dspy.Example(question="Where?", answer="Oda"))
    assert len(predictor.demos) == 1  # the copy's demos are its own
    assert dict(reset.named_predictors())[name].demos == []
    program.load_state(program.dump_state())  # dspy's trial run deep-copies the program too
    assert not [r for r in caplog.records if "deep copy" in r.getMessage()]


def test_each_program_declares_its_predictors_once():
    for cls in PROGRAMS:
        assert {name for name, _ in cls(ListRetriever(KB)).named_predictors()} == set(cls.PREDICTORS)


@pytest.mark.parametrize("cls", [SelfRAG, CorrectiveRAG, GradedRAG])
def test_a_crashing_web_backend_is_a_typed_failed_step_in_every_program(cls):
    class Broken:
        def search(self, query, max_results=5):
            raise KeyError("bug")

    script = {"retrieve_decision": {"decision": "yes"}, "grade_relevance": {"relevance": "irrelevant"},
              "evaluate_retrieval": {"score": 0}, "rewrite_web_query": {"web_query": "zephyr"},
              "rewrite_query": {"query": "zephyr"}}
    lm, _ = scripted_lm(script)
    program = cls(ListRetriever(KB), web_search=Broken(), config=ProgramSettings(k=2, max_rewrites=0),
                  generator_lm=lm, adapter=dspy.JSONAdapter())
    result = program(question="When did the Zephyr bridge open?").result
    web = [s for s in result.trace if s.step == "web_search"]
    assert len(web) == 1 and not web[0].ok and web[0].error_kind == "crashed" and "KeyError" in web[0].error
    assert result.abstained


def test_a_retriever_returning_more_than_k_is_cut_to_k():
    class Greedy:
        def retrieve(self, query, k=5, filters=None):
            return KB * 5

    lm, engine = scripted_lm({"generate_answer": {"answer": "1931", "citations": [1], "answerable": True}})
    result = VanillaRAG(Greedy(), config=ProgramSettings(k=2), generator_lm=lm, adapter=dspy.JSONAdapter())(
        question="When?").result
    assert result.trace[0].output == ["p1", "p2"]
    assert engine.calls[0][1]["passages"].count("«") == 2
