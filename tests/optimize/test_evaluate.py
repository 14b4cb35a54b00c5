"""The evaluation harness on a five-example set with a scripted LM: metric arithmetic (hand-computed),
resume after a crash, error accounting, report files, the knowledge base built once."""

import json

import dspy
import pytest

from optimize import eval_examples, eval_reports, eval_runs, eval_summary
from optimize.evaluate import build_program, evaluate
from programs.baselines import GradedRAG, NoRetrieval, VanillaRAG
from programs.filter_grammar import FieldSpec
from programs.registry import parse_program, parse_programs
from programs.settings import ProgramSettings
from selfrag import paths
from selfrag.settings import resolve
from tests import fakes
from tests.fakes import passage, scripted_lm

D1 = passage("c1", "The Zephyr bridge opened in 1931.", doc_id="d1")
D2 = passage("c2", "Acme was founded by Jane Roe.", doc_id="d2")
D3 = passage("c3", "Oda trout are silver blue.", doc_id="d3")
DX = passage("cx", "Glass recycling in Norwich is collected on Tuesday.", doc_id="dx")


def ex(i, question, answers, gold, answerable=True):
    return dspy.Example(id=f"q{i}", question=question, answer=answers[0] if answers else "", answers=answers,
                        answerable=answerable, gold_doc_ids=gold, related_doc_ids=gold).with_inputs("question")


EXAMPLES = [
    ex(1, "When did the Zephyr bridge open?", ["1931"], ["d1"]),
    ex(2, "Who founded Acme?", ["Jane Roe"], ["d2"]),
    ex(3, "What colour is the Oda trout?", ["silver blue"], ["d3"]),
    ex(4, "Who won the Zephyr race?", [], [], answerable=False),
    ex(5, "What is the Norwich tax?", [], [], answerable=False),
]
RANKING = {
    EXAMPLES[0].question: [D1, DX], EXAMPLES[1].question: [DX, D2], EXAMPLES[2].question: [D3, DX],
    EXAMPLES[3].question: [D1, DX], EXAMPLES[4].question: [DX, D3],
}


class FixedRetriever:
    """Returns a fixed ranking per question (whatever k is)."""

    def retrieve(self, query, k=5, filters=None):
        return list(RANKING[query])


def draft(inp):
    q = inp["question"]
    if "Zephyr bridge" in q:
        return {"answer": "1931", "citations": [1], "answerable": True}
    if "Acme" in q:
        return {"answer": "Jane Roe and John", "citations": [1], "answerable": True}
    if "Zephyr race" in q:
        return {"answer": "In 1931", "citations": [1], "answerable": True}
    return {"answer": "The passages do not say.", "citations": [], "answerable": False}


SCRIPT = {
    "retrieve_decision": {"decision": "yes"},
    "grade_relevance": lambda inp: {"relevance": "relevant" if ("1931" in inp["passage"] or "Glass" in inp["passage"])
                                    else "irrelevant"},
    "generate_answer": draft,
    "judge_support": lambda inp: {"support": "no" if "Jane" in inp["answer"] else "fully"},
    "judge_usefulness": {"usefulness": 5},
    "answer_directly": {"answer": "Jane Roe"},
}


def programs(names=("vanilla-rag", "no-retrieval", "graded-rag"), script=SCRIPT):
    lm, engine = scripted_lm(script)
    built = {n: build_program(parse_program(n), FixedRetriever(), config=ProgramSettings(k=2), generator_lm=lm,
                              adapter=dspy.JSONAdapter()) for n in names}
    return built, engine


# ---------------------------------------------------------------- metric arithmetic


def test_fresh_start_is_called_before_each_pair_run_and_not_for_pairs_already_done(tmp_path):
    """``selfrag eval`` makes the local model forget its prompts before each (program, question): each pair's
    answer then depends on its own prompts only, not on the program that ran before it or a resume."""
    built, engine = programs(("vanilla-rag", "no-retrieval"))
    events = []

    def fresh_start():
        events.append(("fresh", len(engine.calls)))

    rows = eval_runs.run_eval(built, EXAMPLES[:3], tmp_path, fresh_start=fresh_start,
                              on_row=lambda row: events.append(("row", row["program"], row["id"])))
    assert len(rows) == 6
    assert [e[0] for e in events] == ["fresh", "row"] * 6  # before every pair, none after the last
    assert [e[1] for e in events if e[0] == "fresh"][1] > 0  # the second pair starts after the first's calls
    events.clear()
    more = {**built, "graded-rag": programs(("graded-rag",))[0]["graded-rag"]}
    eval_runs.run_eval(more, EXAMPLES[:3], tmp_path, fresh_start=fresh_start,
                       on_row=lambda row: events.append(("row", row["program"], row["id"])))
    assert [e[0] for e in events] == ["fresh", "row"] * 3  # the resume runs (and refreshes for) the new pairs only



