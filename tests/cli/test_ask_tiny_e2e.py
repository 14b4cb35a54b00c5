"""`selfrag ask` end to end with the real tiny model (SmolLM2-135M in llama.cpp) and the real
embedding model: no fakes. Runs in CI (about a minute on 2 cores); the tiny model judges at chance,
so this checks the plumbing — a parsed, traced, cited-or-abstained result — not answer quality."""

import json
import subprocess
import sys

import pytest

pytest.importorskip("llama_cpp", reason="the local extra (llama-cpp-python) is not installed")


@pytest.mark.slow
def test_ask_end_to_end_with_the_tiny_model(tmp_path):
    env_overrides = {  # the default knowledge base, under the working directory: it gets the demo corpus
        "SELFRAG_LM__PROFILE": "tiny",
        "SELFRAG_LM__THREADS": "2",
        "SELFRAG_PROGRAM__K": "1",
        "SELFRAG_PROGRAM__MAX_CANDIDATES": "1",
    }
    import os

    env = {**{k: v for k, v in os.environ.items() if k != "SELFRAG_KB__PATH"}, **env_overrides}
    proc = subprocess.run(
        [sys.executable, "-m", "selfrag.cli.app", "ask", "What is the range of the Heron cargo bike?", "--json"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout[proc.stdout.index("{"):])
    steps = [s["step"] for s in result["trace"]]
    assert steps[0] == "retrieve_decision"
    assert result["usage"]["lm_calls"] == sum(s["lm_calls"] for s in result["trace"]) > 0
    assert result["usage"]["prompt_tokens"] > 0
    if result["retrieved"]:
        assert "retrieve" in steps and "grade_relevance" in steps
    assert result["abstained"] or result["answer"]
