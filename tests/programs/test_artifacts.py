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
    assert payload["manifest"] == {"optimizer": "bootstrap", "state_sha256": payload["state_sha256"]}
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


@pytest.mark.parametrize("name", ["default.json", "bootstrap-relevance-support.json"])
def test_shipped_artifacts_record_a_matching_content_hash(name):
    """Else a tampered shipped artifact loads silently and ``--strict`` refuses the untouched one."""
    from programs.artifacts import HASH_KEY, verify_content
    from selfrag.paths import default_artifact

    path = default_artifact().parent / name
    payload = read_artifact(path)
    assert verify_content(payload, path, strict=True)
    manifest = json.loads(path.with_name(name.replace(".json", ".manifest.json")).read_text())
    assert manifest[HASH_KEY] == payload["manifest"][HASH_KEY] == payload[HASH_KEY]


def _tampered(tmp_path, edit):
    path = save_artifact(compiled_program(), tmp_path / "a.json")
    payload = json.loads(path.read_text())
    edit(payload)
    path.write_text(json.dumps(payload))
    return path


@pytest.mark.parametrize("edit, problem", [
    (lambda p: p["state"]["grade_relevance"].update(demos="notalist"), "grade_relevance.demos: expected a list"),
    (lambda p: p["state"]["grade_relevance"].update(demos=["x"]), r"grade_relevance.demos\[0\]: expected an object"),
    (lambda p: p["state"]["judge_support"].update(forward="evil"), "unknown key"),
    (lambda p: p["state"]["judge_support"].update(signature="plain"), "string instructions"),
    (lambda p: p["state"]["judge_support"].update(lm={"model": "openai/gpt-4o"}), "must not carry an LM"),
    (lambda p: p["state"].pop("judge_support"), "missing predictor"),
    (lambda p: p["state"].update(extra={}), "unknown predictor"),
    (lambda p: p.update(state=[1, 2]), "expected an object"),
])
def test_a_state_of_the_wrong_shape_is_refused(tmp_path, edit, problem):
    rag = program()
    before = rag.dump_state()
    with pytest.raises(ArtifactError, match=problem):
        load_state_into(rag, _tampered(tmp_path, edit))
    assert rag.dump_state() == before  # nothing half-loaded


def test_the_content_hash_is_recorded_and_checked(tmp_path, caplog):
    manifest = {"optimizer": "test"}
    path = save_artifact(compiled_program(), tmp_path / "a.json", manifest=manifest)
    payload = json.loads(path.read_text())
    assert len(payload["state_sha256"]) == 64 and manifest["state_sha256"] == payload["state_sha256"]
    load_state_into(program(), path, strict=True)  # untouched: loads under strict

    def edit(p):
        p["state"]["judge_support"]["signature"]["instructions"] = "Always answer fully."

    tampered = _tampered(tmp_path, edit)
    with caplog.at_level("WARNING", logger="programs.artifacts"):
        rag = load_state_into(program(), tampered)
    assert rag.judge_support.signature.instructions == "Always answer fully."
    assert "was modified after it was saved" in caplog.text
    with pytest.raises(ArtifactError, match="modified after it was saved.*--strict"):
        load_state_into(program(), tampered, strict=True)


def test_strict_refuses_an_artifact_without_a_hash(tmp_path):
    path = _tampered(tmp_path, lambda p: p.pop("state_sha256"))
    load_state_into(program(), path)  # accepted (an artifact from before the hash)
    with pytest.raises(ArtifactError, match="records no content hash"):
        load_state_into(program(), path, strict=True)


def test_a_deeply_nested_file_is_refused(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ArtifactError, match="not valid JSON"):
        read_artifact(deep)


def _without_next_query(tmp_path):
    """An artifact as compiled before SelfRAG had its ``next_query`` predictor."""
    from programs.artifacts import HASH_KEY, content_hash

    path = save_artifact(compiled_program(), tmp_path / "old.json")
    payload = json.loads(path.read_text())
    del payload["state"]["next_query"]
    payload["signature_hash"] = signature_hash(program(), exclude={"next_query"})
    payload[HASH_KEY] = content_hash(payload)
    path.write_text(json.dumps(payload))
    return path


def test_an_artifact_without_an_added_predictor_loads_it_uncompiled(tmp_path):
    rag = program()
    fresh = rag.next_query.dump_state()
    load_state_into(rag, _without_next_query(tmp_path), strict=True)
    assert rag.grade_relevance.demos[0]["relevance"] == "relevant"  # the compiled predictors loaded
    assert rag.judge_support.signature.instructions == "Compiled support instructions."
    assert rag.next_query.dump_state() == fresh  # the added one: its uncompiled state


def test_an_added_predictor_present_in_the_artifact_is_loaded(tmp_path):
    rag = compiled_program()
    rag.next_query.signature = rag.next_query.signature.with_instructions("Compiled next query.")
    path = save_artifact(rag, tmp_path / "new.json")
    assert load_state_into(program(), path).next_query.signature.instructions == "Compiled next query."


def test_only_added_predictors_may_be_missing(tmp_path):
    path = _without_next_query(tmp_path)
    payload = json.loads(path.read_text())
    payload["signature_hash"] = signature_hash(program())  # claims the full program: the hash is checked
    path.write_text(json.dumps(payload))
    with pytest.raises(ArtifactError, match="signature_hash"):
        load_state_into(program(), path)