def test_metrics_are_the_hand_computed_values(tmp_path):
    built, _ = programs()
    rows = eval_runs.run_eval(built, EXAMPLES, tmp_path)
    s = eval_summary.summarize(rows)["programs"]

    v = s["vanilla-rag"]
    # answers: q1 "1931" (exact, cites d1), q2 "Jane Roe and John" (P 2/4, R 2/2: F1 2/3, cites dx), q3 abstains,
    # q4 answers (wrong: unanswerable), q5 abstains (right)
    assert (v["questions"], v["answerable"], v["unanswerable"], v["errors"]) == (5, 3, 2, 0)
    assert v["retrieve_accuracy"] == 1.0
    assert v["em"] == pytest.approx(1 / 3)
    assert v["f1"] == pytest.approx((1 + 2 / 3 + 0) / 3)
    assert v["e2e"] == pytest.approx((1 + 2 / 3 + 0 + 0 + 1) / 5)
    assert v["abstain_unanswerable"] == pytest.approx(0.5)
    assert v["abstain_answerable"] == pytest.approx(1 / 3)
    assert v["abstention_accuracy"] == pytest.approx(3 / 5)
    assert v["citation_hit"] == pytest.approx(1 / 3)
    assert v["relevance_precision"] is None and v["relevance_recall"] is None  # no grader
    assert v["groundedness"] is None  # no support judge
    assert v["lm_calls"] == {"mean": 1.0, "p50": 1.0, "p95": 1.0}
    assert v["prompt_tokens"]["mean"] == 10 and v["completion_tokens"]["mean"] == 5

    n = s["no-retrieval"]
    assert n["retrieve_accuracy"] == 0.0
    assert n["em"] == pytest.approx(1 / 3)  # "Jane Roe" is right for q2 only
    assert n["abstain_unanswerable"] == 0.0 and n["abstention_accuracy"] == pytest.approx(3 / 5)
    assert n["e2e"] == pytest.approx(1 / 5)

    g = s["graded-rag"]
    # grades (relevant = contains 1931 or Glass): q1 d1 tp, dx fp | q2 dx fp, d2 fn | q3 d3 fn, dx fp |
    # q4 d1 fp, dx fp | q5 dx fp, d3 tn
    assert g["relevance_counts"] == {"tp": 1, "fp": 6, "fn": 2, "tn": 1}
    assert g["relevance_precision"] == pytest.approx(1 / 7)
    assert g["relevance_recall"] == pytest.approx(1 / 3)
    # q1 fully, q2 flagged "no" (no web), q3 and q5 abstain, q4 fully → 2 of 3 answers grounded
    assert g["groundedness"] == pytest.approx(2 / 3)
    assert g["abstain_unanswerable"] == 0.5
    # calls: q1 2+1+1, q2 2+1+1, q3 2+1, q4 2+1+1, q5 2+1 → [4, 4, 3, 4, 3]
    assert g["lm_calls"]["mean"] == pytest.approx(3.6)
    assert g["lm_calls"]["p50"] == 4 and g["lm_calls"]["p95"] == 4
    assert g["prompt_tokens"]["mean"] == pytest.approx(36)


def test_citation_hit_leaves_out_answerable_questions_without_gold_documents(tmp_path, monkeypatch):
    """An answerable question without gold documents scored 1 when nothing was cited: a program abstaining
    on it won. It is left out of the mean, and the summary says over how many the mean is."""
    nogold = [ex(6, "Who designed the Zephyr bridge?", ["Ada Cole"], []), ex(7, "Who runs Acme?", ["Jane"], [])]
    for e in nogold:
        monkeypatch.setitem(RANKING, e.question, [DX, D3])
    built, _ = programs(("vanilla-rag",))
    rows = eval_runs.run_eval(built, EXAMPLES + nogold, tmp_path)
    assert [r["scores"]["citation_hit"] for r in rows if r["id"] in ("q6", "q7")] == [None, None]
    v = eval_summary.summarize(rows)["programs"]["vanilla-rag"]
    assert v["answerable"] == 5 and v["citation_questions"] == 3 and v["citation_hit"] == pytest.approx(1 / 3)
    # a row of an older results file: scored 1.0, no gold documents — left out too
    old = [{**r, "scores": {**r["scores"], "citation_hit": 1.0}} if r["id"] in ("q6", "q7") else r for r in rows]
    assert eval_summary.summarize(old)["programs"]["vanilla-rag"]["citation_hit"] == pytest.approx(1 / 3)
    table = eval_reports.render_markdown(eval_summary.summarize(rows))
    assert "| cite hit | cite n |" in table and "| 0.33 | 3 |" in table


def test_percentile_interpolates_like_numpy():
    assert eval_summary.percentile([1, 2, 3, 4], 50) == 2.5
    assert eval_summary.percentile([3, 3, 4, 4, 4], 95) == 4
    assert eval_summary.percentile([0, 10], 95) == pytest.approx(9.5)
    assert eval_summary.percentile([], 50) is None


