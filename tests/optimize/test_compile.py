"""optimize.compile (with its stages, judgements and optimizers): demos land in the artifact and survive the round
trip, the manifest says what was spent, bad requests are refused. A scripted LM plays the judges; one opt-in
integration test compiles a judgement with the real local model."""

import functools
import json
import subprocess
import sys
import textwrap

import dspy
import pytest
from dspy.lm15 import Message, Response, TextPart, Usage

from optimize.compile import compile_program
from optimize.errors import CompileError
from optimize.eval_examples import balanced
from optimize.judgements import parse_judgements, runtime_view, sample_split
from optimize.metrics import relevance_accuracy, support_accuracy
from optimize.optimizers import feedback_metric, make_optimizer
from optimize.splits import load_split
from optimize.stages import e2e_retriever
from programs.artifacts import load_state_into, read_artifact, signature_hash
from programs.selfrag import SelfRAG
from programs.settings import ProgramSettings
from selfrag import paths
from selfrag.settings import Settings
from tests.fakes import ROLES, ListRetriever, ScriptedEngine, _inputs, _output_fields, _system_text, passage

SPLITS = paths.splits_dir()
LOAD = functools.partial(load_split, splits_dir=SPLITS)


def judge_script(**extra):
    """Judges that are right on most of the labelled data, so bootstrapping finds demos."""
    script = {
        "retrieve_decision": lambda inp: {"decision": "no" if any(c.isdigit() for c in inp["question"]) else "yes"},
        "grade_relevance": lambda inp: {"relevance": "relevant" if _overlap(inp["question"], inp["passage"]) > 2
                                        else "irrelevant"},
        "judge_support": {"support": "fully"},
        "judge_usefulness": lambda inp: {"usefulness": 1 if "sure" in inp["answer"] or "depends" in inp["answer"]
                                         else 4},
    }
    script.update(extra)
    return script


def _overlap(a: str, b: str) -> int:
    return len({w for w in a.lower().split() if len(w) > 3} & set(b.lower().split()))


class AnyEngine(ScriptedEngine):
    """ScriptedEngine that also answers the optimizers' own prompts (e.g. GEPA's instruction proposal)."""

    def complete(self, request):
        fields = _output_fields(_system_text(request))
        if fields in ROLES:
            return super().complete(request)
        with self._lock:
            self.calls.append(("optimizer:" + ",".join(fields), {}))
        text = json.dumps({f: "Judge only against the passages; when in doubt say no." for f in fields})
        return Response(id=None, model="scripted", message=Message.assistant([TextPart(text)]), finish_reason="stop",
                        usage=Usage(input_tokens=self.prompt_tokens, output_tokens=self.completion_tokens,
                                    total_tokens=self.prompt_tokens + self.completion_tokens))


def fake_lms(script=None):
    engine = AnyEngine(script or judge_script())
    return (dspy.LM("scripted/test", engine=engine, cache=False), None, dspy.JSONAdapter()), engine


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """One BootstrapFewShot compile of relevance + support on small real splits, shared by several tests."""
    out = tmp_path_factory.mktemp("artifacts")
    lms, engine = fake_lms()
    with dspy.context(lm=None, adapter=None, callbacks=[]):
        result = compile_program(Settings(), splits_dir=SPLITS, optimizer="bootstrap", judgements="relevance,support", train=12, dev=6,
                                 budget=3, name="t", out_dir=out, lms=lms)
    return result, engine


# ---------------------------------------------------------------- compile → artifact → round trip


