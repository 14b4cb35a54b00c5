"""`selfrag eval` through typer's CliRunner on the five-example set of tests/optimize/test_evaluate.py: the
table, the report files, one-line errors for an unknown program and a missing artifact."""

import json

import dspy
from typer.testing import CliRunner

from selfrag.cli.app import app
from tests.fakes import scripted_lm
from tests.optimize.test_evaluate import SCRIPT, fake_corpus, hash_kb_settings, write_dataset  # noqa: F401 - fixture

runner = CliRunner()


def test_cli_eval_runs_and_prints_the_table(hash_kb_settings, tmp_path, monkeypatch):
    monkeypatch.setattr("optimize.sources.corpus_documents", fake_corpus)
    lm, _ = scripted_lm(SCRIPT)
    monkeypatch.setattr("selfrag.wiring.build_lms", lambda settings: (lm, None, dspy.JSONAdapter()))
    data = write_dataset(tmp_path / "five.jsonl")
    result = runner.invoke(app, ["eval", "--dataset", str(data), "--programs", "vanilla-rag,no-retrieval",
                                 "--run-id", "cli", "--reports", str(tmp_path / "rep")])
    assert result.exit_code == 0, result.output
    assert "| vanilla-rag | 5 | 0 |" in result.output
    assert (tmp_path / "rep" / "cli" / "quality_vs_cost.png").stat().st_size > 0
    bad = runner.invoke(app, ["eval", "--programs", "bogus"])
    assert bad.exit_code == 2 and "unknown program" in bad.output
    missing = runner.invoke(app, ["eval", "--dataset", str(data), "--programs", f"compiled:{tmp_path / 'no.json'}",
                                  "--run-id", "bad", "--reports", str(tmp_path / "rep")])
    assert missing.exit_code == 2 and "compiled artifact not found" in " ".join(missing.output.split())
    assert isinstance(missing.exception, SystemExit)  # a one-line exit, not a traceback


def test_cli_eval_makes_the_model_forget_its_prompts_before_each_question(hash_kb_settings, tmp_path, monkeypatch):
    """Each (program, question) starts from a model with no evaluated prompt, so an answer does not depend on
    the program that ran before it (greedy decoding over a partly cached prompt can pick another answer)."""
    monkeypatch.setattr("optimize.sources.corpus_documents", fake_corpus)
    lm, engine = scripted_lm(SCRIPT)
    forgot = []
    engine.forget_prompts = lambda: forgot.append(len(engine.calls))
    monkeypatch.setattr("selfrag.wiring.build_lms", lambda settings: (lm, None, dspy.JSONAdapter()))
    data = write_dataset(tmp_path / "five.jsonl")
    result = runner.invoke(app, ["eval", "--dataset", str(data), "--programs", "vanilla-rag,no-retrieval",
                                 "--run-id", "fresh", "--reports", str(tmp_path / "rep"), "-q"])
    assert result.exit_code == 0, result.output
    assert len(forgot) == 10 and forgot[0] == 0 and forgot == sorted(forgot)  # once before each of the 10 pairs


def test_cli_eval_progress_goes_to_stderr_and_bad_run_ids_are_refused(hash_kb_settings, tmp_path, monkeypatch):
    monkeypatch.setattr("optimize.sources.corpus_documents", fake_corpus)
    lm, _ = scripted_lm(SCRIPT)
    monkeypatch.setattr("selfrag.wiring.build_lms", lambda settings: (lm, None, dspy.JSONAdapter()))
    data = write_dataset(tmp_path / "five.jsonl")
    rows = data.read_text().splitlines()  # the bar shows each record's id: untrusted text (issue 15, 1)
    hostile = json.dumps({**json.loads(rows[-1]), "id": "[/b]\x1b[31mq5"})
    data.write_text("\n".join([*rows[:-1], hostile]) + "\n")
    result = runner.invoke(app, ["eval", "--dataset", str(data), "--programs", "vanilla-rag", "--run-id", "p",
                                 "--reports", str(tmp_path / "rep")])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("# Evaluation p") and "5/5" in result.stderr  # the bar: stderr only
    assert "━" not in result.stdout
    bad = runner.invoke(app, ["eval", "--dataset", str(data), "--run-id", "../../escape"])
    assert bad.exit_code == 2 and bad.stderr.startswith("error: invalid run id '../../escape'")
    assert not (tmp_path / "escape").exists()
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    r = runner.invoke(app, ["eval", "--dataset", str(empty), "--run-id", "e", "--reports", str(tmp_path / "rep")])
    assert r.exit_code == 2 and "is empty" in r.stderr


