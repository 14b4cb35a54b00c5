"""``selfrag compile``: compile the judgements (and optionally the whole program) into an artifact.

The composition root of a compile: settings → LMs (and, for ``--e2e``, the ``clapnq`` knowledge base)
through :mod:`selfrag.wiring`, folders from :mod:`selfrag.paths`, handed to
:func:`optimize.compile.compile_program` — or, with ``--program NAME`` (another registered program, end
to end: ``--e2e``, no judgement; ``crag`` also ``--calibrate``, its evaluator's thresholds), to
:func:`optimize.compile_strategy.compile_strategy_program` with the components ``wiring.strategy_components``
gives, as ``selfrag eval`` builds it. ``--data DIR`` compiles on a derived data folder (``selfrag data
derive``; its collection answers the end-to-end and calibrate stages); ``--teacher MODEL`` bootstraps the
demos with a stronger LM (and is GEPA's reflection LM).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from selfrag import paths
from selfrag.cli.common import (ConfigOpt, ModelOpt, ProfileOpt, ThreadsOpt, console, fail, plain,
                                settings_from)
from selfrag.errors import SelfRAGError

def compile_cmd(
    optimizer: Annotated[str, typer.Option("--optimizer", "-o", help="bootstrap | random-search | mipro | gepa.")]
    = "bootstrap",
    judgement: Annotated[Optional[str], typer.Option(
        "--judgement", "-j", help="retrieve | relevance | support | usefulness | all (comma list allowed) | none "
                                  "(default: all for selfrag, none for another --program).")] = None,
    train: Annotated[int, typer.Option("--train", help="Training examples per judgement.")] = 50,
    dev: Annotated[int, typer.Option("--dev", help="Dev examples per judgement, scored before and after (0 = skip).")]
    = 40,
    budget: Annotated[Optional[int], typer.Option(
        "--budget", help="Optimizer budget: bootstrap max demos (4), random-search candidate programs (4), "
                         "mipro trials (auto=light), gepa max metric calls (auto=light).")] = None,
    e2e: Annotated[bool, typer.Option("--e2e", help="Also compile the whole program end to end on qa_en (slow).")]
    = False,
    e2e_train: Annotated[Optional[int], typer.Option(
        "--e2e-train", help="qa_en training questions (default min(train, 20)).")] = None,
    e2e_dev: Annotated[Optional[int], typer.Option("--e2e-dev", help="qa_en dev questions (default min(dev, 10)).")]
    = None,
    name: Annotated[Optional[str], typer.Option(
        "--name", help="Artifact name: OUT_DIR/NAME.json (default compiled-OPTIMIZER).")] = None,
    out_dir: Annotated[Optional[Path], typer.Option(
        "--out-dir", help="Where to write the artifact (default artifacts/).")] = None,
    profile: ProfileOpt = None,
    model: ModelOpt = None,
    threads: ThreadsOpt = None,
    calibrate: Annotated[bool, typer.Option(
        "--calibrate", help="Fit the retrieve / relevance / similarity / stated / answer thresholds on the program's soft scores "
                            "(after the optimizer stages; with --judgement none, calibrate only); with --program "
                            "crag, its evaluator's upper / lower thresholds (--cal-crag passages).")] = False,
    cal_retrieve: Annotated[int, typer.Option("--cal-retrieve", min=0, help="retrieve questions (0 = skip).")] = 60,
    cal_relevance: Annotated[int, typer.Option("--cal-relevance", min=0, help="relevance questions (0 = skip).")] = 30,
    cal_stated: Annotated[int, typer.Option("--cal-stated", min=0,
                                            help="qa_en questions for the answer check, half unanswerable.")] = 24,
    cal_answer: Annotated[int, typer.Option("--cal-answer", min=0, help="qa_en questions, half unanswerable.")] = 24,
    cal_similarity: Annotated[int, typer.Option(
        "--cal-similarity", min=0, help="qa_en questions for the similarity gate, half unanswerable (retrieval "
                                        "only, no LM call; 0 = skip).")] = 200,
    similarity_false_abstention: Annotated[float, typer.Option(
        "--similarity-false-abstention", min=0.0, max=1.0,
        help="The similarity gate's false abstention on those questions when fitted alone (it turns the gate "
             "on; the stated stage then refits the gate and the answer check together).")] = 0.04,
    answer_objective: Annotated[str, typer.Option(
        "--answer-objective", help="accuracy; max-false-abstention=X (the calibration questions' rate <= X); or "
                              "max-false-abstention=X@C (the rate's upper confidence bound at C <= X: a margin "
                              "against fitting to the sample).")] = "max-false-abstention=0.1@0.8",
    verified_precision: Annotated[float, typer.Option(
        "--verified-precision", min=0.0, max=1.0,
        help="Fit the verified threshold (skip the support judge when the answer check is surer) so that this "
             "share of the questions above it is answerable (0: the check stands in for the support judge on "
             "every draft it lets through).")] = 0.9,
    cal_crag: Annotated[int, typer.Option(
        "--cal-crag", min=4, help="--program crag: labelled passages of the relevance split its evaluator's "
                                  "thresholds are fitted on (one call each).")] = 80,
    crag_max_trusted: Annotated[float, typer.Option(
        "--crag-max-trusted", min=0.0, max=1.0,
        help="--program crag: the share of irrelevant passages the upper threshold may call correct "
             "(trusted without the web).")] = 0.1,
    crag_max_dropped: Annotated[float, typer.Option(
        "--crag-max-dropped", min=0.0, max=1.0,
        help="--program crag: the share of relevant passages the lower threshold may call incorrect "
             "(dropped).")] = 0.05,
    cal_split: Annotated[str, typer.Option(
        "--cal-split", help="The labelled split the calibrate stages read: train, or dev (e.g. to record dev rows "
                            "for --stated-rows).")] = "train",
    cal_skip: Annotated[int, typer.Option(
        "--cal-skip", min=0, help="Start the stated and answer stages after this many of their balanced qa_en "
                                  "questions (an earlier calibration asked them; pool its rows with "
                                  "--stated-rows).")] = 0,
    check_prior: Annotated[Optional[bool], typer.Option(
        "--check-prior/--no-check-prior",
        help="Fit the stated stage on the answer check less its prior (the check asked with no passage: one "
             "short call more per checked question at run time), or on the bare check; default: as the "
             "thresholds it starts from (--from) say.")] = None,
    stated_rows: Annotated[Optional[list[Path]], typer.Option(
        "--stated-rows", help="Fit the stated stage (gate + answer check) on the rows these compile manifests "
                              "recorded, pooled (repeatable, each manifest once — not with one that pooled it; "
                              "checked before any model is loaded; no LM call; --cal-stated is not used).")] = None,
    start_from: Annotated[Optional[Path], typer.Option(
        "--from", help="Start from this compiled artifact (its demos, instructions and thresholds).")] = None,
    parallel: Annotated[int, typer.Option(
        "--parallel", help="Examples scored in parallel (1 for an in-process model).")] = 1,
    data: Annotated[Optional[Path], typer.Option(
        "--data", help="A derived data folder (`selfrag data derive`): compile on it, the answer signature "
                       "included in --judgement all.")] = None,
    teacher: Annotated[Optional[str], typer.Option(
        "--teacher", help="Teacher LM that bootstraps the demos and reflects for GEPA: a profile (local, tiny), "
                          "a .gguf path or a LiteLLM model string. The artifact stays for the student LM.")] = None,
    language: Annotated[str, typer.Option(
        "--language", help="en (ClapNQ/HaluEval sets) | zh (the CMRC-derived Chinese sets: relevance_zh, "
                           "support_zh, usefulness_zh, retrieve_zh, qa_zh). --program crag --calibrate: zh fits "
                           "the thresholds for Chinese questions only (with --data too), en for any.")] = "en",
    program: Annotated[str, typer.Option(
        "--program", help="The registered program to compile: selfrag (judgements, end to end, calibrate), crag "
                          "(end to end and / or --calibrate: its evaluator's thresholds) or another (iterative, "
                          "decompose-serial...: end to end only, with --e2e).")] = "selfrag",
    config: ConfigOpt = None,
) -> None:
    """Compile SelfRAG's judgements on their labelled sets (or another registered program end to end) and
    write a compiled artifact with its manifest."""
    from optimize.compile import check_request, compile_program
    from optimize.compile_strategy import compile_strategy_program
    from optimize.derived_data import read_manifest
    from optimize.errors import OptimizeError
    from optimize.gate_check import RecordedRows
    from optimize.optimizers import OPTIMIZERS
    from programs.artifacts import ArtifactError
    from selfrag import wiring
    from selfrag.cli.progress import RichReporter
    from selfrag.lm.model_files import ModelFileError

    if optimizer not in OPTIMIZERS:
        fail(f"--optimizer must be one of {', '.join(OPTIMIZERS)}, got {optimizer!r}", 2)
    if language not in ("en", "zh"):
        fail(f"--language must be en or zh, got {language!r}", 2)
    if data is not None and language != "en" and not (program == "crag" and calibrate):
        fail("--language applies to the bundled splits; a --data folder is compiled as it is (except by "
             "--program crag --calibrate, where it names the questions the thresholds are for)", 2)
    if parallel < 1:
        fail(f"--parallel must be >= 1, got {parallel}", 2)
    if cal_split not in ("train", "dev"):
        fail(f"--cal-split must be train or dev, got {cal_split!r}", 2)
    if cal_skip and not calibrate:
        fail("--cal-skip applies to the calibrate stage: add --calibrate", 2)
    if stated_rows and not calibrate:
        fail("--stated-rows refits the calibrate stage: add --calibrate", 2)
    if check_prior is not None and not calibrate:
        fail("--check-prior / --no-check-prior apply to the calibrate stage: add --calibrate", 2)
    if program != "selfrag" and (cal_skip or stated_rows or check_prior is not None):
        fail("--cal-skip, --stated-rows and --check-prior apply to SelfRAG's calibrate stage, not "
             f"--program {program}", 2)
    if teacher is not None and (not teacher.strip() or teacher.strip() == "litellm"):
        fail("--teacher needs a profile (local, tiny), a .gguf path or a LiteLLM model string such as "
             "openai/gpt-4o-mini", 2)
    if judgement is None:
        judgement = "all" if program == "selfrag" else "none"
    request = dict(optimizer=optimizer, judgements=judgement, e2e=e2e, train=train, dev=dev, e2e_train=e2e_train,
                   e2e_dev=e2e_dev, budget=budget, name=name)
    objective = parse_objective(answer_objective)
    if start_from is not None and not start_from.is_file():
        fail(f"--from: compiled artifact not found: {start_from}", 2)
    try:
        check_request(**request, calibrate=calibrate, with_answer=data is not None,  # before any model is loaded
                      program=program)
        data_manifest = read_manifest(data) if data is not None else None
        recorded_rows = RecordedRows(stated_rows) if stated_rows else None
    except OptimizeError as exc:
        fail(str(exc), 2)
    sizes = ({"retrieve": cal_retrieve, "relevance": cal_relevance, "similarity": cal_similarity,
              "stated": cal_stated, "answer": cal_answer} if calibrate else None)
    settings = settings_from(config, {"lm": {"profile": profile, "model": model, "threads": threads}})

    retriever = None
    if data_manifest is not None and (e2e or calibrate):  # the derived data's own collection answers
        from selfrag.cli.data import open_collection

        try:  # over retrieval.index when one is set (a missing one refused here, before any model is loaded)
            retriever = wiring.build_retriever(settings, open_collection(settings, data_manifest["collection"]))
        except SelfRAGError as exc:
            fail(str(exc), exc.exit_code)
    try:
        lms = wiring.build_lms(settings)
        teacher_lm = wiring.build_teacher_lm(settings, teacher) if teacher else None
        with RichReporter(console) as reporter:
            common = dict(lms=lms, splits_dir=paths.splits_dir(), out_dir=out_dir or paths.artifacts_dir(),
                          num_threads=parallel, reporter=reporter, datasets_dir=paths.datasets_dir(),
                          knowledge_base=lambda name: wiring.build_knowledge_base(settings, collection=name),
                          start_from=start_from, data_dir=data, teacher_lm=teacher_lm, language=language,
                          retriever_of=lambda kb: wiring.build_retriever(settings, kb))
            if program == "selfrag":
                result = compile_program(settings, **common, calibrate_sizes=sizes, answer_objective=objective,
                                         verified_precision=verified_precision, retriever=retriever,
                                         calibrate_split=cal_split, stated_rows=recorded_rows,
                                         calibrate_skip=cal_skip, check_prior=check_prior,
                                         similarity_false_abstention=similarity_false_abstention, **request)
            else:  # built as `selfrag eval` builds it, compiled end to end
                result = compile_strategy_program(
                    settings, program, **common, **e2e_request(request), e2e=e2e,
                    calibrate_sizes={"crag": cal_crag} if calibrate else None, calibrate_split=cal_split,
                    crag_max_trusted=crag_max_trusted, crag_max_dropped=crag_max_dropped,
                    components_of=lambda kb, retriever: wiring.strategy_components(settings, kb, retriever))
    except (OptimizeError, ArtifactError) as exc:
        fail(str(exc), 2)
    except SelfRAGError as exc:
        fail(str(exc), exc.exit_code)
    except ModelFileError as exc:
        fail(str(exc))

    render(result.manifest)
    console.print(plain(f"Wrote {result.artifact} and {result.manifest_path}"))


def e2e_request(request: dict) -> dict:
    """The end-to-end part of a compile request, its sizes defaulted as SelfRAG's end-to-end stage does."""
    train, dev = request["train"], request["dev"]
    return {"optimizer": request["optimizer"], "budget": request["budget"], "name": request["name"],
            "e2e_train": request["e2e_train"] if request["e2e_train"] is not None else min(train, 20),
            "e2e_dev": request["e2e_dev"] if request["e2e_dev"] is not None else min(dev, 10)}


