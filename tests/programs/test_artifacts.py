"""Compiled artifacts: JSON round trip (in a fresh interpreter) and refusal of unusable files."""

import json
import subprocess
import sys
import textwrap

import dspy
import pytest

from programs.artifacts import ArtifactError, load_state_into, read_artifact, save_artifact, signature_hash
from programs.selfrag import SelfRAG
from tests.fakes import ListRetriever, passage


def program():
    return SelfRAG(ListRetriever([passage("p1", "text")]))


def compiled_program():
    rag = program()
    rag.grade_relevance.demos = [dspy.Example(question="Who?", passage="[1] «Ann did it»", relevance="relevant")]
    rag.judge_support.signature = rag.judge_support.signature.with_instructions("Compiled support instructions.")
    return rag


def test_round_trip_in_a_fresh_subprocess(tmp_path):
    path = save_artifact(compiled_program(), tmp_path / "a.json", manifest={"optimizer": "test"})
    code = textwrap.dedent(f"""
        import os; os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
        from programs.artifacts import load_state_into
        from programs.selfrag import SelfRAG
        from tests.fakes import ListRetriever
        rag = load_state_into(SelfRAG(ListRetriever([])), {str(path)!r})
        d = rag.grade_relevance.demos[0]
        print(d["question"], d["relevance"], rag.judge_support.signature.instructions, sep="|")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "Who?|relevant|Compiled support instructions."


def test_artifact_is_plain_json_with_header(tmp_path):
    path = save_artifact(compiled_program(), tmp_path / "a.json", manifest={"optimizer": "bootstrap"})
    payload = json.loads(path.read_text())
    assert payload["program"] == "SelfRAG"
    assert payload["signature_hash"] == signature_hash(program())
    assert payload["manifest"] == {"optimizer": "bootstrap"}
    assert set(payload["state"]) >= {"grade_relevance", "judge_support", "generate_answer"}


def test_signature_hash_ignores_instructions_but_not_fields():
    rag = program()
    before = signature_hash(rag)
    rag.judge_support.signature = rag.judge_support.signature.with_instructions("new words")
    assert signature_hash(rag) == before
    rag.judge_support.signature = rag.judge_support.signature.append("rationale", dspy.OutputField(), type_=str)
    assert signature_hash(rag) != before


def test_mismatched_signature_hash_is_refused(tmp_path):
    path = save_artifact(compiled_program(), tmp_path / "a.json")
    payload = json.loads(path.read_text())
    payload["signature_hash"] = "0" * 16
    path.write_text(json.dumps(payload))
    with pytest.raises(ArtifactError, match="signature_hash"):
        load_state_into(program(), path)


def test_other_program_version_is_refused(tmp_path):
    path = save_artifact(compiled_program(), tmp_path / "a.json")
    payload = json.loads(path.read_text())
    payload["program_version"] = "0.1"
    path.write_text(json.dumps(payload))
    with pytest.raises(ArtifactError, match="recompile"):
        load_state_into(program(), path)


def test_missing_and_corrupt_files_are_refused(tmp_path):
    with pytest.raises(ArtifactError, match="not found"):
        read_artifact(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ArtifactError, match="not valid JSON"):
        read_artifact(bad)
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"hello": 1}))
    with pytest.raises(ArtifactError, match="not a selfrag artifact"):
        read_artifact(other)


def test_shipped_default_artifact_matches_the_current_program():
    """The artifact the CLI loads by default must have been compiled for these signatures."""
    from selfrag.paths import default_artifact

    DEFAULT_ARTIFACT = default_artifact()

    assert DEFAULT_ARTIFACT.is_file(), "the repository ships artifacts/default.json"
    rag = load_state_into(program(), DEFAULT_ARTIFACT)
    payload = read_artifact(DEFAULT_ARTIFACT)
    assert payload["manifest"]["scores"]  # compiled with measured dev scores
    assert any(p.demos for _, p in rag.named_predictors())
