"""Re-record the llama.cpp fixtures in this folder: ``python -m tests.lm.recordings.record``.

Runs the project's judgement signatures on the TINY model (SmolLM2-135M, profile ``tiny``; never the
local Qwen model) in process through ``LlamaCppEngine`` and a real ``dspy.Predict`` with
``dspy.JSONAdapter`` (schema-constrained decoding) and ``logprobs=True, top_logprobs=5`` (the factory's
defaults), and saves per judgement the completion text, the prediction's ``logprobs`` (OpenAI format,
as DSPy hands them over) and the usage.
"""

from __future__ import annotations

import json
from pathlib import Path


import dspy

from selfrag.lm.llamacpp_engine import LlamaCppEngine
from selfrag.lm.model_files import gguf_path
from signatures import EvaluateRetrieval, GradeRelevance, JudgeUsefulness

HERE = Path(__file__).parent
TOP_LOGPROBS = 5
MAX_TOKENS = 64

CASES = {
    "smollm2_relevance.json": (
        GradeRelevance,
        "relevance",
        {"question": "What is the capital of France?", "passage": "Bananas are yellow."},
    ),
    "smollm2_usefulness.json": (
        JudgeUsefulness,
        "usefulness",
        {"question": "What is the capital of France?", "answer": "Paris is the capital of France."},
    ),
    "smollm2_score.json": (
        EvaluateRetrieval,
        "score",
        {"question": "What is the capital of France?", "passage": "Paris is the capital of France."},
    ),
}


def dumps(record: dict) -> str:
    """JSON with one generated token per line (small diffs, readable fixtures)."""
    content = record["logprobs"]["content"]
    head = json.dumps({**record, "logprobs": {"content": "@CONTENT@"}}, indent=1, ensure_ascii=False)
    lines = ",\n".join("   " + json.dumps(item, ensure_ascii=False) for item in content)
    return head.replace('"@CONTENT@"', "[\n" + lines + "\n  ]") + "\n"


def main() -> None:
    from selfrag.paths import offline_environment

    offline_environment()
    path = gguf_path("tiny", None)
    engine = LlamaCppEngine(path, n_ctx=1024, n_threads=1, max_tokens=MAX_TOKENS)
    lm = dspy.LM(
        "llamacpp/" + path.stem,
        engine=engine,
        temperature=0.0,
        max_tokens=MAX_TOKENS,
        cache=False,
        num_retries=0,
        logprobs=True,
        top_logprobs=TOP_LOGPROBS,
    )
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        for name, (signature, field, inputs) in CASES.items():
            pred = dspy.Predict(signature)(**inputs)
            record = {
                "source": f"llama.cpp in process, {path.name}, dspy.JSONAdapter, top_logprobs={TOP_LOGPROBS}",
                "field": field,
                "labels": list(signature.output_fields[field].annotation.__args__),
                "inputs": inputs,
                "decoded": pred[field],
                "text": lm.history[-1]["outputs"][0]["text"],
                "logprobs": json.loads(json.dumps(pred.logprobs)),
                "usage": json.loads(json.dumps(lm.history[-1]["usage"])),
            }
            (HERE / name).write_text(dumps(record))
            print(name, pred[field])


if __name__ == "__main__":
    main()