def parse_objective(text: str):
    """``accuracy``, ``max-false-abstention=X`` (0 ≤ X ≤ 1) or ``max-false-abstention=X@C`` (the rate's
    upper confidence bound at C, 0.5 ≤ C < 1, must stay ≤ X: a margin against fitting to the calibration
    sample) → the calibrate stage's objective."""
    text = text.strip().lower()
    if text == "accuracy":
        return "accuracy"
    key, _, value = text.partition("=")
    limit_text, at, confidence_text = value.partition("@")
    try:
        limit = float(limit_text)
        confidence = float(confidence_text) if at else None
    except ValueError:
        limit, confidence = -1.0, None
    if key == "max-false-abstention" and 0.0 <= limit <= 1.0:
        if confidence is None:
            return ("max_false_abstention", limit)
        if 0.5 <= confidence < 1.0:
            return ("max_false_abstention", limit, confidence)
    fail("--answer-objective must be 'accuracy', 'max-false-abstention=X' or 'max-false-abstention=X@C' with "
         f"0 <= X <= 1 and 0.5 <= C < 1, got {text!r}", 2)


def render(manifest: dict) -> None:
    from optimize.manifest import summary_rows

    table = Table(title=f"Dev scores — {manifest['optimizer']['name']}")
    for col in ("stage", "metric", "train/dev", "before", "after", "Δ", "demos"):
        table.add_column(col, justify="right" if col in ("before", "after", "Δ", "demos") else "left")
    for row in summary_rows(manifest):
        table.add_row(*row)
    console.print(table)
    c = manifest["cost"]
    console.print(f"{c['lm_calls']} LM calls · {c['prompt_tokens']} prompt + {c['completion_tokens']} completion "
                  f"tokens · {c['seconds']:.1f} s")


def register(app: typer.Typer) -> None:
    app.command("compile")(compile_cmd)
