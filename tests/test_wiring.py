"""The composition root: the registry picks the program, and ``load_compiled`` builds the artifact's program."""

import json
import subprocess
import sys
from pathlib import Path

import dspy
import pytest

from programs.artifacts import ArtifactError, save_artifact
from programs.baselines import GradedRAG
from programs.crag import CorrectiveRAG
from programs.registry import PROGRAM_NAMES, program_class
from programs.selfrag import SelfRAG
from selfrag.settings import Settings
from tests.fakes import ListRetriever, passage, scripted_lm

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def settings(tmp_path, monkeypatch):
    """Settings over a fresh knowledge base (hash embedder: no model), a scripted LM behind the wiring
    and a stand-in for the shipped artifact."""
    monkeypatch.chdir(tmp_path)
    shipped = tmp_path / "shipped.json"
    monkeypatch.setattr("selfrag.paths.default_artifact", lambda: shipped)
    lm, _ = scripted_lm({})
    monkeypatch.setattr("selfrag.wiring.build_lms", lambda settings: (lm, None, dspy.JSONAdapter()))
    return Settings(kb={"path": str(tmp_path / "kb"), "embedding_model": "hash"})


def compiled(program, path, instructions="Compiled instructions."):
    name, predictor = next(iter(program.named_predictors()))
    predictor.signature = predictor.signature.with_instructions(instructions)
    save_artifact(program, path)
    return name


def instructions(program, name):
    return dict(program.named_predictors())[name].signature.instructions


@pytest.mark.parametrize("strategy", PROGRAM_NAMES)
def test_the_strategy_setting_builds_the_registered_program(settings, strategy):
    from selfrag.wiring import build_runtime

    settings = settings.model_copy(update={"program": settings.program.model_copy(update={"strategy": strategy})})
    assert type(build_runtime(settings).program) is program_class(strategy)


def test_the_shipped_artifact_is_loaded_for_selfrag_only(settings):
    from selfrag.paths import default_artifact
    from selfrag.wiring import build_runtime

    name = compiled(SelfRAG(ListRetriever([])), default_artifact(), "Shipped instructions.")
    assert instructions(build_runtime(settings).program, name) == "Shipped instructions."
    assert instructions(build_runtime(settings, load_default_artifact=False).program, name) != "Shipped instructions."
    crag = settings.model_copy(update={"program": settings.program.model_copy(update={"strategy": "crag"})})
    assert type(build_runtime(crag).program) is CorrectiveRAG  # the SelfRAG artifact is not forced on it


@pytest.mark.parametrize("cls", [SelfRAG, CorrectiveRAG, GradedRAG])
def test_load_compiled_builds_the_program_named_in_the_artifact(settings, tmp_path, cls):
    from selfrag import load_compiled

    path = tmp_path / "compiled.json"
    name = compiled(cls(ListRetriever([passage("p1", "text")])), path)
    program = load_compiled(path, settings)
    assert type(program) is cls
    assert instructions(program, name) == "Compiled instructions."


def test_load_compiled_refuses_an_unregistered_program_before_building_anything(settings, tmp_path, monkeypatch):
    from selfrag.wiring import load_compiled

    path = tmp_path / "other.json"
    save_artifact(SelfRAG(ListRetriever([])), path)
    payload = json.loads(path.read_text())
    payload["program"] = "MysteryRAG"
    path.write_text(json.dumps(payload))
    monkeypatch.setattr("selfrag.wiring.build_runtime", lambda *a, **k: pytest.fail("built a runtime"))
    with pytest.raises(ArtifactError, match="MysteryRAG"):
        load_compiled(path, settings)
    with pytest.raises(ArtifactError, match="not found"):
        load_compiled(tmp_path / "missing.json", settings)


@pytest.mark.parametrize("cls", [CorrectiveRAG, GradedRAG])
def test_an_artifact_in_the_settings_builds_the_program_it_names(settings, tmp_path, cls):
    """``program_path`` (as ``serve --program`` and ``ask --program`` set it) builds the artifact's program
    when no strategy was set, and loads its state."""
    from selfrag.wiring import build_runtime

    path = tmp_path / "compiled.json"
    name = compiled(cls(ListRetriever([passage("p1", "text")])), path)
    runtime = build_runtime(settings.model_copy(update={"program_path": path}))
    assert type(runtime.program) is cls and instructions(runtime.program, name) == "Compiled instructions."
    assert runtime.settings.program.strategy == program_name_of(cls)


def test_a_strategy_that_was_set_is_kept_and_a_mismatched_artifact_is_refused(settings, tmp_path):
    from selfrag.settings import resolve
    from selfrag.wiring import build_runtime

    path = tmp_path / "crag.json"
    compiled(CorrectiveRAG(ListRetriever([])), path)
    chosen = resolve({"program": {"strategy": "selfrag"}, "program_path": path,
                      "kb": {"path": str(settings.kb.path), "embedding_model": "hash"}})
    with pytest.raises(ArtifactError, match="CorrectiveRAG"):
        build_runtime(chosen)