def test_relevance_counts_read_passage_ids_and_skip_failed_or_unmarked_steps():
    trace = [
        {"step": "grade_relevance", "inputs": {"passage_id": "d1#3"}, "output": "relevant", "ok": True},
        {"step": "grade_relevance", "inputs": {"passage_id": "d2"}, "output": "relevant", "ok": True},
        {"step": "grade_relevance", "inputs": {"passage_id": "d1"}, "output": "irrelevant", "ok": True},
        {"step": "grade_relevance", "inputs": {"passage_id": "d1"}, "output": None, "ok": False},
        {"step": "grade_relevance", "inputs": {}, "output": "relevant", "ok": True},
        {"step": "judge_support", "inputs": {"passage_id": "d1"}, "output": "fully", "ok": True},
    ]
    assert eval_runs.relevance_counts(trace, ["d1"]) == {"tp": 1, "fp": 1, "fn": 1, "tn": 0}


# ---------------------------------------------------------------- resume


def keys(path):
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return [(r["program"], r["id"]) for r in rows]


def test_a_crashed_run_resumes_without_redoing_finished_questions(tmp_path):
    names = ("vanilla-rag", "no-retrieval")
    built, engine = programs(names)
    written = []

    def crash_after_three(row):
        written.append(row)
        if len(written) == 3:
            raise eval_runs.Interrupted("killed")

    with pytest.raises(eval_runs.Interrupted):
        eval_runs.run_eval(built, EXAMPLES, tmp_path, on_row=crash_after_three)
    path = tmp_path / eval_runs.RESULTS
    assert keys(path) == [("vanilla-rag", "q1"), ("no-retrieval", "q1"), ("vanilla-rag", "q2")]
    assert len(engine.calls) == 3
    with open(path, "a") as fh:  # the kill tore the next line mid-write
        fh.write('{"task": "qa", "program": "no-retrieval", "id": "q2", "ans')

    built2, engine2 = programs(names)
    rows = eval_runs.run_eval(built2, EXAMPLES, tmp_path)
    assert len(engine2.calls) == 2 * 5 - 3  # only the unfinished pairs ran
    assert [inp["question"] for _, inp in engine2.calls][0] == EXAMPLES[1].question  # no-retrieval on q2 first
    got = keys(path)
    assert len(got) == len(set(got)) == 10 and len(rows) == 10
    built3, engine3 = programs(names)
    eval_runs.run_eval(built3, EXAMPLES, tmp_path)  # a finished run does nothing
    assert engine3.calls == [] and len(keys(path)) == 10


def test_a_new_program_on_resume_runs_only_its_own_questions(tmp_path):
    built, _ = programs(("vanilla-rag",))
    eval_runs.run_eval(built, EXAMPLES, tmp_path)
    built2, engine2 = programs(("vanilla-rag", "no-retrieval"))
    rows = eval_runs.run_eval(built2, EXAMPLES, tmp_path)
    assert engine2.roles() == ["answer_directly"] * 5
    assert len(rows) == 10


# ---------------------------------------------------------------- errors


class Flaky(dspy.Module):
    """Delegates to a program but raises on one question."""

    def __init__(self, inner, bad_question):
        super().__init__()
        self.inner, self.bad = inner, bad_question

    def forward(self, question):
        if question == self.bad:
            raise RuntimeError("store went away")
        return self.inner(question=question)


def test_an_error_on_one_question_is_recorded_and_counted_not_fatal(tmp_path):
    built, _ = programs(("vanilla-rag", "no-retrieval"))
    built["vanilla-rag"] = Flaky(built["vanilla-rag"], EXAMPLES[1].question)
    rows = eval_runs.run_eval(built, EXAMPLES, tmp_path)
    bad = [r for r in rows if not r["ok"]]
    assert [(r["program"], r["id"]) for r in bad] == [("vanilla-rag", "q2")]
    assert bad[0]["error"] == "RuntimeError: store went away" and bad[0]["error_kind"] == "exception"
    assert all(r["error_kind"] is None for r in rows if r["ok"])
    s = eval_summary.summarize(rows)["programs"]
    assert s["vanilla-rag"]["errors"] == 1 and s["vanilla-rag"]["questions"] == 5
    assert s["vanilla-rag"]["errors_by_kind"] == {"exception": 1}
    assert s["no-retrieval"]["errors_by_kind"] == {}
    assert s["vanilla-rag"]["answerable"] == 2  # averages leave the error out
    assert s["vanilla-rag"]["f1"] == pytest.approx((1 + 0) / 2)
    assert s["no-retrieval"]["errors"] == 0
    # an errored pair counts as done: a rerun does not retry it
    built2, engine2 = programs(("vanilla-rag", "no-retrieval"))
    eval_runs.run_eval(built2, EXAMPLES, tmp_path)
    assert engine2.calls == []


# ---------------------------------------------------------------- reports


