"""Fuzzing the inputs a user controls, through the command line (typer's CliRunner, a scripted LM, the
hash embedder): questions, file names and contents, JSONL records, TOML and environment settings,
artifact files, collection names and eval records.

For every input: no traceback; a non-zero exit prints exactly one ``error:`` line on stderr; and a
failed command leaves the store as it was (the chunk ids of every collection are compared).
Example counts are small (the whole file runs in well under a minute); ``derandomize`` keeps CI stable.
"""

from __future__ import annotations

import itertools
import json
import os
from dataclasses import dataclass
from pathlib import Path

import dspy
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from selfrag.cli.app import app
from tests.fakes import scripted_lm

SCRIPT = {
    "retrieve_decision": {"decision": "yes"},
    "grade_relevance": lambda inp: {"relevance": "relevant" if "Heron" in inp["passage"] else "irrelevant"},
    "generate_answer": {"answer": "About 80 km [/b] \x1b[31m.", "citations": [1], "answerable": True},
    "answer_directly": {"answer": "I think [bold]so[/bold]."},
    "judge_support": {"support": "fully"},
    "judge_usefulness": {"usefulness": 5},
    "rewrite_query": {"query": "Heron range"},
}
FUZZ = settings(max_examples=12, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])
HOSTILE = ["[/b]", "[bold]x[/bold]", "[link=https://evil.example]x[/link]", "\x1b[31m", "\x1b]0;t\x07", "\r",
           "\u202e", "\ufeff", "\udcff", "日本語", "😀", "\\", "'", '"', "{", "}", "$", "#", "..", "-"]
hostile_text = st.lists(st.one_of(st.sampled_from(HOSTILE), st.text(max_size=12)), max_size=6).map("".join)


@dataclass
class Workspace:
    root: Path
    runner: CliRunner
    counter: itertools.count

    def fresh(self, kind: str) -> Path:
        path = self.root / kind / str(next(self.counter))
        path.mkdir(parents=True)
        return path

    def invoke(self, *args: str, env: dict | None = None):
        return self.runner.invoke(app, list(args), env=env)


def snapshot(root: Path) -> dict[str, list[str]]:
    """Every collection's sorted chunk ids (the store's content, as far as the tests care)."""
    from selfrag.kb.factory import list_collections
    from selfrag.kb.store import make_client
    from selfrag.settings import KBSettings

    kb = KBSettings(path=root / ".selfrag" / "chroma")
    client = make_client("persistent", Path(kb.path).resolve())
    return {name: sorted(client.get_collection(name).get(include=[])["ids"]) for name, _ in list_collections(kb)}


def clean_exit(result, allowed=(0, 1, 2)) -> None:
    """No traceback; a failure is one ``error:`` line on stderr."""
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    assert result.exit_code in allowed, (result.exit_code, result.output)
    if result.exit_code != 0:
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        for name in [n for n in os.environ if n.startswith("SELFRAG_")]:
            mp.delenv(name)
        mp.setenv("SELFRAG_KB__EMBEDDING_MODEL", "hash")
        mp.setattr("selfrag.paths.default_artifact", lambda: root / "no-default-artifact.json")
        lm, _ = scripted_lm(SCRIPT)
        mp.setattr("selfrag.wiring.build_lms", lambda settings: (lm, None, dspy.JSONAdapter()))
        from tests.optimize.test_evaluate import fake_corpus

        mp.setattr("optimize.sources.corpus_documents", fake_corpus)
        ws = Workspace(root, CliRunner(), itertools.count())
        seed = ws.fresh("seed")
        (seed / "notes.md").write_text("# Notes\n\nThe Heron cargo bike has a range of 80 km.\n")
        assert ws.invoke("ask", "What is the range of the Heron?").exit_code == 0  # the demo, into "default"
        assert ws.invoke("ingest", str(seed), "-q", "--collection", "seed").exit_code == 0
        yield ws


