"""programs/answer_length.py: a written answer is bounded to what fits in the generator's max_tokens, in the
question's language, through the output schema — and the compiled predictor is still the one that runs."""

import dspy
import pytest

from programs.answer_length import (JSON_OVERHEAD_TOKENS, MIN_ANSWER_CHARS, answer_max_chars, bounded_answer,
                                    lm_max_tokens, min_answer_chars)
from programs.baselines import VanillaRAG
from programs.selfrag import SelfRAG
from programs.settings import ProgramSettings
from selfrag.lm.compact_adapter import CompactJSONAdapter
from tests.fakes import ListRetriever, ScriptedEngine, passage

KB_EN = [passage("p1", "The Heron cargo bike has a range of 120 km on one charge.")]
KB_ZH = [passage("p2", "苍鹭货运自行车一次充电可行驶120公里。")]
KB = KB_EN + KB_ZH
DRAFT = {"answer": "120 km", "citations": [1], "answerable": True}


class SchemaEngine(ScriptedEngine):
    """Declares grammar-constrained decoding, as the llama.cpp engine does: the adapter then sends the output
    schema with its string bounds."""
    supports_response_schema = True
    enforces_string_bounds = True
    supported_params = frozenset({"temperature", "max_tokens", "response_format", "logprobs", "top_logprobs"})


def lm_with(engine, max_tokens):
    return dspy.LM("scripted/test", engine=engine, cache=False, max_tokens=max_tokens)


def answer_schema(engine, role):
    formats = [rf for r, rf in engine.response_formats if r == role]
    assert formats, f"no {role} call"
    return formats[-1]["schema"]["properties"]["answer"]


def test_the_bound_is_what_fits_in_max_tokens_for_the_language():
    assert answer_max_chars(384, "zh") == int((384 - JSON_OVERHEAD_TOKENS) * 1.2)
    assert answer_max_chars(384, "en") == int((384 - JSON_OVERHEAD_TOKENS) * 3.5)
    assert answer_max_chars(384, "zh") < answer_max_chars(384, "en")
    assert answer_max_chars(None, "en") is None and answer_max_chars(0, "zh") is None
    assert answer_max_chars(40, "zh") == MIN_ANSWER_CHARS  # a tiny max_tokens still leaves a usable answer
    assert answer_max_chars(384, "ja") == answer_max_chars(384, "zh")  # an unknown language: the tighter ratio


def test_max_tokens_is_read_from_the_lm_else_the_configured_one():
    engine = ScriptedEngine({})
    assert lm_max_tokens(lm_with(engine, 200)) == 200
    assert lm_max_tokens(lm_with(engine, None)) is None
    with dspy.context(lm=lm_with(engine, 300)):
        assert lm_max_tokens(None) == 300


@pytest.mark.parametrize("question, kb, language", [("What is the range of the Heron?", KB_EN, "en"),
                                                    ("苍鹭货运自行车的续航是多少？", KB_ZH, "zh"),
                                                    ("苍鹭货运自行车的续航是多少？", KB_EN, "zh")])
def test_the_draft_schema_bounds_the_answer_by_the_question_language(question, kb, language):
    engine = SchemaEngine({"generate_answer": DRAFT, "judge_support": {"support": "fully"},
                             "check_answer": {"stated": "yes"}, "grade_relevance": {"relevance": "relevant"}})
    program = VanillaRAG(ListRetriever(kb), config=ProgramSettings(k=2), generator_lm=lm_with(engine, 200),
                         adapter=CompactJSONAdapter())
    program(question=question)
    assert answer_schema(engine, "generate_answer")["maxLength"] == answer_max_chars(200, language)


def test_an_english_question_over_chinese_passages_gets_the_chinese_bound():
    """A run-on answer copies a passage: the passages' language counts, the tighter bound wins."""
    engine = SchemaEngine({"generate_answer": DRAFT})
    chinese = [passage("z1", "苍鹭货运自行车一次充电可行驶120公里，电池可拆卸，充满需要四个小时。")]
    program = VanillaRAG(ListRetriever(chinese), generator_lm=lm_with(engine, 200), adapter=CompactJSONAdapter())
    program(question="What is the range of the Heron?")
    assert answer_schema(engine, "generate_answer")["maxLength"] == answer_max_chars(200, "zh")
    assert min_answer_chars(200, {"en", "zh"}) == answer_max_chars(200, "zh")
    assert min_answer_chars(None, {"en"}) is None