def test_reports_are_written_with_table_json_and_plot(tmp_path):
    built, _ = programs()
    rows = eval_runs.run_eval(built, EXAMPLES, tmp_path)
    summary = eval_summary.summarize(rows, list(built), {"run_id": "t1", "dataset": "five"})
    paths = eval_reports.write_reports(tmp_path, summary)
    data = json.loads(paths["summary_json"].read_text())
    assert set(data["programs"]) == {"vanilla-rag", "no-retrieval", "graded-rag"}
    md = paths["summary_md"].read_text()
    assert "| program |" in md and "| graded-rag | 5 | 0 |" in md and "dataset: five" in md
    png = paths["plot"].read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 1000
    line = json.loads((tmp_path / eval_runs.RESULTS).read_text().splitlines()[0])
    assert line["result"]["trace"] and line["usage"]["lm_calls"] == 1 and "scores" in line


def test_support_judge_accuracy_on_labelled_examples(tmp_path):
    built, _ = programs(("vanilla-rag", "graded-rag"))
    support = [dspy.Example(id=f"s{i}", question="q", passages="[1] p", answer=a, support=label)
               for i, (a, label) in enumerate([("Jane", "no"), ("x", "fully"), ("Jane", "fully")])]
    rows = eval_runs.run_eval(built, EXAMPLES[:1], tmp_path, support_examples=support)
    s = eval_summary.summarize(rows)["programs"]
    assert s["graded-rag"]["support_accuracy"] == pytest.approx(2 / 3) and s["graded-rag"]["support_examples"] == 3
    assert s["vanilla-rag"]["support_accuracy"] is None  # no judge to score


# ---------------------------------------------------------------- programs, examples, knowledge base


def test_parse_and_build_programs(tmp_path):
    assert [s.label for s in parse_programs("selfrag, vanilla-rag,selfrag")] == ["selfrag", "vanilla-rag"]
    for bad in ("bogus", "", "compiled:"):
        with pytest.raises(ValueError):
            parse_programs(bad)
    assert isinstance(build_program(parse_program("vanilla-rag"), FixedRetriever()), VanillaRAG)
    assert isinstance(build_program(parse_program("no-retrieval"), FixedRetriever()), NoRetrieval)
    assert isinstance(build_program(parse_program("graded-rag"), FixedRetriever()), GradedRAG)
    from programs.artifacts import ArtifactError

    with pytest.raises(ArtifactError):
        build_program(parse_program(f"compiled:{tmp_path / 'missing.json'}"), FixedRetriever())


def test_compiled_program_loads_its_artifact(tmp_path):
    from programs.artifacts import save_artifact

    program = build_program(parse_program("selfrag"), FixedRetriever())
    program.generate_answer.signature = program.generate_answer.signature.with_instructions("Compiled!")
    save_artifact(program, tmp_path / "a.json")
    loaded = build_program(parse_program(f"compiled:{tmp_path / 'a.json'}"), FixedRetriever())
    assert loaded.generate_answer.signature.instructions == "Compiled!"


def test_balanced_alternates_answerable_and_unanswerable():
    picked = eval_examples.balanced(EXAMPLES, 4)
    assert [e.id for e in picked] == ["q1", "q4", "q2", "q5"]
    assert [e.id for e in eval_examples.balanced(EXAMPLES, 5)] == [e.id for e in EXAMPLES]
    assert [e.id for e in eval_examples.balanced(EXAMPLES[:3], 2)] == ["q1", "q2"]


def test_balanced_after_continues_the_interleaved_order_to_the_end_of_the_split():
    # the first two balanced picks are q1, q4; what follows them never repeats one, the whole split included
    # (a file-order slice of all five would give q3, q4, q5: q4 twice)
    assert [e.id for e in eval_examples.balanced(EXAMPLES, 2)] == ["q1", "q4"]
    assert [e.id for e in eval_examples.balanced_after(EXAMPLES, 2, 3)] == ["q2", "q5", "q3"]
    assert [e.id for e in eval_examples.balanced_after(EXAMPLES, 2, 1)] == ["q2"]
    assert [e.id for e in eval_examples.balanced_after(EXAMPLES, 4, 9)] == ["q3"]
    assert eval_examples.balanced_after(EXAMPLES, 5, 3) == []
    assert eval_examples.balanced_after(EXAMPLES, 0, 9) == eval_examples.balanced(EXAMPLES, 9)


DOCS = [("The Zephyr bridge opened in 1931.", {"doc_id": "d1", "title": "Zephyr"}),
        ("Acme was founded by Jane Roe.", {"doc_id": "d2", "title": "Acme"}),
        ("Oda trout are silver blue.", {"doc_id": "d3", "title": "Oda"})]


@pytest.fixture
def hash_kb_settings(tmp_path, monkeypatch):
    monkeypatch.setenv("SELFRAG_KB__EMBEDDING_MODEL", "hash")
    monkeypatch.setenv("SELFRAG_KB__PATH", str(tmp_path / "kb"))
    monkeypatch.chdir(tmp_path)
    return resolve()


