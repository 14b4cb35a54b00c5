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
    env_overrides = {
        "SELFRAG_LM__PROFILE": "tiny",
        "SELFRAG_LM__THREADS": "2",
        "SELFRAG_PROGRAM__K": "1",
        "SELFRAG_PROGRAM__MAX_CANDIDATES": "1",
    }
    import os

    env = {**os.environ, **env_overrides}  # the default kb.path (.selfrag/chroma) under cwd = tmp_path:
    for name in ("SELFRAG_KB__PATH", "SELFRAG_KB__COLLECTION", "SELFRAG_CONFIG"):  # the demo is auto-ingested
        env.pop(name, None)
    proc = subprocess.run(
        [sys.executable, "-m", "selfrag.cli.app", "ask", "What is the range of the Heron cargo bike?", "--json"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600,
    )
    if proc.returncode == 1:  # the 135M smoke-test model can ramble past max_tokens: every draft unparseable
        last = proc.stderr.strip().splitlines()[-1]
        assert last.startswith("error: no answer: parse"), proc.stderr[-2000:]  # reported as an error, not
        return  # an abstention, with its cause on one line (issue 15); nothing else to check without a result
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout)  # stdout is the JSON alone
    steps = [s["step"] for s in result["trace"]]
    assert steps[0] == "retrieve_rule"  # a factual question: the cheap rule decides
    assert result["usage"]["lm_calls"] == sum(s["lm_calls"] for s in result["trace"]) > 0
    assert result["usage"]["prompt_tokens"] > 0
    if result["retrieved"]:  # graded, or kept ungraded behind the shipped artifact's similarity gate
        assert "retrieve" in steps and ("grade_relevance" in steps or "grading" in steps or "similarity_gate" in steps)
    assert result["abstained"] or result["answer"]