def test_without_max_tokens_the_answer_is_unbounded():
    engine = SchemaEngine({"generate_answer": DRAFT})
    program = VanillaRAG(ListRetriever(KB), generator_lm=lm_with(engine, None), adapter=CompactJSONAdapter())
    program(question="What is the range of the Heron?")
    assert "maxLength" not in answer_schema(engine, "generate_answer")


def test_a_direct_answer_is_bounded_too():
    engine = SchemaEngine({"answer_directly": {"answer": "四十七"}, "judge_usefulness": {"usefulness": 5}})
    program = SelfRAG(ListRetriever(KB), config=ProgramSettings(retrieve_mode="never"),
                      generator_lm=lm_with(engine, 120), adapter=CompactJSONAdapter())
    result = program(question="12加上35等于多少？")
    assert result.answer == "四十七"
    assert answer_schema(engine, "answer_directly")["maxLength"] == answer_max_chars(120, "zh")


def test_the_bounded_call_runs_the_compiled_predictor_its_demos_and_its_trace_entry():
    engine = SchemaEngine({"generate_answer": DRAFT})
    program = VanillaRAG(ListRetriever(KB), generator_lm=lm_with(engine, 200), adapter=CompactJSONAdapter())
    program.generate_answer.demos = [dspy.Example(question="demo question?", passages="[1] demo passage",
                                                  answer="demo answer", citations=[1], answerable=True)]
    with dspy.context(trace=[]):
        program(question="What is the range of the Heron?")
        trace = list(dspy.settings.trace)
    # an optimizer maps trace entries to predictors by identity: the entry is the program's own predictor
    assert [entry[0] for entry in trace] == [program.generate_answer]
    prompt = " ".join(str(m) for m in program.generator_lm.history[-1]["messages"])
    assert "demo answer" in prompt
    # the bound went with the call: the program's own signature is untouched
    assert "max_length" not in program.generate_answer.signature.output_fields["answer"].json_schema_extra


def test_decompose_serial_bounds_its_sub_answers_and_its_composed_answer():
    from programs.decomposed import SerialDecomposition

    engine = SchemaEngine({"decompose_question": {"sub_questions": ["苍鹭的续航是多少？"]},
                           "answer_sub_question": {"sub_answer": "120公里"},
                           "generate_answer": DRAFT, "judge_support": {"support": "fully"}})  # compose: its fields
    program = SerialDecomposition(ListRetriever(KB_EN), generator_lm=lm_with(engine, 200),
                                  adapter=CompactJSONAdapter())
    program(question="What is the range of the Heron cargo bike?")
    formats = dict(engine.response_formats)
    assert formats["answer_sub_question"]["schema"]["properties"]["sub_answer"]["maxLength"] == \
        answer_max_chars(200, "zh")  # the sub-question's own language
    assert answer_schema(engine, "generate_answer")["maxLength"] == answer_max_chars(200, "en")


def test_a_backend_without_a_grammar_gets_no_string_bound():
    """A LiteLLM provider's structured outputs may refuse maxLength: it is sent to the in-process engine only."""

    class ProviderEngine(SchemaEngine):
        enforces_string_bounds = False

    engine = ProviderEngine({"generate_answer": DRAFT})
    program = VanillaRAG(ListRetriever(KB), generator_lm=lm_with(engine, 200), adapter=CompactJSONAdapter())
    program(question="苍鹭货运自行车的续航是多少？")
    assert "maxLength" not in answer_schema(engine, "generate_answer")


def test_bounded_answer_without_a_bound_is_the_predictor_itself():
    predictor = dspy.Predict("question -> answer")
    assert bounded_answer(predictor, "answer", None) is predictor