def test_the_eval_knowledge_base_is_filled_once(hash_kb_settings):
    from selfrag.wiring import build_knowledge_base

    kb = build_knowledge_base(hash_kb_settings, collection="eval-test")
    assert eval_examples.ensure_corpus(kb, DOCS) == 3
    count = kb.count()
    kb2 = build_knowledge_base(hash_kb_settings, collection="eval-test")
    assert eval_examples.ensure_corpus(kb2, DOCS) == 0 and kb2.count() == count
    assert eval_examples.ensure_corpus(kb2, DOCS + [("A fourth document.", {"doc_id": "d4"})]) == 1


def write_dataset(path):
    records = [{k: e[k] for k in ("id", "question", "answers", "answerable", "gold_doc_ids")} for e in EXAMPLES]
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    return path


def fake_corpus(name, datasets_dir):
    return [(p.text, dict(p.metadata)) for p in (D1, D2, D3, DX)]


def test_evaluate_from_settings_builds_kb_runs_and_resumes(hash_kb_settings, tmp_path, monkeypatch):
    from selfrag.wiring import build_knowledge_base

    monkeypatch.setattr("optimize.sources.corpus_documents", fake_corpus)
    data = write_dataset(tmp_path / "five.jsonl")
    lm, engine = scripted_lm(SCRIPT)
    components = dict(lms=(lm, None, dspy.JSONAdapter()), datasets_dir=tmp_path, splits_dir=paths.splits_dir(),
                      knowledge_base=lambda name: build_knowledge_base(hash_kb_settings, collection=name))
    out, summary = evaluate(hash_kb_settings, str(data), parse_programs("vanilla-rag,no-retrieval"), limit=4,
                            run_id="r1", reports_dir=tmp_path / "reports", **components)
    assert out == tmp_path / "reports" / "r1"
    assert summary["programs"]["vanilla-rag"]["questions"] == 4
    assert summary["meta"]["collection"] == "eval-clapnq" and summary["meta"]["corpus_added"] == 4
    assert {p.name for p in out.iterdir()} >= {"results.jsonl", "summary.json", "summary.md", "quality_vs_cost.png",
                                               "config.json"}
    calls = len(engine.calls)
    assert calls == 8
    # resume: same questions as the run started with (no limit given: the run's), the KB is not refilled
    out, summary = evaluate(hash_kb_settings, str(data), parse_programs("vanilla-rag,no-retrieval,graded-rag"),
                            limit=None, run_id="r1", reports_dir=tmp_path / "reports", **components)
    assert summary["meta"]["corpus_added"] == 0
    assert summary["programs"]["graded-rag"]["questions"] == 4
    assert engine.roles()[calls:].count("answer_directly") == 0  # finished pairs were not re-run


def test_semantic_f1_is_judged_on_answered_answerable_questions_only(tmp_path, monkeypatch):
    monkeypatch.setitem(fakes.ROLES, ("reasoning", "recall", "precision"), "semantic_f1")
    monkeypatch.setitem(fakes.ROLES, ("recall", "precision"), "semantic_f1")
    built, _ = programs(("vanilla-rag",))
    judge_lm, judge_engine = scripted_lm({"semantic_f1": {"recall": 1.0, "precision": 0.5}})
    judge = eval_runs.SemanticF1Judge(judge_lm, dspy.JSONAdapter())
    rows = eval_runs.run_eval(built, EXAMPLES, tmp_path, semantic_f1=judge)
    # answered answerable: q1, q2 (judged 2·1·0.5/1.5); q3 abstained → 0 without a call; q4, q5 unanswerable
    assert judge_engine.count("semantic_f1") == 2
    by_id = {r["id"]: r["scores"]["semantic_f1"] for r in rows}
    assert by_id == {"q1": pytest.approx(2 / 3, abs=1e-4), "q2": pytest.approx(2 / 3, abs=1e-4), "q3": 0.0,
                     "q4": None, "q5": None}
    s = eval_summary.summarize(rows)["programs"]["vanilla-rag"]
    assert s["semantic_f1"] == pytest.approx((2 / 3 + 2 / 3 + 0) / 3, abs=1e-4)
    assert "sem F1" in eval_reports.render_markdown(eval_summary.summarize(rows))
    assert eval_summary.summarize_program([])["semantic_f1"] is None


# ---------------------------------------------------------------- resume checks and bad input (issue 15)


def _components(hash_kb_settings, tmp_path, script=SCRIPT):
    from selfrag.wiring import build_knowledge_base

    lm, engine = scripted_lm(script)
    return dict(lms=(lm, None, dspy.JSONAdapter()), datasets_dir=tmp_path, splits_dir=paths.splits_dir(),
                knowledge_base=lambda name: build_knowledge_base(hash_kb_settings, collection=name)), engine


