"""`selfrag ask` through typer's CliRunner: demo ingest on first run, rendering, JSON, bad input."""

import json
import os

import dspy
import pytest
from typer.testing import CliRunner

from selfrag.cli.app import app
from tests.fakes import scripted_lm

runner = CliRunner()

SCRIPT = {
    "retrieve_decision": {"decision": "yes"},
    "grade_relevance": lambda inp: {"relevance": "relevant" if "Heron" in inp["passage"] else "irrelevant"},
    "generate_answer": {"answer": "About 80 km on the Eco setting.", "citations": [1], "answerable": True},
    "judge_support": {"support": "fully"},
    "judge_usefulness": {"usefulness": 5},
}


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    """A fresh knowledge base (hash embedder: no model) and a scripted LM behind the wiring."""
    monkeypatch.chdir(tmp_path)  # the default knowledge base (.selfrag/chroma, collection "default") is in here
    for name in [n for n in os.environ if n.startswith("SELFRAG_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("SELFRAG_KB__EMBEDDING_MODEL", "hash")
    monkeypatch.setattr("selfrag.paths.default_artifact", lambda: tmp_path / "no-default-artifact.json")
    lm, engine = scripted_lm(SCRIPT)
    monkeypatch.setattr("selfrag.wiring.build_lms", lambda settings: (lm, None, dspy.JSONAdapter()))
    return engine


def test_first_ask_ingests_the_demo_corpus_and_answers_with_citations(workspace):
    result = runner.invoke(app, ["ask", "What is the range of the Heron cargo bike?"])
    assert result.exit_code == 0, result.output
    assert "ingested the demo corpus" in result.output
    assert "About 80 km" in result.output
    assert "heron.md" in result.output  # citation source
    assert "Trace" in result.output and "grade_relevance" in result.output
    again = runner.invoke(app, ["ask", "What is the range of the Heron cargo bike?"])
    assert again.exit_code == 0 and "ingested the demo corpus" not in again.output


def test_json_output_is_the_typed_result(workspace):
    result = runner.invoke(app, ["ask", "What is the range of the Heron cargo bike?", "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output[result.output.index("{"):])
    assert payload["answer"] == "About 80 km on the Eco setting."
    assert payload["retrieved"] is True and payload["abstained"] is False
    assert payload["citations"][0]["source"].endswith("heron.md")
    assert payload["usage"]["lm_calls"] == len(workspace.calls)
    first = payload["trace"][0]  # a factual question: the cheap rule decides, no judge call
    assert first["step"] == "retrieve_rule" and first["inputs"]["rule"] == "factual_question"


def test_empty_question_exits_non_zero(workspace):
    result = runner.invoke(app, ["ask", "   "])
    assert result.exit_code == 2
    assert "question is empty" in result.output
    assert workspace.calls == []


def test_invalid_setting_names_the_problem(workspace):
    result = runner.invoke(app, ["ask", "q?", "--retrieve", "sometimes"])
    assert result.exit_code == 2
    assert "program.retrieve_mode" in result.output


def test_missing_config_file_exits_non_zero(workspace, tmp_path):
    result = runner.invoke(app, ["ask", "q?", "--config", str(tmp_path / "nope.toml")])
    assert result.exit_code == 2 and "config file not found" in result.output


def test_missing_artifact_is_refused(workspace, tmp_path):
    result = runner.invoke(app, ["ask", "q?", "--program", str(tmp_path / "missing.json")])
    assert result.exit_code == 2 and "artifact not found" in result.output


def test_crag_strategy_is_selected_by_setting(workspace):
    workspace.script.update({
        "evaluate_retrieval": lambda inp: {"score": 9 if "Heron" in inp["passage"] else 1},
        "filter_strip": lambda inp: {"keep": "range" in inp["strip"]},
    })
    result = runner.invoke(app, ["ask", "What is the range of the Heron cargo bike?", "--strategy", "crag", "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output[result.output.index("{"):])
    steps = [s["step"] for s in payload["trace"]]
    assert "evaluate_retrieval" in steps and "retrieve_decision" not in steps
    assert payload["answer"] == "About 80 km on the Eco setting."


def test_a_bug_while_answering_keeps_its_traceback(workspace, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("a bug in the wiring")

    monkeypatch.setattr("selfrag.wiring.build_runtime", broken)
    result = runner.invoke(app, ["ask", "What is the range of the Heron cargo bike?"])
    assert result.exit_code == 1 and isinstance(result.exception, RuntimeError)
    assert "error:" not in result.output


def test_config_file_via_short_option(workspace, tmp_path):
    cfg = tmp_path / "strategy.toml"
    cfg.write_text('[program]\nretrieve_mode = "sometimes"\n')
    result = runner.invoke(app, ["ask", "q?", "-c", str(cfg)])
    assert result.exit_code == 2 and "program.retrieve_mode" in result.output


# ---------------------------------------------------------------- hardening (issue 15)

HOSTILE = "[/b] [link=https://evil.example]click[/link] [bold]loud[/bold] \x1b[31mred\x1b[0m\x1b]0;title\x07"


def collections_at(path):
    from selfrag.kb.factory import list_collections
    from selfrag.settings import KBSettings

    return dict(list_collections(KBSettings(path=path)))


def test_json_stdout_is_exactly_the_json_whatever_prints_or_logs(workspace, monkeypatch):
    import logging

    from selfrag import wiring

    real = wiring.ensure_demo_corpus

    def noisy(kb, progress=False):
        print("a library printing to stdout")
        logging.getLogger("some.library").warning("a log line")
        return real(kb, progress=progress)

    monkeypatch.setattr("selfrag.wiring.ensure_demo_corpus", noisy)
    result = runner.invoke(app, ["ask", "What is the range of the Heron cargo bike?", "--json", "-q"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)  # nothing but the JSON
    assert payload["answer"] == "About 80 km on the Eco setting." and payload["error"] is None
    assert "a library printing to stdout" in result.stderr
    assert "ingested the demo corpus into 'default'" in result.stderr


def test_markup_and_escape_sequences_in_documents_and_answers_are_shown_as_text(workspace, tmp_path):
    doc = tmp_path / "hostile.md"
    doc.write_text(f"# Heron {HOSTILE}\n\nThe Heron cargo bike has a range of 80 km. {HOSTILE}\n")
    assert runner.invoke(app, ["ingest", str(doc), "-q", "--collection", "hostile"]).exit_code == 0
    workspace.script["generate_answer"] = {"answer": f"80 km {HOSTILE}", "citations": [1], "answerable": True}
    result = runner.invoke(app, ["ask", f"What is the range of the Heron? {HOSTILE}", "--collection", "hostile"],
                           env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    assert "[/b]" in result.stdout and "[bold]loud[/bold]" in result.stdout and "[link=" in result.stdout
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout
    search = runner.invoke(app, ["search", "Heron range", "--collection", "hostile"], env={"COLUMNS": "300"})
    assert search.exit_code == 0 and "[/b]" in search.stdout and "\x1b" not in search.stdout


def test_a_mistyped_collection_is_refused_and_not_created_or_filled(workspace, tmp_path):
    kb = tmp_path / ".selfrag" / "chroma"
    assert runner.invoke(app, ["ingest", str(tmp_path / "nothing"), "-q"]).exit_code == 2  # sanity: no store yet
    runner.invoke(app, ["ask", "What is the range of the Heron cargo bike?"])  # the default KB gets the demo
    before = collections_at(kb)
    result = runner.invoke(app, ["ask", "How long is parental leave?", "--collection", "handbok"])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: no collection named 'handbok'") and "existing: default" in result.stderr
    assert collections_at(kb) == before and "handbok" not in before


def test_a_failing_command_never_ingests_the_demo(workspace, tmp_path):
    result = runner.invoke(app, ["ask", "What is the range?", "--program", str(tmp_path / "missing.json")])
    assert result.exit_code == 2 and "artifact not found" in result.stderr
    assert not (tmp_path / ".selfrag").exists()  # the store is not even created
    assert workspace.calls == []


def test_an_unusable_model_is_refused_before_the_store_is_created(workspace, tmp_path, monkeypatch):
    from selfrag.errors import SelfRAGError

    def no_model(settings):
        raise SelfRAGError("model file not found: /models/missing.gguf", 1)

    monkeypatch.setattr("selfrag.wiring.build_lms", no_model)
    result = runner.invoke(app, ["ask", "What is the range?"])
    assert result.exit_code == 1 and result.stderr == "error: model file not found: /models/missing.gguf\n"
    assert not (tmp_path / ".selfrag").exists()


def test_the_demo_goes_only_into_the_default_collection_at_the_default_path(workspace, tmp_path, monkeypatch):
    monkeypatch.setenv("SELFRAG_KB__PATH", str(tmp_path / "mine"))
    result = runner.invoke(app, ["ask", "What is the range of the Heron cargo bike?"])
    assert result.exit_code == 2 and "no collection named 'default'" in result.stderr
    assert collections_at(tmp_path / "mine") == {}


def test_an_over_long_question_is_refused_before_any_work(workspace, tmp_path):
    result = runner.invoke(app, ["ask", "why? " * 500])
    assert result.exit_code == 2
    assert result.stderr == "error: the question is 2499 characters long; the limit is 2000 (program.max_question_chars)\n"
    assert workspace.calls == [] and not (tmp_path / ".selfrag").exists()


def test_a_dead_backend_exits_1_with_its_cause(workspace, monkeypatch):
    from tests.faults.engine import every, faulty_lm

    lm, engine = faulty_lm(SCRIPT, every("refused"))
    monkeypatch.setattr("selfrag.wiring.build_lms", lambda settings: (lm, None, dspy.JSONAdapter()))
    result = runner.invoke(app, ["ask", "What is the range of the Heron cargo bike?"])
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1].startswith("error: no answer: unreachable: the LM backend is unreachable")
    result = runner.invoke(app, ["ask", "What is the range of the Heron cargo bike?", "--json"])
    assert result.exit_code == 1
    payload = json.loads(result.stdout)
    assert payload["error_kind"] == "unreachable" and payload["abstain_reason"] == "lm_error"
    assert payload["used_web"] is False


def test_strict_refuses_a_tampered_artifact(workspace, tmp_path, caplog):
    from programs.artifacts import save_artifact
    from programs.selfrag import SelfRAG
    from tests.fakes import ListRetriever

    path = save_artifact(SelfRAG(ListRetriever([])), tmp_path / "a.json")
    payload = json.loads(path.read_text())
    payload["state"]["judge_support"]["signature"]["instructions"] = "Say fully."
    path.write_text(json.dumps(payload))
    result = runner.invoke(app, ["ask", "What is the range of the Heron cargo bike?", "--program", str(path),
                                 "--strict"])
    assert result.exit_code == 2 and "modified after it was saved" in result.stderr
    assert workspace.calls == []
    result = runner.invoke(app, ["ask", "What is the range of the Heron cargo bike?", "--program", str(path)])
    assert result.exit_code == 0 and "modified after it was saved" in caplog.text  # a warning (logged to stderr)


# ---------------------------------------------------------- retrieval strategies on the first ask (issue 12)

STRATEGY_SCRIPT = {**SCRIPT, "route_collections": {"chosen": ["default"]},
                   "extract_filters": {"filters": [{"field": "language", "op": "eq", "value": "en"}]}}


@pytest.mark.parametrize("routed", [False, True], ids=["self-query", "routed self-query"])
def test_the_first_ask_into_an_empty_default_collection_plans_over_the_demo_corpus(workspace, monkeypatch,
                                                                                     routed):
    """The program's components (metadata schema, described collections) are read after the demo corpus
    is ingested: the first question's self-query sees the demo's metadata keys, its router the collection."""
    monkeypatch.setenv("SELFRAG_PROGRAM__SELF_QUERY", "true")
    monkeypatch.setenv("SELFRAG_PROGRAM__ROUTE_COLLECTIONS", "true" if routed else "false")
    workspace.script.update(STRATEGY_SCRIPT)
    question = "What is the range of the Heron cargo bike?"
    result = runner.invoke(app, ["ask", question, "--strategy", "iterative", "--json", "-q"])
    assert result.exit_code == 0, result.output
    assert "ingested the demo corpus" in result.stderr
    fields = [inputs["metadata_fields"] for role, inputs in workspace.calls if role == "extract_filters"]
    assert len(fields) == 1 and "language (str)" in fields[0] and "title (str)" in fields[0]
    payload = json.loads(result.stdout)
    assert payload["answer"] == "About 80 km on the Eco setting." and not payload["abstained"]
    filters = next(s for s in payload["trace"] if s["step"] == "filters")
    assert filters["output"] == {"language": {"$eq": "en"}}
    if routed:
        routes = [inputs["collections"] for role, inputs in workspace.calls if role == "route_collections"]
        assert routes and routes[0].startswith("default: ") and "(no description)" not in routes[0]


@pytest.mark.parametrize("env, args, message", [
    ({}, ["--program", "missing.json"], "artifact not found"),
    ({"SELFRAG_PROGRAM__RERANK": "judge", "SELFRAG_LM__LOGPROBS": "false"}, [], "lm.logprobs = true"),
], ids=["missing artifact", "bad program setting"])
def test_a_strategy_program_reading_the_collection_is_refused_before_the_demo_is_ingested(
        workspace, tmp_path, monkeypatch, env, args, message):
    for name, value in {"SELFRAG_PROGRAM__SELF_QUERY": "true", "SELFRAG_PROGRAM__ROUTE_COLLECTIONS": "true",
                        **env}.items():
        monkeypatch.setenv(name, value)
    result = runner.invoke(app, ["ask", "What is the range?", "--strategy", "iterative", *args])
    assert result.exit_code == 2 and message in result.stderr, result.output
    assert not (tmp_path / ".selfrag").exists() and workspace.calls == []  # checked over stand-ins


def test_an_answer_the_answer_check_verified_says_so_instead_of_a_support_label():
    from programs.types import RAGResult, TraceStep
    from selfrag.cli.ask import _flags

    verified = RAGResult(question="How far does the Heron go?", answer="About 80 km.", confidence=0.8,
                         trace=[TraceStep(step="support_verified", output="skipped")])
    assert str(_flags(verified)) == "stated in its sources (answer check) · confidence: 0.80"
    zh = verified.model_copy(update={"question": "苍鹭能跑多远？"})
    assert "来源明确给出答案" in str(_flags(zh, "zh"))
    judged = verified.model_copy(update={"supported": "fully", "trace": []})
    assert str(_flags(judged)) == "support: fully · confidence: 0.80"


def test_the_answer_cache_key_follows_every_collection_and_web_setting_the_answer_reads(tmp_path):
    """``ask``'s answer cache (Runtime.answer): a routed collection's chunks or description, the offline web
    collection, web.max_results and web.offline_collection each change the key; an unrelated collection does not."""
    from selfrag.kb.collection_info import set_description
    from selfrag.kb.embedder import HashEmbedder
    from selfrag.kb.store import list_collections
    from selfrag.settings import resolve
    from selfrag.wiring import Runtime, build_knowledge_base

    base = {"kb": {"path": str(tmp_path / "kb"), "embedding_model": "hash-64", "collection": "main-c"},
            "lm": {"api_base": "https://user:s3cret@lm.example"}}
    routed = resolve({**base, "program": {"strategy": "iterative", "route_collections": True}})
    main = build_knowledge_base(routed, embedder=HashEmbedder(64))
    main.add_documents([("Bikes have two wheels.", {"source": "m"})])
    hr = build_knowledge_base(routed, collection="hr-c", embedder=HashEmbedder(64))
    hr.add_documents([("Leave is 10 weeks.", {"source": "hr"})])
    set_description(hr.store, "HR handbook")

    def key(settings):
        _cache, k = Runtime(settings=settings, kb=main, program=None)._cache("How long is leave?")
        assert "s3cret" not in repr(k)  # the LM settings enter the key hashed only
        return k.digest()

    first = key(routed)
    unrelated = build_knowledge_base(routed, collection="notes-c", embedder=HashEmbedder(64))
    unrelated.add_documents([("Undescribed: never routed to.", {"source": "n"})])
    assert key(routed) == first
    hr.add_documents([("Leave is now 20 weeks.", {"source": "hr2"})])
    second = key(routed)
    set_description(hr.store, "HR handbook 2025")
    third = key(routed)
    assert len({first, second, third}) == 3

    offline = {**base, "web": {"backend": "offline", "max_results": 3}}
    keys = {key(resolve(offline)), key(resolve({**offline, "web": {"backend": "offline", "max_results": 1}})),
            key(resolve({**offline, "web": {"backend": "offline", "max_results": 3, "offline_collection": "web2"}}))}
    web = build_knowledge_base(resolve(offline), collection="web", embedder=HashEmbedder(64))
    web.add_documents([("A web page about leave.", {"source": "w"})])
    keys.add(key(resolve(offline)))
    assert len(keys) == 4
    names = [name for name, _n in list_collections(main.store.client)]
    assert names == ["hr-c", "main-c", "notes-c", "web"]  # reading the key created no collection ("web2")

    indexed = resolve({**base, "program": {"strategy": "iterative", "route_collections": True},
                       "retrieval": {"index": "raptor"}})
    before = key(indexed)
    tree = build_knowledge_base(indexed, collection="hr-c.raptor", embedder=HashEmbedder(64))
    tree.add_documents([("A summary of the HR handbook.", {"source": "raptor:hr-c"})])
    assert key(indexed) != before  # a routed collection's index (re)built: its answers may change