def test_cli_eval_on_a_dead_backend_exits_1(hash_kb_settings, tmp_path, monkeypatch):
    from tests.faults.engine import every, faulty_lm

    monkeypatch.setattr("optimize.sources.corpus_documents", fake_corpus)
    lm, _ = faulty_lm(SCRIPT, every("refused"))
    monkeypatch.setattr("selfrag.wiring.build_lms", lambda settings: (lm, None, dspy.JSONAdapter()))
    data = write_dataset(tmp_path / "five.jsonl")
    result = runner.invoke(app, ["eval", "--dataset", str(data), "--programs", "vanilla-rag", "--run-id", "dead",
                                 "--reports", str(tmp_path / "rep"), "-q"])
    assert result.exit_code == 1
    assert "| vanilla-rag | 5 | 5 |" in result.stdout
    assert result.stderr.startswith("error: every question failed")
    assert "5 question error(s): unreachable 5" in " ".join(result.stdout.split())


def summarise(texts):
    return "Summary of " + "; ".join(texts)


def test_cli_eval_answers_over_the_index_in_retrieval_index(hash_kb_settings, tmp_path, monkeypatch):
    from selfrag.kb.indexes import build_index
    from selfrag.wiring import build_knowledge_base

    kb = build_knowledge_base(hash_kb_settings, collection="own")
    kb.add_documents(fake_corpus("own", tmp_path))
    lm, engine = scripted_lm(SCRIPT)
    monkeypatch.setattr("selfrag.wiring.build_lms", lambda settings: (lm, None, dspy.JSONAdapter()))
    data = write_dataset(tmp_path / "five.jsonl")
    args = ["eval", "--dataset", str(data), "--collection", "own", "--programs", "vanilla-rag",
            "--reports", str(tmp_path / "rep"), "-q"]

    missing = runner.invoke(app, [*args, "--run-id", "m", "--index", "raptor"])
    assert missing.exit_code == 2
    assert missing.stderr.strip() == ("error: retrieval.index = 'raptor': no raptor index for collection 'own': "
                                      "run selfrag ingest --index raptor --collection own first")
    monkeypatch.setenv("SELFRAG_RETRIEVAL__INDEX", "raptor")
    ask = runner.invoke(app, ["ask", "When did the Zephyr bridge open?", "--collection", "own"])
    assert (ask.exit_code, ask.stderr) == (2, missing.stderr)  # the one line ask gives
    assert engine.calls == [] and not (tmp_path / "rep" / "m").exists()  # refused before any LM call or file

    build_index(kb, "raptor", summarise=summarise, progress=False)
    result = runner.invoke(app, [*args, "--run-id", "r"])  # retrieval.index from the environment
    assert result.exit_code == 0, result.output
    drafts = [inputs["passages"] for role, inputs in engine.calls if role == "generate_answer"]
    assert len(drafts) == 5 and any("Summary of" in d for d in drafts)  # RAPTOR's summary nodes were retrieved
    assert json.loads((tmp_path / "rep" / "r" / "config.json").read_text())["retrieval"]["index"] == "raptor"

    calls = len(engine.calls)
    plain = runner.invoke(app, [*args, "--run-id", "p", "--index", "none"])  # the flag wins over the environment
    assert plain.exit_code == 0, plain.output
    assert not any("Summary of" in inputs["passages"] for role, inputs in engine.calls[calls:]
                   if role == "generate_answer")


def test_cli_eval_builds_a_strategy_program_as_ask_does(hash_kb_settings, tmp_path, monkeypatch):
    from optimize.eval_runs import RESULTS, read_results
    from tests.optimize.test_evaluate import dated_corpus
    from selfrag.wiring import build_knowledge_base

    build_knowledge_base(hash_kb_settings, collection="own").add_documents(dated_corpus("own", tmp_path))
    script = {**SCRIPT, "extract_filters": {"filters": [{"field": "year", "op": "eq", "value": 1931}]},
              "next_query": {"next_query": "Zephyr bridge opening"}}
    lm, engine = scripted_lm(script)
    monkeypatch.setattr("selfrag.wiring.build_lms", lambda settings: (lm, None, dspy.JSONAdapter()))
    monkeypatch.setenv("SELFRAG_PROGRAM__SELF_QUERY", "true")
    data = write_dataset(tmp_path / "five.jsonl")
    result = runner.invoke(app, ["eval", "--dataset", str(data), "--collection", "own", "--programs",
                                 "iterative,vanilla-rag", "--run-id", "sq", "--reports", str(tmp_path / "rep"), "-q"])
    assert result.exit_code == 0, result.output
    rows = read_results(tmp_path / "rep" / "sq" / RESULTS)
    filters = {"iterative": [], "vanilla-rag": []}
    for r in rows:
        filters[r["program"]] += [s["output"] for s in r["result"]["trace"] if s["step"] == "filters"]
    assert filters["iterative"] == [{"year": {"$eq": 1931}}] * 5  # the collection's schema reached self-query
    assert filters["vanilla-rag"] == [] and engine.count("extract_filters") == 5  # built as before
    assert {d for r in rows if r["program"] == "iterative" for d in r["cited_doc_ids"]} <= {"d1"}