@pytest.mark.parametrize("run_id", ["../..", "/tmp/elsewhere", "a/b", "..", ".hidden", "", "x" * 200])
def test_a_run_id_that_is_not_a_folder_name_is_refused(hash_kb_settings, tmp_path, monkeypatch, run_id):
    from optimize.errors import DataError

    monkeypatch.setattr("optimize.sources.corpus_documents", fake_corpus)
    components, engine = _components(hash_kb_settings, tmp_path)
    with pytest.raises(DataError, match="invalid run id"):
        evaluate(hash_kb_settings, str(write_dataset(tmp_path / "five.jsonl")), parse_programs("vanilla-rag"),
                 run_id=run_id, reports_dir=tmp_path / "reports", **components)
    assert engine.calls == [] and not (tmp_path / "reports").exists()


def test_a_resume_with_other_settings_is_refused_naming_them(hash_kb_settings, tmp_path, monkeypatch):
    from optimize.errors import DataError

    monkeypatch.setattr("optimize.sources.corpus_documents", fake_corpus)
    data = str(write_dataset(tmp_path / "five.jsonl"))
    components, engine = _components(hash_kb_settings, tmp_path)
    run = dict(run_id="r1", reports_dir=tmp_path / "reports", **components)
    evaluate(hash_kb_settings, data, parse_programs("vanilla-rag"), limit=4, **run)
    results = (tmp_path / "reports" / "r1" / "results.jsonl").read_bytes()
    other_model = hash_kb_settings.model_copy(update={"lm": hash_kb_settings.lm.model_copy(
        update={"profile": "litellm", "model": "openai/gpt-4o-mini"})})
    with pytest.raises(DataError, match=r"other settings \(model: None → 'openai/gpt-4o-mini'; profile: 'local'"):
        evaluate(other_model, data, parse_programs("vanilla-rag"), **run)
    other_k = hash_kb_settings.model_copy(update={"program": hash_kb_settings.program.model_copy(update={"k": 5})})
    with pytest.raises(DataError, match=r"program_settings.k: 3 → 5"):
        evaluate(other_k, data, parse_programs("vanilla-rag"), **run)
    with pytest.raises(DataError, match=r"limit: 4 → 2"):
        evaluate(hash_kb_settings, data, parse_programs("vanilla-rag"), limit=2, **run)
    assert (tmp_path / "reports" / "r1" / "results.jsonl").read_bytes() == results  # untouched
    evaluate(hash_kb_settings, data, parse_programs("vanilla-rag"), limit=4, **run)  # the same: resumes
    config = tmp_path / "reports" / "r1" / "config.json"
    recorded = json.loads(config.read_text())
    assert recorded["corpus"] == "clapnq"
    config.write_text(json.dumps({**recorded, "corpus": "cmrc"}))  # as if started by code answering elsewhere
    with pytest.raises(DataError, match=r"corpus: 'cmrc' → 'clapnq'"):
        evaluate(hash_kb_settings, data, parse_programs("vanilla-rag"), limit=4, **run)


def test_a_resume_whose_compiled_artifact_changed_is_refused_naming_the_program(hash_kb_settings, tmp_path,
                                                                               monkeypatch):
    """A recompile to the same path between two runs of one --run-id mixed the old artifact's rows into the
    new one's summary; the run records each artifact's content hash and a resume refuses another."""
    from optimize.errors import DataError
    from programs.artifacts import content_hash, read_artifact, save_artifact

    monkeypatch.setattr("optimize.sources.corpus_documents", fake_corpus)
    data = str(write_dataset(tmp_path / "five.jsonl"))
    art = tmp_path / "a.json"
    program = build_program(parse_program("vanilla-rag"), FixedRetriever())
    save_artifact(program, art)
    components, engine = _components(hash_kb_settings, tmp_path)
    run = dict(run_id="r1", reports_dir=tmp_path / "reports", **components)
    label = f"compiled:{art}"
    evaluate(hash_kb_settings, data, parse_programs(label), limit=2, **run)
    config = json.loads((tmp_path / "reports" / "r1" / "config.json").read_text())
    assert config["artifacts"] == {label: content_hash(read_artifact(art))}
    evaluate(hash_kb_settings, data, parse_programs(f"{label},no-retrieval"), **run)  # the same artifact: resumes
    results = (tmp_path / "reports" / "r1" / "results.jsonl").read_bytes()
    calls = len(engine.calls)
    program.generate_answer.signature = program.generate_answer.signature.with_instructions("Recompiled.")
    save_artifact(program, art)
    with pytest.raises(DataError, match=rf"^run r1: {label} changed since the run started \(content "):
        evaluate(hash_kb_settings, data, parse_programs(label), **run)
    assert len(engine.calls) == calls and (tmp_path / "reports" / "r1" / "results.jsonl").read_bytes() == results
    evaluate(hash_kb_settings, data, parse_programs(label), run_id="r2", reports_dir=tmp_path / "reports",
             **components)  # a new run takes it