def test_a_crag_artifact_brings_its_thresholds_and_a_setting_against_them_is_a_config_error(settings, tmp_path):
    from programs.thresholds import CragThresholds, Thresholds
    from selfrag.errors import ConfigError
    from selfrag.wiring import build_runtime

    path = tmp_path / "crag.json"
    fitted = CorrectiveRAG(ListRetriever([]))
    fitted.compiled_thresholds = Thresholds(crag=CragThresholds(upper=6.1, lower=2.5))
    save_artifact(fitted, path)
    runtime = build_runtime(settings.model_copy(update={"program_path": path}))
    assert runtime.program.crag_thresholds == CragThresholds(upper=6.1, lower=2.5)
    against = settings.program.model_copy(update={"crag_lower": 6.3})  # above the artifact's upper
    with pytest.raises(ConfigError, match=r"program settings: program.crag_lower \(6.3\) must not exceed"):
        build_runtime(settings.model_copy(update={"program_path": path, "program": against}))


def program_name_of(cls):
    return next(name for name in PROGRAM_NAMES if program_class(name) is cls)


def test_import_selfrag_does_not_load_the_wiring():
    code = "import sys, selfrag; print('selfrag.wiring' in sys.modules, hasattr(selfrag, 'load_compiled'))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["False", "True"]


def test_a_repeated_question_is_answered_from_the_cache(tmp_path):
    """Runtime.answer: the second ask costs 0 LM calls; a changed collection or setting misses."""
    from programs.settings import ProgramSettings
    from selfrag.kb.embedder import HashEmbedder
    from selfrag.settings import CacheSettings, KBSettings, Settings
    from selfrag.wiring import build_knowledge_base
    from tests.fakes import scripted_lm

    lm, engine = scripted_lm({
        "retrieve_decision": {"decision": "yes"},
        "grade_relevance": {"relevance": "relevant"},
        "check_answer": {"stated": "yes"},
        "generate_answer": {"answer": "About 80 km.", "citations": [1], "answerable": True},
        "judge_support": {"support": "fully"},
    })
    settings = Settings(kb=KBSettings(path=tmp_path / "kb"), program=ProgramSettings(max_rewrites=0),
                        cache=CacheSettings(answers=True))
    kb = build_knowledge_base(settings, embedder=HashEmbedder())
    kb.add_documents([("The Heron cargo bike has a range of about 80 km.", {"source": "heron.md"})])

    def runtime(s):
        from programs.selfrag import SelfRAG
        from selfrag.wiring import Runtime

        program = SelfRAG(kb.retriever(), config=s.program, generator_lm=lm, adapter=dspy.JSONAdapter())
        return Runtime(settings=s, kb=kb, program=program)

    import dspy

    rt = runtime(settings)
    first = rt.answer("What is the range of the Heron?")
    calls = len(engine.calls)
    again = rt.answer("what is the range of the heron")
    assert len(engine.calls) == calls and again.usage.lm_calls == 0 and again.answer == first.answer
    assert again.trace[-1].step == "answer_cache"
    kb.add_documents([("The Heron weighs 30 kg.", {"source": "weight.md"})])  # a new collection version
    rt.answer("What is the range of the Heron?")
    assert len(engine.calls) > calls
    calls = len(engine.calls)
    off = runtime(settings.model_copy(update={"cache": CacheSettings(answers=False)}))
    off.answer("What is the range of the Heron?")
    assert len(engine.calls) > calls
    calls = len(engine.calls)
    rt.answer("What is the range of the Heron?")
    assert len(engine.calls) == calls  # cached again
    import programs.thresholds

    moved = {"zh": programs.thresholds.CragThresholds(upper=7.0, lower=6.0)}
    with pytest.MonkeyPatch.context() as mp:  # an upgrade moving a built-in default: the cached answer is not served
        mp.setattr(programs.thresholds, "CRAG_DEFAULTS_BY_LANGUAGE", moved)
        rt.answer("What is the range of the Heron?")
    assert len(engine.calls) > calls
    calls = len(engine.calls)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("selfrag.__version__", "99.0")
        rt.answer("What is the range of the Heron?")
    assert len(engine.calls) > calls


def test_retrieval_index_in_the_settings_selects_the_index_retriever(settings):
    from selfrag.errors import InputError
    from selfrag.kb.indexes import ParentDocumentRetriever, build_index
    from selfrag.wiring import build_knowledge_base, build_runtime

    kb = build_knowledge_base(settings, collection="docs")
    kb.add_documents([("The Heron range is 80 km. It charges in 4 hours.", {"doc_id": "h"})])
    docs = settings.model_copy(update={"kb": settings.kb.model_copy(update={"collection": "docs"}),
                                       "retrieval": settings.retrieval.model_copy(update={"index": "raptor"})})
    with pytest.raises(InputError, match="selfrag ingest --index raptor"):
        build_runtime(docs)  # configured, not built: refused before anything is written
    build_index(kb, "multi-representation", representations=["sentences"], progress=False)
    multi = docs.model_copy(update={"retrieval": docs.retrieval.model_copy(update={"index": "multi-representation"})})
    runtime = build_runtime(multi)
    assert isinstance(runtime.program.retriever, ParentDocumentRetriever)
    assert runtime.program.retriever.retrieve("charges", k=1)[0].metadata["doc_id"] == "h"