@FUZZ
@given(question=st.one_of(hostile_text, st.integers(1990, 2100).map(lambda n: "why " * (n // 4))),
       as_json=st.booleans())
@example(question="What is the Heron's range? [/b]", as_json=False)  # issue 15 (1): MarkupError after the LM work
@example(question="caf\udce9 Heron?", as_json=True)  # a non-UTF-8 argument byte
@example(question="x" * 2001, as_json=False)
def test_questions(ws, question, as_json):
    before = snapshot(ws.root)
    result = ws.invoke("ask", *(["--json"] if as_json else []), "--", question.replace("\x00", ""))
    clean_exit(result, allowed=(0, 2))
    if result.exit_code == 0 and as_json:
        assert json.loads(result.stdout)["question"]
    if result.exit_code == 0 and not as_json:
        assert "\x1b" not in result.stdout and "[/b]" in result.stdout  # the answer's markup, as text
    assert snapshot(ws.root) == before


names = st.text(st.characters(blacklist_characters="/\x00", blacklist_categories=("Cs",)), min_size=1, max_size=40) \
    .filter(lambda n: n not in (".", "..") and len(n.encode()) < 200)
contents = st.one_of(st.binary(max_size=600), st.text(max_size=600).map(str.encode), hostile_text.map(
    lambda t: t.encode("utf-8", "surrogatepass")))
suffixes = st.sampled_from([".md", ".txt", ".html", ".jsonl", ".pdf", ".csv", ""])


@FUZZ
@given(files=st.lists(st.tuples(names, suffixes, contents), min_size=1, max_size=4),
       raw_name=st.binary(min_size=1, max_size=12).filter(lambda b: b"/" not in b and b"\x00" not in b
                                                          and b not in (b".", b"..")))
@example(files=[("[bold] \x1b[31mred[link=x]", ".md", b"# [/b]\n\ntext [link=x]"), ("e", ".txt", b"")], raw_name=b"caf\xe9")
def test_file_names_and_contents(ws, files, raw_name):
    folder = ws.fresh("files")
    for name, suffix, data in files:
        (folder / (name + suffix)).write_bytes(data)
    with open(os.fsencode(folder) + b"/" + raw_name + b".txt", "wb") as fh:  # possibly not UTF-8
        fh.write(b"A file whose name may not decode.")
    before = snapshot(ws.root)
    result = ws.invoke("ingest", str(folder), "-q", "--collection", "fuzz")
    clean_exit(result, allowed=(0, 1))
    after = snapshot(ws.root)
    if result.exit_code != 0:
        assert after == before
    assert {k: v for k, v in after.items() if k != "fuzz"} == {k: v for k, v in before.items() if k != "fuzz"}
    search = ws.invoke("search", "file", "--collection", "fuzz", "--mode", "hybrid") if "fuzz" in after else None
    if search is not None:
        clean_exit(search, allowed=(0,))


json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=True), hostile_text),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(hostile_text, inner, max_size=3)),
    max_leaves=8)
records = st.one_of(json_values, st.fixed_dictionaries(
    {"text": st.one_of(hostile_text, json_values)},
    optional={"metadata": json_values, "doc_id": json_values, "title": json_values, "$where": json_values,
              "": json_values, "#x": json_values, "chroma:document": json_values}))


@FUZZ
@given(rows=st.lists(st.one_of(records.map(lambda r: json.dumps(r, ensure_ascii=False)), hostile_text),
                     min_size=1, max_size=6))
@example(rows=['{"text": "ok"}', '{"text": "x", "": 1}', '{"text": "y", "$where": 1}', '{"text": "\\udcff"}'])
def test_jsonl_records(ws, rows):
    folder = ws.fresh("jsonl")
    (folder / "rows.jsonl").write_text("\n".join(r.replace("\n", " ") for r in rows) + "\n",
                                       encoding="utf-8", errors="surrogatepass")
    before = snapshot(ws.root)
    result = ws.invoke("ingest", str(folder / "rows.jsonl"), "-q", "--collection", "fuzz")
    clean_exit(result, allowed=(0, 1))
    if result.exit_code != 0:
        assert snapshot(ws.root) == before