def test_the_retriever_comes_from_retriever_of_and_a_missing_index_is_refused_before_anything_is_written(
        hash_kb_settings, tmp_path, monkeypatch):
    from selfrag.errors import InputError
    from selfrag.kb.indexes import ParentDocumentRetriever, build_index
    from selfrag.wiring import build_knowledge_base, build_retriever

    monkeypatch.setattr("optimize.sources.corpus_documents", fake_corpus)
    data = str(write_dataset(tmp_path / "five.jsonl"))
    components, engine = _components(hash_kb_settings, tmp_path)
    indexed = hash_kb_settings.model_copy(update={"retrieval": hash_kb_settings.retrieval.model_copy(
        update={"index": "multi-representation"})})
    built = []

    def retriever_of(kb):
        built.append(build_retriever(indexed, kb))
        return built[-1]

    run = dict(reports_dir=tmp_path / "reports", retriever_of=retriever_of, **components)
    with pytest.raises(InputError, match="no multi-representation index for collection 'eval-clapnq'"):
        evaluate(indexed, data, parse_programs("vanilla-rag"), run_id="x", **run)
    assert engine.calls == [] and not (tmp_path / "reports").exists()
    assert build_knowledge_base(indexed, collection="eval-clapnq").is_empty()
    kb = build_knowledge_base(indexed, collection="eval-clapnq")  # filled (as a run without the index does), indexed
    eval_examples.ensure_corpus(kb, fake_corpus("clapnq", tmp_path))
    build_index(kb, "multi-representation", representations=["sentences"], progress=False)
    out, _ = evaluate(indexed, data, parse_programs("vanilla-rag"), run_id="y", limit=2, **run)
    assert isinstance(built[-1], ParentDocumentRetriever)  # the programs answered over the index
    rows = eval_runs.read_results(out / eval_runs.RESULTS)
    assert len(rows) == 2 and all(r["ok"] and r["result"]["citations"] for r in rows)


def test_a_strategy_program_gets_logprobs_so_rerank_auto_judges():
    iterative = build_program(parse_program("iterative"), FixedRetriever(), config=ProgramSettings(rerank="auto"),
                              logprobs=True)
    assert iterative.retrieval.rerank_method == "judge"
    assert build_program(parse_program("iterative"), FixedRetriever(),
                         config=ProgramSettings(rerank="auto")).retrieval.rerank_method == "listwise"


YEARS = {"d1": 1931, "d2": 1990, "d3": 2001, "dx": 2020}


def dated_corpus(name, datasets_dir):
    return [(text, {**meta, "year": YEARS[meta["doc_id"]]}) for text, meta in fake_corpus(name, datasets_dir)]


def test_a_strategy_program_is_evaluated_with_the_components_ask_builds_it_with(hash_kb_settings, tmp_path,
                                                                                monkeypatch):
    from selfrag.wiring import strategy_components

    monkeypatch.setattr("optimize.sources.corpus_documents", dated_corpus)
    data = str(write_dataset(tmp_path / "five.jsonl"))
    script = {**SCRIPT, "extract_filters": {"filters": [{"field": "year", "op": "eq", "value": 1931}]},
              "next_query": {"next_query": "Zephyr bridge opening"}}
    components, engine = _components(hash_kb_settings, tmp_path, script)
    settings = hash_kb_settings.model_copy(update={"program": hash_kb_settings.program.model_copy(
        update={"self_query": True, "max_iterations": 1})})
    asked = []

    def components_of(kb, retriever):
        asked.append(kb.count())  # read once the corpus is in the (new, empty) collection: the schema has "year"
        return strategy_components(settings, kb, retriever)

    out, _ = evaluate(settings, data, parse_programs("iterative,vanilla-rag"), run_id="s", limit=2,
                      reports_dir=tmp_path / "reports", components_of=components_of, **components)
    assert len(asked) == 1 and asked[0] > 0
    rows = eval_runs.read_results(out / eval_runs.RESULTS)
    steps = {(r["program"], r["id"]): [s["step"] for s in r["result"]["trace"]] for r in rows}
    filters = [s for r in rows if r["program"] == "iterative" for s in r["result"]["trace"] if s["step"] == "filters"]
    assert len(filters) == 2 and all(s["output"] == {"year": {"$eq": 1931}} for s in filters)
    cited = [d for r in rows if r["program"] == "iterative" for d in r["cited_doc_ids"]]
    assert cited and set(cited) == {"d1"}  # the filtered store: the 1931 document only
    assert not any("filters" in trace for (program, _), trace in steps.items() if program == "vanilla-rag")
    assert engine.count("extract_filters") == 2  # the strategy program only


def test_only_a_strategy_program_takes_the_components():
    given, other = FixedRetriever(), FixedRetriever()
    parts = {"retriever": other, "metadata_schema": {"year": FieldSpec("year", "int", ("2023",))}}
    vanilla = build_program(parse_program("vanilla-rag"), given, components=parts)
    assert isinstance(vanilla, VanillaRAG) and vanilla.retriever is given
    iterative = build_program(parse_program("iterative"), given, config=ProgramSettings(self_query=True),
                              components=parts)
    assert iterative.retriever is other and iterative.metadata_schema == parts["metadata_schema"]
    with pytest.raises(ValueError, match="self_query needs"):
        build_program(parse_program("iterative"), given, config=ProgramSettings(self_query=True))