def vanilla_artifact(path, manifest=None, instructions=None):
    from optimize.evaluate import build_program
    from programs.artifacts import save_artifact
    from programs.registry import parse_program
    from tests.optimize.test_evaluate import FixedRetriever

    program = build_program(parse_program("vanilla-rag"), FixedRetriever())
    if instructions:
        program.generate_answer.signature = program.generate_answer.signature.with_instructions(instructions)
    return save_artifact(program, path, manifest)


def test_cli_eval_warns_when_the_artifact_s_thresholds_were_fitted_on_the_questions_it_scores(
        hash_kb_settings, tmp_path, monkeypatch):
    monkeypatch.setattr("optimize.sources.corpus_documents", fake_corpus)
    lm, _ = scripted_lm(SCRIPT)
    monkeypatch.setattr("selfrag.wiring.build_lms", lambda settings: (lm, None, dspy.JSONAdapter()))
    pooled = {"language": "en", "calibration": {"split": "train+dev", "stages": {
        "retrieve": {"split": "train"}, "stated": {"split": "train+dev", "row_splits": {"train": 300, "dev": 100}}}}}
    art = vanilla_artifact(tmp_path / "pooled.json", pooled)
    args = ["--programs", f"compiled:{art}", "--limit", "2", "--reports", str(tmp_path / "rep"), "-q"]
    result = runner.invoke(app, ["eval", "--dataset", "clapnq", "--run-id", "dev", *args])
    assert result.exit_code == 0, result.output
    warning = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert warning == [f"warning: compiled:{art}: its thresholds were fitted on clapnq dev questions (calibration "
                       "split 'train+dev'): its scores on them are in-sample"]
    # not on another dataset's questions, nor from a manifest that does not say which split its rows were on
    other = runner.invoke(app, ["eval", "--dataset", str(write_dataset(tmp_path / "five.jsonl")), "--run-id", "file",
                             *args])
    assert other.exit_code == 0 and "warning:" not in other.stderr
    older = vanilla_artifact(tmp_path / "older.json", {"calibration": {"split": "train", "stages": {
        "stated": {"rows_recorded": 400}}}})
    result = runner.invoke(app, ["eval", "--dataset", "clapnq", "--run-id", "older", "--programs",
                                 f"compiled:{older}", "--limit", "2", "--reports", str(tmp_path / "rep"), "-q"])
    assert result.exit_code == 0 and "warning:" not in result.stderr


def test_cli_eval_refuses_to_resume_over_a_changed_artifact_in_one_line(hash_kb_settings, tmp_path, monkeypatch):
    monkeypatch.setattr("optimize.sources.corpus_documents", fake_corpus)
    lm, engine = scripted_lm(SCRIPT)
    monkeypatch.setattr("selfrag.wiring.build_lms", lambda settings: (lm, None, dspy.JSONAdapter()))
    art = vanilla_artifact(tmp_path / "a.json")
    args = ["eval", "--dataset", str(write_dataset(tmp_path / "five.jsonl")), "--programs", f"compiled:{art}",
            "--run-id", "r", "--reports", str(tmp_path / "rep"), "-q"]
    assert runner.invoke(app, [*args, "--limit", "2"]).exit_code == 0
    vanilla_artifact(art, instructions="Recompiled.")
    calls = len(engine.calls)
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit)
    assert result.stderr.startswith(f"error: run r: compiled:{art} changed since the run started")
    assert len(result.stderr.strip().splitlines()) == 1 and len(engine.calls) == calls


def test_the_programs_help_names_every_registered_program():
    from typer.testing import CliRunner

    from programs.registry import PROGRAM_NAMES
    from selfrag.cli.app import app

    shown = " ".join(CliRunner().invoke(app, ["eval", "--help"], env={"COLUMNS": "400"}).output.split())
    assert all(name in shown for name in PROGRAM_NAMES), shown