# Settings that cannot send traffic anywhere or write outside the workspace (no kb.path, kb.host, kb.server,
# web backends, LM endpoints): the commands fuzzed here read the knowledge base only.
SAFE_KEYS = {"kb": ["collection", "chunk_size", "chunk_overlap", "embedding_model", "port", "chunker", "nope"],
             "retrieval": ["mode", "k", "dense_weight", "bm25_weight", "rrf_k", "candidates"],
             "program": ["k", "max_rewrites", "strategy"], "nope": ["x"]}
toml_values = st.one_of(st.integers(-5, 5000), st.booleans(), st.floats(allow_nan=False, allow_infinity=False),
                        st.sampled_from(["hash", "hash-3", "hash-x", "no-such-model", "dense", "bm25", "semantic",
                                         "default", "seed", "[/b]", ""]), hostile_text)


def toml_literal(value) -> str:
    return json.dumps(value) if not isinstance(value, bool) else str(value).lower()


toml_docs = st.one_of(
    hostile_text,
    st.dictionaries(st.sampled_from(sorted(SAFE_KEYS)), st.data(), max_size=3).flatmap(lambda sections: st.tuples(
        *[st.tuples(st.just(s), st.dictionaries(st.sampled_from(SAFE_KEYS[s]), toml_values, max_size=3))
          for s in sections])).map(lambda pairs: "\n".join(
              f"[{s}]\n" + "\n".join(f"{k} = {toml_literal(v)}" for k, v in kv.items()) for s, kv in pairs)))
env_settings = st.dictionaries(
    st.sampled_from([f"SELFRAG_{s.upper()}__{k.upper()}" for s, ks in SAFE_KEYS.items() for k in ks]
                    + ["SELFRAG_KB", "SELFRAG_RETRIEVAL"]),
    st.one_of(toml_values.map(lambda v: v if isinstance(v, str) else json.dumps(v)), hostile_text), max_size=3)


@FUZZ
@given(toml=toml_docs, env=env_settings, command=st.sampled_from([["collections"], ["stats", "--collection", "seed"],
                                                                  ["search", "Heron", "--collection", "seed"]]))
@example(toml='[kb]\ncollection = "seed"\nchunk_size = \n', env={}, command=["collections"])
@example(toml="", env={"SELFRAG_KB__EMBEDDING_MODEL": "no-such-model"}, command=["search", "Heron", "--collection", "seed"])
@example(toml="", env={"SELFRAG_KB__COLLECTION": "handbok"}, command=["stats"])
def test_toml_and_env_settings(ws, toml, env, command):
    config = ws.fresh("config") / "selfrag.toml"
    config.write_text(toml, encoding="utf-8", errors="surrogatepass")
    env = {k: v.replace("\x00", "") for k, v in env.items()}
    before = snapshot(ws.root)
    result = ws.invoke(*command, "--config", str(config), env=env)
    clean_exit(result, allowed=(0, 2))
    assert snapshot(ws.root) == before


def _real_artifact(path: Path) -> dict:
    from programs.artifacts import save_artifact
    from programs.selfrag import SelfRAG
    from tests.fakes import ListRetriever

    save_artifact(SelfRAG(ListRetriever([])), path)
    return json.loads(path.read_text())


def _mutate(payload, path: list, value):
    target = payload
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return payload