@pytest.mark.parametrize("content, problem", [  # the QA file format of optimize.qa_format
    ("", "is empty"),
    ("\n\n", "is empty"),
    ('{"question": "ok?", "answers": []}\n"just a string"\n', r"line 2: expected a JSON object, got str"),
    ('{"question": "ok?", "answers": []}\n\n[1, 2]\n', r"line 3: expected a JSON object, got list"),
    ('{"question": "ok?", "answers": []}\n{"question": "x", "answers": "1931"}\n', r"line 2: 'answers' must be a list"),
    ('{"question": "", "answers": []}\n', r"line 1: 'question' is blank"),
    ('{"question": "a", "answers": [], "answerable": "yes"}\n', r"line 1: 'answerable' must be true or false"),
    ('{"question": "a", "answers": []}\n{oops\n', r"line 2: bad JSON"),
    ('{"question": "a", "answers": [], "id": "1"}\n{"question": "b", "answers": [], "id": "1"}\n', "line 2: duplicate id"),
])
def test_bad_eval_records_are_named_by_line(tmp_path, content, problem):
    from optimize.errors import DataError

    path = tmp_path / "qa.jsonl"
    path.write_text(content)
    with pytest.raises(DataError, match=problem):
        eval_examples.load_examples(str(path), paths.splits_dir())


def test_a_dead_backend_makes_every_question_an_error_not_an_abstention(tmp_path):
    from tests.faults.engine import every, faulty_lm

    lm, engine = faulty_lm(SCRIPT, every("auth"))
    built = {"vanilla-rag": build_program(parse_program("vanilla-rag"), FixedRetriever(), config=ProgramSettings(k=2),
                                          generator_lm=lm, adapter=dspy.JSONAdapter())}
    rows = eval_runs.run_eval(built, EXAMPLES, tmp_path)
    assert all(not r["ok"] and r["error"].startswith("LM failure: auth:") for r in rows)
    assert all(r["error_kind"] == "auth" for r in rows)  # machine-readable, as RAGResult.error_kind
    s = eval_summary.summarize(rows)["programs"]["vanilla-rag"]
    assert s["errors"] == 5 and s["abstain_unanswerable"] is None  # no credit for "abstaining"
    assert s["errors_by_kind"] == {"auth": 5}


def test_the_splits_an_artifact_s_thresholds_were_fitted_on_are_read_per_stage_and_language(tmp_path):
    from optimize.evaluate import fitted_splits, in_sample_warnings
    from programs.artifacts import save_artifact

    manifest = {"language": "en", "calibration": {"split": "train+dev", "stages": {
        "retrieve": {"split": "dev"},  # not the qa questions an eval scores
        "answer": {"split": "train"},
        "stated@e5@zh": {"split": "dev", "row_splits": {"dev": 40}}}}}
    assert fitted_splits(manifest) == {("en", "train"), ("zh", "dev")}
    assert fitted_splits({"calibration": {"split": "dev", "stages": {"stated": {"n": 10}}}}) == set()  # older
    art = save_artifact(build_program(parse_program("vanilla-rag"), FixedRetriever()), tmp_path / "a.json", manifest)
    specs = parse_programs(f"compiled:{art},vanilla-rag")
    assert in_sample_warnings("clapnq", specs) == []
    assert in_sample_warnings("cmrc", specs) == [f"compiled:{art}: its thresholds were fitted on cmrc dev questions "
                                                 "(calibration split 'train+dev'): its scores on them are in-sample"]
    derived = save_artifact(build_program(parse_program("vanilla-rag"), FixedRetriever()), tmp_path / "d.json",
                            {**manifest, "data": {"dir": "own"}})  # compiled on a derived folder's questions
    assert in_sample_warnings("cmrc", parse_programs(f"compiled:{derived}")) == []


def test_a_crag_setting_against_its_artifacts_thresholds_is_refused_when_the_program_is_built(tmp_path):
    from programs.artifacts import ArtifactError, save_artifact
    from programs.crag import CorrectiveRAG
    from programs.thresholds import CragThresholds, Thresholds

    fitted = CorrectiveRAG(fakes.ListRetriever([]))
    fitted.compiled_thresholds = Thresholds(crag=CragThresholds(upper=6.0, lower=3.0))
    path = save_artifact(fitted, tmp_path / "crag.json")
    spec = parse_program(f"compiled:{path}")
    assert build_program(spec, fakes.ListRetriever([]), config=ProgramSettings(crag_lower=5.5)).crag_thresholds.lower == 5.5
    with pytest.raises(ArtifactError, match=r"program settings: program.crag_lower \(6.5\) must not exceed"):
        build_program(spec, fakes.ListRetriever([]), config=ProgramSettings(crag_lower=6.5))
