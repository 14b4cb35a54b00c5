"""Your own data through the command line (CliRunner, hashing embedder, scripted LMs): `data check`,
`data derive` (over the chunks or `--index` / retrieval.index), `compile --data --teacher`, `eval --dataset
DIR --collection`, and each bad input as one line and a non-zero exit with nothing half-written."""

import json

import dspy
import pytest
from typer.testing import CliRunner

from selfrag.cli.app import app
from tests.optimize.test_compile import AnyEngine
from tests.optimize.test_compile_data import STUDENT, teacher_script
from tests.optimize.user_data import QA, write_pages, write_qa

runner = CliRunner()


def one_line(result) -> str:
    return " ".join(result.output.split())


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A working folder with the toy pages ingested into collection 'toy' and the QA file."""
    monkeypatch.setenv("SELFRAG_KB__EMBEDDING_MODEL", "hash")
    monkeypatch.setenv("SELFRAG_KB__PATH", str(tmp_path / "kb"))
    monkeypatch.chdir(tmp_path)
    write_pages(tmp_path / "docs")
    assert runner.invoke(app, ["ingest", str(tmp_path / "docs"), "--collection", "toy", "-q"]).exit_code == 0
    write_qa(tmp_path / "qa.jsonl")
    return tmp_path


def test_check_reports_counts_and_every_bad_line(tmp_path):
    good = write_qa(tmp_path / "qa.jsonl")
    ok = runner.invoke(app, ["data", "check", str(good)])
    assert ok.exit_code == 0, ok.output
    assert "7 line(s): 7 usable (6 answerable, 1 unanswerable, 5 with gold documents), 0 bad" in one_line(ok)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "q", "answers": ["a"]}\n{oops\n{"answers": []}\n{"question": "r", "answers": "x"}\n')
    result = runner.invoke(app, ["data", "check", str(bad)])
    assert result.exit_code == 1
    out = one_line(result)
    assert f"{bad}:2: bad JSON" in out and f"{bad}:3: missing 'question'" in out
    assert f"{bad}:4: 'answers' must be a list of strings" in out and "3 bad line(s)" in out


@pytest.mark.parametrize("content, message", [
    ("", "is empty"),
    ("\n\n", "is empty"),
    ('{"question": "Who won?", "answers": []}\n', "no answerable question"),
    ("not json\n", "none of its 1 line(s) is a usable QA record"),
])
def test_check_and_derive_refuse_a_file_with_nothing_usable(home, content, message):
    path = home / "x.jsonl"
    path.write_text(content)
    check = runner.invoke(app, ["data", "check", str(path)])
    assert check.exit_code == 1 and message in one_line(check)
    derive = runner.invoke(app, ["data", "derive", str(path), "--collection", "toy", "--out", str(home / "out")])
    assert derive.exit_code == 2 and message in one_line(derive) and "Traceback" not in derive.output
    assert not (home / "out").exists()


def test_derive_writes_the_folder_and_prints_what_was_made(home):
    result = runner.invoke(app, ["data", "derive", "qa.jsonl", "--collection", "toy", "--out", "data/toy"])
    assert result.exit_code == 0, result.output
    out = one_line(result)
    assert "partial_answer" in out and "hard_negative" in out and "dataset_hash" in out
    manifest = json.loads((home / "data" / "toy" / "manifest.json").read_text())
    assert manifest["collection"] == "toy" and manifest["format_version"] == 1
    assert manifest["params"]["embedder"] == "hash-256" and manifest["qa_file"] == "qa.jsonl"
    assert sorted(p.name for p in (home / "data").iterdir()) == ["toy"]


def test_derive_and_check_show_hostile_paths_as_text(home):
    """Paths are untrusted text (issue 15, 1): rich markup in them is shown as written, escapes removed."""
    folder = home / "q [/b]\x1b[31m"
    folder.mkdir(parents=True)
    qa = write_qa(folder / "qa.jsonl")
    result = runner.invoke(app, ["data", "derive", str(qa), "--collection", "toy", "--out", "out [/b]x"])
    assert result.exit_code == 0, result.output
    assert "[/b]" in result.output and "\x1b" not in result.output
    assert (home / "out [/b]x" / "manifest.json").is_file()
    qa.write_text(qa.read_text() + '{"question": "q", "answers": "x"}\n')
    check = runner.invoke(app, ["data", "check", str(qa)])
    assert check.exit_code == 1 and "q [/b]/qa.jsonl:8:" in one_line(check) and "\x1b" not in check.output


def test_derive_bad_inputs_are_one_line_errors_with_nothing_written(home):
    unknown = runner.invoke(app, ["data", "derive", "qa.jsonl", "--collection", "nope", "--out", "out"])
    assert unknown.exit_code == 2
    assert "unknown or empty collection 'nope' (collections: toy)" in one_line(unknown)
    stray = write_qa(home / "stray.jsonl", [{"question": "When did the bridge open?", "answers": ["1931"],
                                            "gold_sources": ["elsewhere.md"]}])
    none = runner.invoke(app, ["data", "derive", str(stray), "--collection", "toy", "--out", "out"])
    assert none.exit_code == 2 and "collection 'toy' holds none of the gold documents" in one_line(none)
    bad_line = home / "bad.jsonl"
    bad_line.write_text(json.dumps(QA[0]) + "\n" + '{"question": 5, "answers": []}\n')
    refused = runner.invoke(app, ["data", "derive", str(bad_line), "--collection", "toy", "--out", "out"])
    assert refused.exit_code == 2 and "line 2: 'question' must be a string" in one_line(refused)
    assert not (home / "out").exists() and not [p for p in home.iterdir() if p.name.startswith(".out")]
    assert "nope" not in runner.invoke(app, ["collections"]).output  # the unknown collection was not created


@pytest.fixture
def derived(home):
    assert runner.invoke(app, ["data", "derive", "qa.jsonl", "--collection", "toy", "--out", "derived"]).exit_code == 0
    return home / "derived"


def test_compile_data_with_a_teacher_through_the_cli(derived, monkeypatch):
    student, teacher = AnyEngine(STUDENT), AnyEngine(teacher_script())
    monkeypatch.setattr("selfrag.wiring.build_lms", lambda settings: (
        dspy.LM("scripted/student", engine=student, cache=False), None, dspy.JSONAdapter()))
    asked = []

    def teacher_lm(settings, name):
        asked.append(name)
        return dspy.LM("scripted/teacher", engine=teacher, cache=False)

    monkeypatch.setattr("selfrag.wiring.build_teacher_lm", teacher_lm)
    result = runner.invoke(app, ["compile", "--data", str(derived), "--judgement", "relevance,answer", "--budget", "2",
                                 "--teacher", "openai/gpt-4o-mini", "--name", "toy", "--out-dir", "art"])
    assert result.exit_code == 0, result.output
    assert asked == ["openai/gpt-4o-mini"] and teacher.calls
    assert "answer_quality" in result.output
    manifest = json.loads((derived.parent / "art" / "toy.manifest.json").read_text())
    assert manifest["lm"]["teacher"] == "scripted/teacher" and manifest["data"]["collection"] == "toy"


def test_compile_refuses_a_data_folder_of_another_version(derived, monkeypatch):
    engine = AnyEngine(STUDENT)
    monkeypatch.setattr("selfrag.wiring.build_lms", lambda settings: (
        dspy.LM("scripted/s", engine=engine, cache=False), None, dspy.JSONAdapter()))
    manifest = json.loads((derived / "manifest.json").read_text())
    (derived / "manifest.json").write_text(json.dumps({**manifest, "format_version": 2}))
    result = runner.invoke(app, ["compile", "--data", str(derived), "--out-dir", "art"])
    assert result.exit_code == 2 and "derived in format version 2" in one_line(result)
    bad_teacher = runner.invoke(app, ["compile", "--teacher", "litellm", "--out-dir", "art"])
    assert bad_teacher.exit_code == 2 and "--teacher needs" in one_line(bad_teacher)
    answer_only = runner.invoke(app, ["compile", "--judgement", "answer", "--out-dir", "art"])
    assert answer_only.exit_code == 2 and "needs a derived data folder" in one_line(answer_only)
    assert engine.calls == [] and not (derived.parent / "art").exists()


def test_compile_over_the_data_collection_refuses_a_missing_retrieval_index(derived, monkeypatch):
    engine = AnyEngine(STUDENT)
    monkeypatch.setattr("selfrag.wiring.build_lms", lambda settings: (
        dspy.LM("scripted/s", engine=engine, cache=False), None, dspy.JSONAdapter()))
    monkeypatch.setenv("SELFRAG_RETRIEVAL__INDEX", "raptor")  # configured, never built for 'toy'
    result = runner.invoke(app, ["compile", "--data", str(derived), "--e2e", "--out-dir", "art"])
    assert result.exit_code == 2
    assert result.stderr.strip() == ("error: retrieval.index = 'raptor': no raptor index for collection 'toy': "
                                     "run selfrag ingest --index raptor --collection toy first")
    assert engine.calls == [] and not (derived.parent / "art").exists()


def answer_script():
    gold = {q["question"]: q["answers"] for q in QA}
    return {"retrieve_decision": {"decision": "yes"},
            "generate_answer": lambda inp: {"answer": (gold.get(inp["question"]) or ["I cannot tell."])[0],
                                            "citations": [1], "answerable": bool(gold.get(inp["question"]))}}


def test_eval_answers_from_the_collection_and_matches_gold_by_source(derived, monkeypatch):
    engine = AnyEngine(answer_script())
    monkeypatch.setattr("selfrag.wiring.build_lms", lambda settings: (
        dspy.LM("scripted/s", engine=engine, cache=False), None, dspy.JSONAdapter()))
    for dataset in (str(derived), "qa.jsonl"):
        run = "dir" if dataset == str(derived) else "file"
        result = runner.invoke(app, ["eval", "--dataset", dataset, "--collection", "toy", "--programs", "vanilla-rag",
                                     "--run-id", run, "--reports", "rep"])
        assert result.exit_code == 0, result.output
        summary = json.loads((derived.parent / "rep" / run / "summary.json").read_text())
        assert summary["meta"]["collection"] == "toy" and summary["meta"]["corpus_added"] == 0
        rows = [json.loads(x) for x in (derived.parent / "rep" / run / "results.jsonl").read_text().splitlines()]
        named = {q["id"] for q in QA if q.get("gold_sources")}
        answerable = [r for r in rows if r["answerable"] and (r["id"] in named or run == "dir")]
        assert answerable and all(r["gold_doc_ids"] for r in answerable)  # gold sources → the toy chunk ids
        assert summary["programs"]["vanilla-rag"]["citation_hit"] > 0
    assert len(rows) == len(QA)
    default = runner.invoke(app, ["eval", "--dataset", str(derived), "--programs", "vanilla-rag", "--run-id", "d",
                                  "--reports", "rep"])
    assert default.exit_code == 0 and json.loads(
        (derived.parent / "rep" / "d" / "summary.json").read_text())["meta"]["collection"] == "toy"


def test_eval_bad_collections_are_one_line_errors(derived, monkeypatch):
    engine = AnyEngine(answer_script())
    monkeypatch.setattr("selfrag.wiring.build_lms", lambda settings: (
        dspy.LM("scripted/s", engine=engine, cache=False), None, dspy.JSONAdapter()))
    unknown = runner.invoke(app, ["eval", "--dataset", "qa.jsonl", "--collection", "nope", "--reports", "rep"])
    assert unknown.exit_code == 2 and "unknown or empty collection 'nope'" in one_line(unknown)
    assert runner.invoke(app, ["ingest", str(derived.parent / "docs" / "market.md"), "--collection", "other",
                               "-q"]).exit_code == 0
    stray = write_qa(derived.parent / "stray.jsonl", [QA[0]])
    none = runner.invoke(app, ["eval", "--dataset", str(stray), "--collection", "other", "--programs", "vanilla-rag",
                               "--reports", "rep"])
    assert none.exit_code == 2 and "collection 'other' holds none of the gold documents" in one_line(none)
    bad = derived.parent / "bad.jsonl"
    bad.write_text('{"question": "q"}\n')
    refused = runner.invoke(app, ["eval", "--dataset", str(bad), "--collection", "toy", "--reports", "rep"])
    assert refused.exit_code == 2 and "line 1: missing 'answers'" in one_line(refused)
    assert engine.calls == []


def summarise(texts):
    """A summary node about every page that answers none of the questions: a hard negative only the
    RAPTOR index holds."""
    return "Summary: who, when and what of the Zephyr bridge, the Oda trout, Acme and the Leeds market hall."


def test_derive_retrieves_over_retrieval_index_and_refuses_a_missing_one(home, monkeypatch):
    args = ["data", "derive", "qa.jsonl", "--collection", "toy", "--out", "derived"]
    missing = runner.invoke(app, [*args, "--index", "raptor"])
    assert missing.exit_code == 2
    assert missing.stderr.strip() == ("error: retrieval.index = 'raptor': no raptor index for collection "
                                      "'toy': run selfrag ingest --index raptor --collection toy first")
    monkeypatch.setenv("SELFRAG_RETRIEVAL__INDEX", "raptor")
    assert runner.invoke(app, args).stderr == missing.stderr  # from the environment too: the same line
    assert not (home / "derived").exists() and not [p for p in home.iterdir() if p.name.startswith(".der")]

    from selfrag.kb.indexes import build_index
    from tests.optimize.user_data import hash_kb

    build_index(hash_kb(home), "raptor", summarise=summarise, progress=False)
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    manifest = json.loads((home / "derived" / "manifest.json").read_text())
    assert manifest["params"]["retrieval"]["index"] == "raptor"
    assert "raptor:toy" in relevance_sources(home / "derived")  # RAPTOR's summary node, a hard negative
    plain = runner.invoke(app, [*args[:-1], "plain", "--index", "none"])  # the flag wins over the environment
    assert plain.exit_code == 0, plain.output
    assert "raptor:toy" not in relevance_sources(home / "plain")


def relevance_sources(folder) -> set[str]:
    return {json.loads(line)["provenance"]["source"] for split in ("train", "dev")
            for line in (folder / "relevance" / f"{split}.jsonl").read_text().splitlines()}
