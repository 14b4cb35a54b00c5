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
