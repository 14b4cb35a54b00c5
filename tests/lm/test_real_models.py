"""Real GGUF models through dspy.Predict + JSONAdapter: the reply parses and is one of the literals.

The ``tiny`` test (SmolLM2-135M, ~2 s on one thread) runs by default and is skipped when
llama-cpp-python or the model package is missing. The ``local`` Qwen test is opt-in
(``-m integration``; pyproject deselects it by default).
"""

from typing import Literal

import dspy
import pytest

from selfrag.lm.factory import build_adapter, build_lm
from selfrag.lm.model_files import ModelFileError
from selfrag.settings import LMSettings


class Relevance(dspy.Signature):
    """Decide whether the passage helps answer the question."""

    question: str = dspy.InputField()
    passage: str = dspy.InputField()
    label: Literal["relevant", "irrelevant"] = dspy.OutputField()


def _predict(settings: LMSettings, question: str, passage: str) -> tuple[dspy.Prediction, dspy.LM]:
    pytest.importorskip("llama_cpp")
    try:
        lm = build_lm(settings)
    except ModelFileError as exc:
        pytest.skip(str(exc))
    with dspy.context(lm=lm, adapter=build_adapter(settings)):
        return dspy.Predict(Relevance)(question=question, passage=passage), lm


@pytest.mark.slow
def test_tiny_model_answers_with_a_literal():
    pred, lm = _predict(
        LMSettings(profile="tiny", threads=1, n_ctx=1024, max_tokens=32),
        "What is the capital of France?",
        "Paris is the capital and largest city of France.",
    )
    assert pred.label in ("relevant", "irrelevant")
    usage = lm.history[-1]["usage"]
    assert usage["prompt_tokens"] > 50 and usage["completion_tokens"] > 0


@pytest.mark.integration
def test_local_model_judges_relevance():
    settings = LMSettings(profile="local", threads=1, n_ctx=2048, max_tokens=32)
    pred, _ = _predict(
        settings, "What is the capital of France?", "Paris is the capital and largest city of France."
    )
    assert pred.label == "relevant"
    pred, _ = _predict(
        settings, "What is the capital of France?", "The mitochondrion is the powerhouse of the cell."
    )
    assert pred.label == "irrelevant"


# ─── Token log-probabilities on the tiny model ──────────────────────────────


class Usefulness(dspy.Signature):
    """Rate how useful the answer is for the question, from 1 (useless) to 5 (complete)."""

    question: str = dspy.InputField()
    answer: str = dspy.InputField()
    usefulness: Literal[1, 2, 3, 4, 5] = dspy.OutputField()


def _tiny_path():
    pytest.importorskip("llama_cpp")
    from selfrag.lm.model_files import gguf_path

    try:
        return gguf_path("tiny", None)
    except ModelFileError as exc:
        pytest.skip(str(exc))


@pytest.mark.slow
def test_engine_logprobs_equal_llama_cpp_own_under_a_grammar():
    """The engine's capture (no ``logits_all``) reports what llama-cpp-python's own ``logprobs`` do
    (``logits_all=True``) under a JSON-schema grammar: the raw, pre-grammar distribution."""
    from dspy.lm15 import Config, Message, Request
    from llama_cpp import Llama

    from selfrag.lm.llamacpp_engine import LlamaCppEngine

    path = _tiny_path()
    schema = {
        "type": "object",
        "properties": {"relevance": {"type": "string", "enum": ["relevant", "irrelevant"]}},
        "required": ["relevance"],
    }
    system = "Decide whether the passage is relevant to the question. Answer in JSON."
    user = "Question: What is the capital of France?\nPassage: Paris is the capital of France."
    reference = Llama(model_path=str(path), n_ctx=512, n_threads=1, logits_all=True, verbose=False, seed=0)
    out = reference.create_chat_completion(
        messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
        temperature=0.0,
        max_tokens=16,
        seed=0,
        response_format={"type": "json_object", "schema": schema},
        logprobs=True,
        top_logprobs=3,
    )
    reference.close()
    expected = out["choices"][0]["logprobs"]["content"]

    engine = LlamaCppEngine(path, n_ctx=512, n_threads=1, max_tokens=16)
    response = engine.complete(
        Request(
            model="llamacpp/tiny",
            system=system,
            messages=(Message.user(user),),
            config=Config(logprobs=3, response_format={"type": "json_schema", "name": "R", "schema": schema}),
        )
    )
    assert response.text == out["choices"][0]["message"]["content"]
    got = response.logprobs
    assert [t.token for t in got] == [t["token"] for t in expected]
    assert [t.logprob for t in got] == pytest.approx([t["logprob"] for t in expected], abs=1e-3)
    for mine, theirs in zip(got, expected):
        assert [(t.token, pytest.approx(t.logprob, abs=1e-3)) for t in mine.top] == [
            (t["token"], t["logprob"]) for t in theirs["top_logprobs"][:3]
        ]
    # Pre-grammar: at the value, the model's favourite tokens are not labels.
    colon = [t.token for t in got].index('":')
    assert got[colon + 1].token == ' "'
    value = got[colon + 2]
    assert "relevant".startswith(value.token) or "irrelevant".startswith(value.token)
    assert value.top[0].token not in ("relevant", "irrelevant") and value.top[0].logprob > value.logprob