def test_routed_collections_are_searched_through_the_index_and_the_rescoring_of_the_settings(settings):
    """route_collections with retrieval.index: every routed collection is searched over its index (parent
    chunks, not plain ones) with the similarity re-scoring the compiled thresholds are fitted on; a routed
    collection whose index was not built is refused like the main one."""
    from selfrag.errors import InputError
    from selfrag.kb.collection_info import set_description
    from selfrag.kb.indexes import build_index
    from selfrag.wiring import build_knowledge_base, build_runtime

    kbs = {name: build_knowledge_base(settings, collection=name) for name in ("docs", "recipes")}
    kbs["docs"].add_documents([("The Heron range is 80 km. It charges in 4 hours.", {"doc_id": "h"})])
    kbs["recipes"].add_documents([("Basil pasta needs basil. It cooks in 9 minutes.", {"doc_id": "r"})])
    for name, kb in kbs.items():
        set_description(kb.store, f"{name} collection")
    build_index(kbs["docs"], "multi-representation", representations=["sentences"], progress=False)
    program = settings.program.model_copy(update={"strategy": "iterative", "route_collections": True})
    routed = settings.model_copy(update={
        "kb": settings.kb.model_copy(update={"collection": "docs"}), "program": program,
        "retrieval": settings.retrieval.model_copy(update={"index": "multi-representation",
                                                           "similarity_embedder": "hash-16"})})
    with pytest.raises(InputError, match="no multi-representation index for collection 'recipes'"):
        build_runtime(routed)
    build_index(kbs["recipes"], "multi-representation", representations=["sentences"], progress=False)
    retriever = build_runtime(routed).program.retriever
    assert retriever.names == ["docs", "recipes"]
    for name, query in (("docs", "charges"), ("recipes", "cooks")):
        assert retriever.collections[name].retriever.embedder_name == "hash-16"  # the re-scoring scale
        got = retriever.retrieve(query, k=1, collections=[name])[0]
        assert got.metadata["matched"] == "sentences" and got.similarity is not None  # a parent of a child


def test_a_strategy_program_gets_the_metadata_schema_its_self_query_needs(settings):
    from selfrag.errors import ConfigError
    from selfrag.wiring import build_knowledge_base, build_runtime

    kb = build_knowledge_base(settings, collection="docs")
    kb.add_documents([("The Heron manual, 2023 edition.", {"doc_id": "h", "year": 2023})])
    program = settings.program.model_copy(update={"strategy": "iterative", "self_query": True})
    docs = settings.model_copy(update={"kb": settings.kb.model_copy(update={"collection": "docs"}), "program": program})
    assert "year" in build_runtime(docs).program.metadata_schema
    routed = docs.model_copy(update={"program": program.model_copy(update={"route_collections": True})})
    assert build_runtime(routed).program.retriever.names == ["docs"]
    empty = docs.model_copy(update={"kb": settings.kb.model_copy(update={"collection": "empty-one"})})
    with pytest.raises(ConfigError, match="program settings"):  # an empty collection has no fields to filter on
        build_runtime(empty)


def test_rerank_auto_judges_with_the_programs_own_relevance_judgement_when_the_lm_gives_logprobs(settings):
    from selfrag.errors import ConfigError
    from selfrag.wiring import build_runtime

    program = settings.program.model_copy(update={"strategy": "iterative", "rerank": "auto"})
    on = settings.model_copy(update={"program": program})
    assert on.lm.logprobs  # the default
    built = build_runtime(on).program
    assert built.retrieval.rerank_method == "judge" and built.retrieval.rerank_judge is not None
    given = build_runtime(on, retriever=ListRetriever([])).program  # the service gives its retriever
    assert given.retrieval.rerank_method == "judge"
    off = on.model_copy(update={"lm": on.lm.model_copy(update={"logprobs": False})})
    assert build_runtime(off).program.retrieval.rerank_method == "listwise"
    judge_off = off.model_copy(update={"program": program.model_copy(update={"rerank": "judge"})})
    with pytest.raises(ConfigError, match="lm.logprobs = true"):
        build_runtime(judge_off)


def test_strategy_settings_on_a_program_without_strategies_are_named_in_a_warning(settings, caplog):
    from selfrag.wiring import build_runtime

    program = settings.program.model_copy(update={"transforms": ["hyde"], "self_query": True})
    with caplog.at_level("WARNING", logger="selfrag.wiring"):
        build_runtime(settings.model_copy(update={"program": program}))
    assert "program.transforms, program.self_query: only the strategy programs" in caplog.text
    assert "'selfrag' ignores them" in caplog.text