@FUZZ
@given(data=st.data(), strict=st.booleans())
@example(data=None, strict=False)  # the state's demos "notalist" (issue 15, 11)
def test_artifact_files(ws, data, strict):
    path = ws.fresh("artifacts") / "a.json"
    payload = _real_artifact(path)
    choice = data.draw(st.sampled_from(["random", "mutated", "bytes"])) if data is not None else "notalist"
    if choice == "notalist":
        path.write_text(json.dumps(_mutate(payload, ["state", "judge_support", "demos"], "notalist")))
    elif choice == "bytes":
        path.write_bytes(data.draw(st.binary(max_size=300)))
    elif choice == "random":
        path.write_text(json.dumps(data.draw(json_values)), encoding="utf-8", errors="surrogatepass")
    else:
        spots = [["selfrag_artifact"], ["program"], ["signature_hash"], ["state"], ["state", "judge_support"],
                 ["state", "judge_support", "demos"], ["state", "judge_support", "signature"],
                 ["state", "judge_support", "signature", "instructions"], ["state", "grade_relevance", "lm"],
                 ["thresholds"], ["state_sha256"], ["manifest"]]
        spot = data.draw(st.sampled_from(spots))
        path.write_text(json.dumps(_mutate(payload, spot, data.draw(json_values)), ensure_ascii=True))
    before = snapshot(ws.root)
    result = ws.invoke("ask", "What is the range of the Heron?", "--program", str(path),
                       *(["--strict"] if strict else []))
    clean_exit(result, allowed=(0, 2))
    assert snapshot(ws.root) == before


@FUZZ
@given(name=st.one_of(hostile_text, st.sampled_from(["seed", "default", "ab", "a" * 600, "x..y", "-ab", "ok-name"])),
       command=st.sampled_from(["stats", "search", "ingest", "remove-source", "ask"]))
@example(name="handbok", command="search")  # issue 15 (2): a mistyped collection was created (and filled)
@example(name="handbok", command="ask")
@example(name="[/b]x", command="stats")
def test_collection_names(ws, name, command):
    seed_file = ws.root / "seed" / "0" / "notes.md"
    args = {"stats": ["stats"], "search": ["search", "Heron"], "ingest": ["ingest", str(seed_file), "-q"],
            "remove-source": ["remove-source", str(ws.root / "nothing.md")], "ask": ["ask", "Heron range?"]}[command]
    before = snapshot(ws.root)
    result = ws.invoke(*args, "--collection", name.replace("\x00", ""))
    clean_exit(result)
    after = snapshot(ws.root)
    if result.exit_code != 0 or command != "ingest":
        assert after == before


eval_records = st.one_of(json_values, st.fixed_dictionaries(
    {"question": st.one_of(hostile_text, json_values)},
    optional={"id": json_values, "answers": st.one_of(st.lists(hostile_text, max_size=2), json_values),
              "answer": json_values, "answerable": json_values, "gold_doc_ids": json_values}))


@FUZZ
@given(rows=st.lists(eval_records.map(lambda r: json.dumps(r, ensure_ascii=True)), min_size=0, max_size=4),
       run_id=st.one_of(st.just(None), hostile_text))
@example(rows=['"just a string"'], run_id=None)  # issue 15 (9): AttributeError
@example(rows=[], run_id=None)  # an empty dataset
@example(rows=['{"question": "q?"}'], run_id="../..")  # outside the reports folder
def test_eval_records(ws, rows, run_id):
    folder = ws.fresh("eval")
    (folder / "qa.jsonl").write_text("\n".join(rows) + ("\n" if rows else ""))
    before = {k: v for k, v in snapshot(ws.root).items() if not k.startswith("eval-")}
    run = ["--run-id", run_id.replace("\x00", "")] if run_id is not None else []
    result = ws.invoke("eval", "--dataset", str(folder / "qa.jsonl"), "--programs", "no-retrieval",
                       "--reports", str(folder / "reports"), "-q", *run)
    clean_exit(result, allowed=(0, 2))
    assert {k: v for k, v in snapshot(ws.root).items() if not k.startswith("eval-")} == before
    written = [p for p in folder.rglob("*") if p.is_file() and p.name != "qa.jsonl"]
    assert all(folder / "reports" in p.parents for p in written)  # nothing outside the reports folder