def test_demos_land_in_the_artifact(compiled):
    result, _ = compiled
    payload = read_artifact(result.artifact)
    assert payload["program"] == "SelfRAG"
    for name, fields in (("grade_relevance", {"question", "passage", "passage_topic", "relevance"}),
                         ("judge_support", {"question", "passages", "answer", "support"})):
        demos = payload["state"][name]["demos"]
        assert len(demos) == 3
        for demo in demos:  # only the signature's fields (and DSPy's augmented flag), no ids or groups
            assert fields <= set(demo) <= fields | {"augmented"}
    assert any(d.get("augmented") for d in payload["state"]["grade_relevance"]["demos"])  # bootstrapped, not only raw
    assert payload["state"]["generate_answer"]["demos"] == []  # not compiled in this run
    assert payload["state"]["decide_retrieval"]["demos"] == []


def test_artifact_loads_into_a_fresh_program(compiled):
    result, _ = compiled
    rag = load_state_into(SelfRAG(ListRetriever([])), result.artifact)
    assert [d["question"] for d in rag.grade_relevance.demos] == \
        [d["question"] for d in result.program.grade_relevance.demos]
    assert rag.judge_support.demos[0]["support"] in ("fully", "no")


def test_artifact_round_trip_in_a_fresh_subprocess(compiled):
    result, _ = compiled
    code = textwrap.dedent(f"""
        import os; os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
        from programs.artifacts import load_state_into
        from programs.selfrag import SelfRAG
        from tests.fakes import ListRetriever
        rag = load_state_into(SelfRAG(ListRetriever([])), {str(result.artifact)!r})
        print(len(rag.grade_relevance.demos), len(rag.judge_support.demos), rag.grade_relevance.demos[0]["relevance"])
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out[:2] == ["3", "3"] and out[2] in ("relevant", "irrelevant")


def test_compiled_demos_are_sent_to_the_model(compiled):
    result, _ = compiled
    lms, engine = fake_lms()
    rag = load_state_into(SelfRAG(ListRetriever([passage("p1", "Heron range is 80 km.")]), generator_lm=lms[0],
                                  adapter=lms[2]), result.artifact)
    demo_question = rag.grade_relevance.demos[0]["question"]
    seen = []
    original = engine.complete
    engine.complete = lambda request: (seen.append(request), original(request))[1]
    with dspy.context(lm=lms[0], adapter=lms[2]):
        rag.grade_relevance(question="Heron range?", passage="[1] «Heron range is 80 km.»")
    assert demo_question in "\n".join(m.text or "" for m in seen[0].messages)


# ---------------------------------------------------------------- manifest


def test_manifest_fields(compiled):
    result, engine = compiled
    m = result.manifest
    splits = json.loads((SPLITS / "manifest.json").read_text())
    assert m["dspy_version"] == dspy.__version__
    assert m["program"] == "SelfRAG" and m["program_version"] and m["signature_hash"] == signature_hash(result.program)
    assert m["lm"]["generator"] == "scripted/test" and m["lm"]["critic"] == "scripted/test"
    assert m["dataset_hash"] == splits["dataset_hash"]
    assert m["optimizer"]["name"] == "bootstrap" and m["optimizer"]["budget"] == 3
    assert m["optimizer"]["params"]["max_bootstrapped_demos"] == 3
    assert set(m["scores"]) == {"relevance", "support"}
    for s in m["scores"].values():
        assert 0 <= s["before"] <= 1 and 0 <= s["after"] <= 1 and s["dev"] == 6
    # every LM call is counted, with the tokens the engine reported
    assert m["cost"]["lm_calls"] == len(engine.calls) > 0
    assert m["cost"]["prompt_tokens"] == 10 * len(engine.calls)
    assert m["cost"]["completion_tokens"] == 5 * len(engine.calls)
    assert m["cost"]["seconds"] >= 0
    assert sum(s["cost"]["lm_calls"] for s in m["stages"]) == m["cost"]["lm_calls"]
    support = next(s for s in m["stages"] if s["name"] == "support")
    assert sum(support["confusion_after"].values()) == 6  # gold->predicted pairs on dev
    assert set(support["confusion_after"]) <= {"fully->fully", "no->fully"}  # the fake always says "fully"
    # the human-readable manifest is the artifact's manifest
    in_artifact = read_artifact(result.artifact)["manifest"]
    assert json.loads(result.manifest_path.read_text()) == json.loads(json.dumps(in_artifact))


def test_dev_scores_are_measured_before_and_after(tmp_path):
    """A judge that answers 'relevant' only when it sees demos in its prompt: the score goes up."""
    lms, engine = fake_lms()

    def complete(request):
        has_demos = len(request.messages) > 1
        fields = _output_fields(_system_text(request))
        engine.calls.append((ROLES.get(fields, "?"), {}))
        inp = _inputs(request.messages[-1].text)
        relevant = has_demos and _overlap(inp["question"], inp["passage"]) > 2
        text = json.dumps({"passage_topic": "t", "relevance": "relevant" if relevant else "irrelevant"})
        return Response(id=None, model="scripted", message=Message.assistant([TextPart(text)]), finish_reason="stop",
                        usage=Usage(input_tokens=10, output_tokens=5, total_tokens=15))

    engine.complete = complete
    result = compile_program(Settings(), splits_dir=SPLITS, optimizer="bootstrap", judgements="relevance", train=10, dev=10, budget=2,
                             name="t", out_dir=tmp_path, lms=lms)
    score = result.manifest["scores"]["relevance"]
    dev = sample_split("relevance", "dev", 10, LOAD)
    assert score["before"] == sum(ex.relevance == "irrelevant" for ex in dev) / 10  # no demos: always "irrelevant"
    assert score["after"] > score["before"]


def test_a_compile_that_lowers_dev_accuracy_is_rolled_back(tmp_path):
    """A judge that is right without demos and wrong with them: the artifact keeps the uncompiled judge."""
    lms, engine = fake_lms()
    dev = sample_split("relevance", "dev", 10, LOAD)
    gold = {ex.question + ex.passage[:40]: ex.relevance for ex in sample_split("relevance", "train", 10, LOAD) + dev}

    def complete(request):
        inp = _inputs(request.messages[-1].text)
        label = gold.get(inp["question"] + inp["passage"][:40], "relevant")
        if len(request.messages) > 1:  # demos in the prompt: flip the verdict
            label = "irrelevant" if label == "relevant" else "relevant"
        text = json.dumps({"passage_topic": "t", "relevance": label})
        return Response(id=None, model="scripted", message=Message.assistant([TextPart(text)]), finish_reason="stop",
                        usage=Usage(input_tokens=10, output_tokens=5, total_tokens=15))

    engine.complete = complete
    result = compile_program(Settings(), splits_dir=SPLITS, optimizer="bootstrap", judgements="relevance", train=10, dev=10, budget=2,
                             name="t", out_dir=tmp_path, lms=lms)
    stage = next(s for s in result.manifest["stages"] if s["name"] == "relevance")
    assert stage["after"] < stage["before"] and stage["kept"] == "uncompiled"
    assert read_artifact(result.artifact)["state"]["grade_relevance"]["demos"] == []


def test_with_from_before_scores_the_start_state_and_a_rollback_keeps_it(tmp_path):
    """--from A: "before" scores A's judge (what a rollback restores), not a reset copy; a compile worse
    than A is rolled back to A's demos, named "start", and what ships is what was scored."""
    dev = sample_split("relevance", "dev", 10, LOAD)
    train = sample_split("relevance", "train", 10, LOAD)
    gold = {ex.question + ex.passage[:40]: ex.relevance for ex in train + dev}

    def judge(right):  # right(number of prompt messages) → the gold label, else the other one
        def complete(request):
            inp = _inputs(request.messages[-1].text)
            label = gold.get(inp["question"] + inp["passage"][:40], "relevant")
            if not right(len(request.messages)):
                label = "irrelevant" if label == "relevant" else "relevant"
            text = json.dumps({"passage_topic": "t", "relevance": label})
            usage = Usage(input_tokens=10, output_tokens=5, total_tokens=15)
            return Response(id=None, model="scripted", message=Message.assistant([TextPart(text)]),
                            finish_reason="stop", usage=usage)
        return complete

    lms, engine = fake_lms()
    engine.complete = judge(lambda n: True)
    a = compile_program(Settings(), splits_dir=SPLITS, optimizer="bootstrap", judgements="relevance",
                        train=10, dev=10, budget=1, name="a", out_dir=tmp_path, lms=lms)
    a_demos = read_artifact(a.artifact)["state"]["grade_relevance"]["demos"]
    assert len(a_demos) == 1
    lms, engine = fake_lms()
    engine.complete = judge(lambda n: n == 3)  # right with exactly one demo (A's), wrong with none or two
    b = compile_program(Settings(), splits_dir=SPLITS, optimizer="bootstrap", judgements="relevance",
                        train=10, dev=10, budget=2, name="b", out_dir=tmp_path, lms=lms, start_from=a.artifact)
    stage = next(s for s in b.manifest["stages"] if s["name"] == "relevance")
    assert stage["before"] == 1.0 and stage["after"] < 1.0 and stage["kept"] == "start"
    assert read_artifact(b.artifact)["state"]["grade_relevance"]["demos"] == a_demos


# ---------------------------------------------------------------- other optimizers, end to end, helpers


@pytest.mark.parametrize("optimizer, budget", [("random-search", 2), ("mipro", 4), ("gepa", 12)])
def test_other_optimizers_compile_with_a_fake_lm(tmp_path, optimizer, budget):
    lms, engine = fake_lms()
    result = compile_program(Settings(), splits_dir=SPLITS, optimizer=optimizer, judgements="support", train=8, dev=4,
                             budget=budget, name=optimizer, out_dir=tmp_path, lms=lms)
    assert result.manifest["optimizer"]["name"] == optimizer
    assert result.manifest["scores"]["support"]["after"] is not None
    assert result.manifest["cost"]["lm_calls"] == len(engine.calls)
    load_state_into(SelfRAG(ListRetriever([])), result.artifact)


def test_end_to_end_stage_keeps_judgement_demos_and_adds_generator_demos(tmp_path):
    def loader(task, split):
        if task != "qa_en":
            return load_split(task, split, SPLITS)
        return [dspy.Example(question=f"What is the range of the Heron model {i}?", answer="80 km", answers=["80 km"],
                             answerable=True, gold_doc_ids=["heron"], id=f"q{i}").with_inputs("question")
                for i in range(4)]

    script = judge_script(
        retrieve_decision={"decision": "yes"},
        grade_relevance={"relevance": "relevant"},
        generate_answer={"answer": "80 km", "citations": [1], "answerable": True},
    )
    lms, _ = fake_lms(script)
    retriever = ListRetriever([passage("heron", "The Heron range is 80 km on the Eco setting model.")])
    result = compile_program(Settings(), splits_dir=SPLITS, optimizer="bootstrap", judgements="relevance", train=8, dev=4, budget=2,
                             e2e=True, e2e_train=3, e2e_dev=2, name="e2e", out_dir=tmp_path, lms=lms,
                             retriever=retriever, loader=loader)
    stages = {s.name: s for s in result.stages}
    assert stages["e2e"].before == 1.0 and stages["e2e"].after == 1.0
    rag = load_state_into(SelfRAG(ListRetriever([])), result.artifact)
    assert len(rag.generate_answer.demos) == 2 and rag.generate_answer.demos[0]["answer"] == "80 km"
    relevance_demos = [d["question"] for d in rag.grade_relevance.demos]
    assert len(relevance_demos) == 2
    assert not any("Heron model" in q for q in relevance_demos)  # the judgement's own compile is kept


def test_e2e_knowledge_base_is_built_once(tmp_path, monkeypatch):
    from selfrag import wiring
    from selfrag.settings import resolve

    calls = []

    def corpus(name, datasets_dir):
        calls.append(name)
        return [("The Heron cargo bike has a range of 80 km.", {"doc_id": "clapnq:1", "title": "Heron"}),
                ("Paris is the capital of France.", {"doc_id": "xquad:1", "title": "Paris"})]

    monkeypatch.setattr("optimize.sources.corpus_documents", corpus)
    settings = resolve({"kb": {"path": str(tmp_path / "kb"), "embedding_model": "hash"}})

    def knowledge_base(collection):
        return wiring.build_knowledge_base(settings, collection=collection)

    hits = e2e_retriever(knowledge_base, tmp_path).retrieve("Heron range", k=1)
    assert hits and hits[0].metadata["doc_id"] == "clapnq:1"
    e2e_retriever(knowledge_base, tmp_path)
    assert calls == ["clapnq"]


def test_parse_judgements():
    assert parse_judgements("all") == ["retrieve", "relevance", "support", "usefulness"]
    assert parse_judgements("support, relevance") == ["support", "relevance"]
    with pytest.raises(CompileError, match="unknown judgement"):
        parse_judgements("honesty")


def test_budget_maps_to_each_optimizers_knob():
    lm = dspy.LM("scripted/test", engine=AnyEngine({}), cache=False)
    opt, params, _ = make_optimizer("bootstrap", relevance_accuracy, budget=6, num_threads=1)
    assert opt.max_bootstrapped_demos == 6 and opt.max_labeled_demos == 6
    opt, params, _ = make_optimizer("bootstrap", relevance_accuracy, budget=6, num_threads=1, labeled=False)
    assert opt.max_labeled_demos == 0
    opt, params, _ = make_optimizer("random-search", relevance_accuracy, budget=5, num_threads=1)
    assert opt.num_candidate_sets == 5
    opt, params, _ = make_optimizer("gepa", relevance_accuracy, budget=30, num_threads=1, reflection_lm=lm)
    assert params["max_metric_calls"] == 30
    with pytest.raises(CompileError, match="reflection"):
        make_optimizer("gepa", relevance_accuracy, budget=30, num_threads=1)
    with pytest.raises(CompileError, match="unknown optimizer"):
        make_optimizer("sgd", relevance_accuracy, budget=1, num_threads=1)


def test_mipro_takes_its_budget_as_trials():
    lm = dspy.LM("scripted/test", engine=AnyEngine({}), cache=False)  # optuna is pinned: mipro is available
    with dspy.context(lm=lm):
        opt, params, kwargs = make_optimizer("mipro", relevance_accuracy, budget=6, num_threads=1)
    assert kwargs["num_trials"] == 6 and params["num_candidates"] == 3 and params["auto"] is None


def test_mipro_without_optuna_is_a_clear_error(monkeypatch):
    monkeypatch.setattr("optimize.optimizers.has_optuna", lambda: False)
    with pytest.raises(CompileError, match="optuna"):
        make_optimizer("mipro", relevance_accuracy, budget=6, num_threads=1)


def test_feedback_metric_for_gepa():
    fb = feedback_metric(support_accuracy, "support")
    gold = dspy.Example(support="no")
    right = fb(gold, dspy.Prediction(support="no"), None, "judge_support", None)
    wrong = fb(gold, dspy.Prediction(support="fully"), None, "judge_support", None)
    assert right.score == 1.0 and wrong.score == 0.0
    assert "should be 'no'" in wrong.feedback


def test_examples_are_shown_as_the_program_shows_passages():
    example = dspy.Example(question="q", passage="Ann «did» it", title="Ann").with_inputs("question", "passage")
    rel = runtime_view(example, "relevance")
    assert rel.passage == "[1] (Ann) «Ann ‹did› it»" and set(rel.inputs().keys()) == {"question", "passage"}
    sup = runtime_view(dspy.Example(question="q", passages="[1] One.\n[2] Two.", answer="a")
                       .with_inputs("question", "passages", "answer"), "support")
    assert sup.passages == "[1] «One.»\n[2] «Two.»"
    # a long passage is shown as the window around the question's terms, as at run time
    window = ProgramSettings().passage_chars
    long = (" ".join(["filler words here."] * (window // 9)) + " The Zephyr bridge opened in 1931. "
            + " ".join(["more."] * (window // 5)))
    shown = runtime_view(dspy.Example(question="When did the Zephyr bridge open?", passages=f"[1] {long}", answer="1931")
                         .with_inputs("question", "passages", "answer"), "support").passages
    assert len(long) > 2 * window and "opened in 1931" in shown and len(shown) <= window + 20
    train = sample_split("relevance", "train", 5, LOAD)
    assert len(train) == 5 and all(ex.passage.startswith("[1]") for ex in train)
    assert [ex.id for ex in train] == [ex.id for ex in sample_split("relevance", "train", 5, LOAD)]  # seeded


def test_bad_requests_are_refused_before_any_lm_call(tmp_path):
    lms, engine = fake_lms()
    for kwargs, match in (({"optimizer": "sgd"}, "unknown optimizer"), ({"judgements": "nope"}, "unknown judgement"),
                          ({"train": 0}, "train"), ({"budget": 0}, "budget"), ({"name": "../x"}, "invalid artifact"),
                          ({"judgements": "none"}, "nothing to compile")):
        with pytest.raises(CompileError, match=match):
            compile_program(Settings(), splits_dir=SPLITS, out_dir=tmp_path, lms=lms, **kwargs)
    assert engine.calls == []


# ---------------------------------------------------------------- real local model (opt-in)


@pytest.mark.integration
def test_compile_one_judgement_with_the_local_model(tmp_path):
    pytest.importorskip("llama_cpp")
    from selfrag import wiring
    from selfrag.lm.model_files import ModelFileError
    from selfrag.settings import resolve

    settings = resolve({"lm": {"profile": "local", "threads": 1, "n_ctx": 4096, "max_tokens": 64}})
    try:
        result = compile_program(settings, lms=wiring.build_lms(settings), splits_dir=SPLITS, optimizer="bootstrap",
                                 judgements="support", train=10, dev=4, budget=2, name="local", out_dir=tmp_path)
    except ModelFileError as exc:
        pytest.skip(str(exc))
    m = result.manifest
    assert m["lm"]["generator"].startswith("llamacpp/")
    assert m["cost"]["lm_calls"] > 0 and m["cost"]["prompt_tokens"] > 0
    assert m["scores"]["support"]["before"] is not None and m["scores"]["support"]["after"] is not None
    rag = load_state_into(SelfRAG(ListRetriever([])), result.artifact)
    assert len(rag.judge_support.demos) == 2


def test_calibrate_only_starts_from_an_artifact_and_saves_thresholds(tmp_path):
    """--judgement none --calibrate --from A: A's demos are kept, thresholds are fitted and saved."""
    script = judge_script(generate_answer={"answer": "80 km", "citations": [1], "answerable": True})
    lms, _ = fake_lms(script)
    start = compile_program(Settings(), splits_dir=SPLITS, optimizer="bootstrap", judgements="support", train=6,
                            dev=0, budget=1, name="start", out_dir=tmp_path, lms=lms)
    start_demos = len(load_state_into(SelfRAG(ListRetriever([])), start.artifact).judge_support.demos)
    lms, _ = fake_lms(script)
    retriever = ListRetriever([passage("heron", "The Heron range is 80 km on the Eco setting model.")])
    result = compile_program(Settings(), splits_dir=SPLITS, judgements="none", name="cal", out_dir=tmp_path, lms=lms,
                             retriever=retriever, start_from=start.artifact,
                             calibrate_sizes={"retrieve": 12, "relevance": 4, "stated": 0, "answer": 4},
                             answer_objective="accuracy")
    payload = read_artifact(result.artifact)
    assert set(payload["thresholds"]) == {"retrieve", "relevance", "stated", "answer", "verified", "similarity",
                                          "similarity_embedder", "stated_similarity_weight", "check_prior",
                                          "by_embedder"}
    assert payload["manifest"]["calibration"]["stages"].keys() == {"retrieve", "relevance", "answer"}
    # the plots are named relative to the artifact's folder, the same on any machine
    plots = [v for stage in payload["manifest"]["calibration"]["stages"].values() for k, v in stage.items()
             if k.endswith("_png")]
    assert plots and all(p.startswith("cal.calibration/") and (tmp_path / p).is_file() for p in plots)
    assert payload["manifest"]["started_from"] == str(start.artifact)
    # a calibrate-only compile's cost is its calibration's LM calls
    assert payload["manifest"]["cost"]["lm_calls"] == payload["manifest"]["calibration"]["cost"]["lm_calls"] > 0
    rag = load_state_into(SelfRAG(ListRetriever([])), result.artifact)
    assert len(rag.judge_support.demos) == start_demos and rag.compiled_thresholds is not None

    # calibrating one stage again from that artifact keeps the other stages' reports and thresholds
    lms, _ = fake_lms(script)
    again = compile_program(Settings(), splits_dir=SPLITS, judgements="none", name="again", out_dir=tmp_path,
                            lms=lms, retriever=retriever, start_from=result.artifact,
                            calibrate_sizes={"retrieve": 0, "relevance": 4, "stated": 0, "answer": 0})
    calibration = read_artifact(again.artifact)["manifest"]["calibration"]
    assert calibration["stages"].keys() == {"retrieve", "relevance", "answer"}
    assert calibration["stages"]["answer"] == payload["manifest"]["calibration"]["stages"]["answer"]
    assert calibration["thresholds"]["answer"] == payload["thresholds"]["answer"]
    # re-run on dev, the calibration says it joins a train fit and a dev one; each stage says which
    lms, _ = fake_lms(script)
    dev = compile_program(Settings(), splits_dir=SPLITS, judgements="none", name="dev", out_dir=tmp_path,
                          lms=lms, retriever=retriever, start_from=result.artifact, calibrate_split="dev",
                          calibrate_sizes={"retrieve": 0, "relevance": 4, "stated": 0, "answer": 0})
    calibration = read_artifact(dev.artifact)["manifest"]["calibration"]
    assert calibration["split"] == "train+dev"
    assert {k: v["split"] for k, v in calibration["stages"].items()} == {"retrieve": "train", "relevance": "dev",
                                                                         "answer": "train"}


def test_cal_skip_starts_the_qa_stages_after_the_questions_an_earlier_calibration_asked(tmp_path):
    """--cal-skip N: the stated / answer stages take the balanced qa_en questions after the first N (rows to
    pool with an earlier calibration's), and the manifest says so; past the split's end is a CompileError."""
    script = judge_script(generate_answer={"answer": "80 km", "citations": [1], "answerable": True})
    lms, engine = fake_lms(script)
    retriever = ListRetriever([passage("heron", "The Heron range is 80 km on the Eco setting model.")])
    result = compile_program(Settings(), splits_dir=SPLITS, judgements="none", name="skip", out_dir=tmp_path,
                             lms=lms, retriever=retriever, calibrate_skip=3, answer_objective="accuracy",
                             calibrate_sizes={"retrieve": 0, "relevance": 0, "stated": 0, "answer": 4})
    asked = {inputs["question"] for _, inputs in engine.calls if "question" in inputs}
    qa = [ex.question for ex in balanced(list(LOAD("qa_en", "train")), 7)]
    assert asked == set(qa[3:]) and not asked & set(qa[:3])
    assert read_artifact(result.artifact)["manifest"]["calibration"]["qa_skipped"] == 3

    lms, engine = fake_lms(script)
    with pytest.raises(CompileError, match="--cal-skip 100000: the train split has no qa_en question after those"):
        compile_program(Settings(), splits_dir=SPLITS, judgements="none", name="past", out_dir=tmp_path, lms=lms,
                        retriever=retriever, calibrate_skip=100000,
                        calibrate_sizes={"retrieve": 0, "relevance": 0, "stated": 0, "answer": 4})
    assert engine.calls == []


def test_nothing_to_compile_mentions_calibrate(tmp_path):
    lms, _ = fake_lms()
    with pytest.raises(CompileError, match="--calibrate"):
        compile_program(Settings(), splits_dir=SPLITS, judgements="none", out_dir=tmp_path, lms=lms)


def test_stages_kept_from_an_older_manifest_take_its_split_or_unknown_for_pooled_rows():
    """A manifest older than per-stage splits: its calibration's split is the run's --cal-split, true of the
    stages it ran, not of rows it pooled (``rows_recorded``)."""
    from optimize.calibrate import joined_split
    from optimize.compile import kept_stages

    started = {"split": "dev", "stages": {"retrieve": {"threshold": 0.4}, "stated": {"rows_recorded": 10},
                                          "answer": {"threshold": 0.5}}}
    kept = kept_stages(started, {"answer": {"split": "train"}})
    assert kept == {"retrieve": {"threshold": 0.4, "split": "dev"},
                    "stated": {"rows_recorded": 10, "split": "unknown"}}
    assert joined_split({**kept, "answer": {"split": "train"}}, "train") == "dev+unknown+train"
    assert kept_stages(None, {}) == {}


def test_stated_rows_are_named_per_stage_so_a_stage_kept_from_the_start_keeps_its_own_sources():
    """Pooling English rows into an artifact whose Chinese stage was fitted on other rows: the English stage
    names this run's manifests, the Chinese one what the start named for it — not the English manifests."""
    from optimize.compile import stated_sources

    stages = {"stated@e5@en": {"rows_recorded": 16, "rows_from": [{"path": "en-train.json"}]},
              "similarity@e5@en": {"threshold": 0.8},
              "stated@e5@zh": {"rows_recorded": 12}, "answer": {"threshold": 0.4}}
    fitted = {"stated@e5@en", "similarity@e5@en"}
    per_stage = {"stated@e5@zh": ["zh-train.json"], "stated@e5@en": ["old-en.json"]}
    assert stated_sources(stages, fitted, ["en-train.json", "en-dev.json"], per_stage) == {
        "stated@e5@en": ["en-train.json", "en-dev.json"], "stated@e5@zh": ["zh-train.json"]}
    # an older start kept one list for its run: it goes with the stages that start fitted on recorded rows
    assert stated_sources(stages, fitted, ["en-train.json"], ["zh-train.json"]) == {
        "stated@e5@en": ["en-train.json"], "stated@e5@zh": ["zh-train.json"]}
    # a run that recorded its own rows names no manifest for them; the start's names stay
    assert stated_sources({"stated@e5@en": {"rows": []}, "stated@e5@zh": {"rows_recorded": 12}}, {"stated@e5@en"},
                          [], per_stage) == {"stated@e5@zh": ["zh-train.json"]}
    assert stated_sources(stages, fitted, [], None) == {}


def test_the_start_state_is_named_start_when_it_has_demos_or_rewritten_instructions():
    from optimize.stages import start_name
    from signatures import GradeRelevance

    declared = GradeRelevance.instructions
    assert start_name({"demos": [], "signature": {"instructions": declared}}, declared) == "uncompiled"
    assert start_name({"demos": [{"question": "q"}], "signature": {"instructions": declared}}, declared) == "start"
    assert start_name({"demos": [], "signature": {"instructions": "Judge it, tersely."}}, declared) == "start"
    assert start_name({"demos": []}) == "uncompiled"