@pytest.mark.integration
def test_tiny_model_prediction_carries_label_probabilities():
    from programs.soft_labels import expected_value, soft_label

    _tiny_path()
    settings = LMSettings(profile="tiny", threads=1, n_ctx=1024, max_tokens=32)
    lm = build_lm(settings, logprobs=True, top_logprobs=5)
    with dspy.context(lm=lm, adapter=build_adapter(settings)):
        pred = dspy.Predict(Usefulness)(
            question="What is the capital of France?", answer="Paris is the capital of France."
        )
    soft = soft_label("usefulness", (1, 2, 3, 4, 5), pred.logprobs)
    assert soft.soft and soft.decoded == pred.usefulness
    assert set(soft.probs) == {1, 2, 3, 4, 5}
    assert sum(soft.probs.values()) == pytest.approx(1.0)
    assert soft.probs[pred.usefulness] > 0
    assert 1.0 <= expected_value(soft.probs) <= 5.0
    usage = lm.history[-1]["usage"]
    assert usage["prompt_tokens"] > 50 and "cached_tokens" in usage["prompt_tokens_details"]


# Longer than two prompt batches (a cached prefix is reused in whole batches, llamacpp_model.N_BATCH).
LONG_SYSTEM = ("Answer briefly and only from what you know for certain; say so when you do not know. " * 8).strip()


@pytest.mark.slow
def test_after_forget_prompts_the_whole_prompt_is_evaluated_again():
    """The real model reuses a repeated prompt's prefix from its KV cache, and after ``forget_prompts`` it does
    not: the call evaluates every prompt token, as a fresh process would."""
    from dspy.lm15 import Message, Request

    from selfrag.lm.llamacpp_engine import LlamaCppEngine

    engine = LlamaCppEngine(_tiny_path(), n_ctx=512, n_threads=1, max_tokens=4, ram_cache_mb=64)
    request = Request(model="llamacpp/tiny", system=LONG_SYSTEM, messages=(Message.user("Capital of France?"),))

    def cached() -> int:
        response = engine.complete(request)
        return response.usage.cache_read_tokens or 0

    assert cached() == 0
    assert cached() > 0  # the same prompt again: its prefix is in the KV cache
    engine.forget_prompts()
    assert cached() == 0


@pytest.mark.slow
def test_tiny_model_gives_the_crag_evaluator_a_distribution_over_its_eleven_scores():
    """CRAG's 0–10 evaluator read soft from a real model: "1" is a prefix of "10", so the mass after a
    decoded "1" is split by the next token; the distribution covers every score and sums to one."""
    from programs.judging import field_labels, soft_of
    from signatures import EvaluateRetrieval

    _tiny_path()
    settings = LMSettings(profile="tiny", threads=1, n_ctx=1024, max_tokens=32)
    lm = build_lm(settings, logprobs=True, top_logprobs=5)
    predictor = dspy.Predict(EvaluateRetrieval)
    with dspy.context(lm=lm, adapter=build_adapter(settings)):
        pred = predictor(question="What is the capital of France?",
                         passage="[1] Paris is the capital and largest city of France.")
    soft = soft_of(pred, "score", field_labels(predictor, "score"))
    assert soft is not None and soft.soft and soft.decoded == pred.score
    assert set(soft.probs) == set(range(11)) and sum(soft.probs.values()) == pytest.approx(1.0)
    assert soft.probs[soft.label] == max(soft.probs.values())


@pytest.mark.integration
def test_a_prompt_after_a_cached_prefix_gives_the_logprobs_of_a_cold_prompt():
    """What the model evaluated before does not change a call's output: the same request gives the same
    text and token log-probabilities cold, after another request sharing its prefix, after another
    system prompt (its state restored from the RAM cache) and repeated. On the local model (the tiny one
    gives the same logits however its prompt is batched, so it cannot show the difference); fails with
    the prefix reused unaligned (checked)."""
    from dspy.lm15 import Config, Message, Request

    from selfrag.lm.llamacpp_engine import LlamaCppEngine
    from selfrag.lm.model_files import gguf_path

    pytest.importorskip("llama_cpp")
    try:
        path = gguf_path("local", None)
    except ModelFileError as exc:
        pytest.skip(str(exc))
    engine = LlamaCppEngine(path, n_ctx=1024, n_threads=2, max_tokens=8, ram_cache_mb=64)

    def request(system, question):
        return Request(model="llamacpp/local", system=system, messages=(Message.user(question),),
                       config=Config(temperature=0.0, max_tokens=8, logprobs=3))

    def out(req):
        response = engine.complete(req)
        return [(t.token, t.logprob) for t in response.logprobs], response.usage.cache_read_tokens or 0

    target = request(LONG_SYSTEM, "What is the capital of France?")
    cold, _ = out(target)
    for before in ([request(LONG_SYSTEM, "What is the capital of Spain?")],
                   [request(LONG_SYSTEM, "Who wrote Hamlet?"), request("Reply in French. " * 12, "Hello?")],
                   [target]):
        engine.forget_prompts()
        for req in before:
            out(req)
        warm, cached = out(target)
        assert cached > 0  # the prefix was reused
        assert warm == cold
