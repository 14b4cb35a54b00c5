"""Compile a registered program other than SelfRAG (``selfrag compile --program iterative --e2e``) end to end.

A strategy program's LM steps — ``iterative``'s ``next_query``, ``decompose-serial``'s sub-question
steps, the retrieval strategies' predictors (``retrieval.transforms.paraphrase``, ``retrieval.route``,
``retrieval.self_query``...; :mod:`programs.strategy_retrieval`) and its ``generate_answer`` /
``judge_support`` — are typed predictors without labelled sets of their own, so the program is
compiled as a whole on ``qa_en`` with ``e2e_metric`` (:func:`optimize.stages.compile_e2e`): every
predictor takes the demos of the traces that answered a training question well.

The program is built as ``selfrag eval`` builds it (:func:`optimize.evaluate.build_program` with the
components ``components_of(kb, retriever)`` gives: ``selfrag compile`` passes
``selfrag.wiring.strategy_components``) over the ``clapnq`` collection (``cmrc-qa`` for ``zh``; a
derived data folder's own collection with ``data_dir``), and saved with its manifest by
:func:`optimize.compile.write_result`: the artifact's header names its class, so ``compiled:PATH`` in
``selfrag eval`` and ``selfrag ask --program PATH`` load it as that program. The manifest also records
the program settings it was compiled with (the retrieval strategies decide which predictors it has).

CRAG has a calibrate stage of its own (``selfrag compile --program crag --calibrate``, with or without
``--e2e``): its evaluator's thresholds fitted on labelled passages of the ``relevance`` split
(:mod:`optimize.calibrate_crag`), saved in the artifact's ``thresholds.crag`` (``--language zh``:
``thresholds.crag_by_language["zh"]``, for Chinese questions only) and reported in the manifest's
``calibration`` as SelfRAG's are. Calibrating alone fills no collection: nothing is retrieved.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import dspy

from optimize.calibrate_crag import DEFAULT_MAX_DROPPED, DEFAULT_MAX_TRUSTED, calibrate_crag
from optimize.compile import CompileResult, NullRetriever, check_request, data_entry, reflection_lm_for
from optimize.compile import relative_to, write_result
from optimize.derived_data import derived_loader, read_manifest
from optimize.errors import CompileError
from optimize.evaluate import build_program
from optimize.judgements import SEED, seeded_sample
from optimize.manifest import build_manifest
from optimize.progress import Reporter
from optimize.records_zh import QA_CORPUS
from optimize.splits import language_loader, load_split
from optimize.stages import E2E_COLLECTION, compile_e2e, e2e_knowledge_base
from optimize.usage import UsageMeter
from programs.artifacts import load_state_into, read_artifact
from programs.registry import ProgramSpec
from programs.thresholds import Thresholds


def compile_strategy_program(settings: Any, program_name: str, *, lms: tuple, splits_dir: Path | str,
                             out_dir: Path | str, knowledge_base: Callable[[str], Any],
                             datasets_dir: Path | str | None = None, optimizer: str = "bootstrap",
                             e2e_train: int | None = 20, e2e_dev: int | None = 10, budget: int | None = None,
                             name: str | None = None, num_threads: int = 1, reporter: Reporter | None = None,
                             loader: Callable[[str, str], list] | None = None, seed: int = SEED,
                             start_from: Path | str | None = None, data_dir: Path | str | None = None,
                             teacher_lm: Any = None, language: str = "en",
                             retriever_of: Callable[[Any], Any] | None = None,
                             components_of: Callable[[Any, Any], Mapping[str, Any]] | None = None,
                             e2e: bool = True, calibrate_sizes: Mapping[str, int] | None = None,
                             calibrate_split: str = "train", crag_max_trusted: float = DEFAULT_MAX_TRUSTED,
                             crag_max_dropped: float = DEFAULT_MAX_DROPPED) -> CompileResult:
    """Compile the registered program ``program_name`` end to end and write its artifact and manifest.

    Args:
        settings: resolved settings (``settings.program`` configures the program and its strategies).
        lms: ``(generator, critic, adapter)``; ``critic`` may be None.
        knowledge_base: collection name → knowledge base; the ``clapnq`` collection (``cmrc-qa`` for
            ``zh``; the derived data's collection with ``data_dir``) is filled from ``datasets_dir`` once.
        retriever_of: knowledge base → its retriever (default: the collection's own).
        components_of: (knowledge base, retriever) → the strategy program's components (metadata schema,
            routed collections); None = the retriever alone.
        e2e: compile end to end (False: CRAG's calibrate stage alone, no collection is filled).
        calibrate_sizes: ``{"crag": N}``: after the end-to-end stage, fit CRAG's evaluator thresholds on N
            labelled passages of the ``relevance`` split ``calibrate_split`` (:mod:`optimize.calibrate_crag`,
            ``crag_max_trusted`` / ``crag_max_dropped`` its targets); None = no calibrate stage. The fit is
            for questions in any language (``language`` en) or in ``language`` only (zh: the artifact's
            ``crag_by_language``), on the bundled sets of that language or, with ``data_dir``, on the folder's.
        The other arguments are :func:`optimize.compile.compile_program`'s.
    """
    _, name = check_request(optimizer=optimizer, judgements="none", e2e=e2e, e2e_train=e2e_train, e2e_dev=e2e_dev,
                            budget=budget, name=name, program=program_name, calibrate=calibrate_sizes is not None)
    data_manifest = read_manifest(data_dir) if data_dir is not None else None  # refused before any LM call
    if data_dir is not None:  # a derived folder holds one set per task: ``language`` names what CRAG's fit is for
        splits_dir, loader = data_dir, loader or derived_loader(data_dir)
    else:
        loader = language_loader(loader or functools.partial(load_split, splits_dir=splits_dir), language)
    corpus = data_manifest["collection"] if data_manifest else QA_CORPUS if language == "zh" else E2E_COLLECTION
    if e2e and data_manifest is None and datasets_dir is None:
        raise CompileError("the end-to-end stage needs the datasets folder to fill its collection")
    reporter = reporter or Reporter()
    generator, critic, adapter = lms
    reflection_lm = reflection_lm_for(optimizer, generator, teacher_lm)

    if e2e:
        if retriever_of is not None:
            retriever_of(knowledge_base(corpus))  # a missing retrieval.index is refused before the collection is filled
        kb = e2e_knowledge_base(knowledge_base, Path(datasets_dir or "."), reporter, corpus)
        retriever = retriever_of(kb) if retriever_of is not None else kb.retriever()
        components = components_of(kb, retriever) if components_of is not None else None
    else:  # calibrate only: the evaluator reads labelled passages, nothing is retrieved
        retriever, components = NullRetriever(), None
    try:
        program = build_program(ProgramSpec(label=program_name, name=program_name), retriever,
                                config=settings.program, generator_lm=generator, critic_lm=critic, adapter=adapter,
                                logprobs=settings.lm.logprobs, components=components)
    except (TypeError, ValueError) as exc:
        raise CompileError(f"--program {program_name}: program settings: {exc}") from None
    if start_from is not None:
        load_state_into(program, Path(start_from))
        try:  # CRAG: a threshold set in the settings against one of the started-from artifact's sets
            getattr(program, "check_crag_settings", lambda: None)()
        except ValueError as exc:
            raise CompileError(f"--from {start_from}: program settings: {exc}") from None

    meter, start = UsageMeter(), time.perf_counter()
    stages, params = [], {}
    if e2e:
        with dspy.context(lm=generator, adapter=adapter):
            report, params = compile_e2e(program, loader=loader, optimizer=optimizer,
                                         train=e2e_train if e2e_train is not None else 20,
                                         dev=e2e_dev if e2e_dev is not None else 10, budget=budget,
                                         num_threads=num_threads, reflection_lm=reflection_lm, reporter=reporter,
                                         meter=meter, seed=seed, teacher_lm=teacher_lm)
        stages.append(report)
    calibration = None
    if calibrate_sizes is not None:
        reporter.stage("calibrate crag")
        examples = seeded_sample("relevance", calibrate_split, calibrate_sizes.get("crag"), loader, seed)
        check_fit_language(examples, language)
        with dspy.context(callbacks=[*dspy.settings.get("callbacks", []), meter]):  # the manifest's cost counts it
            fitted, crag_report, usage = calibrate_crag(
                program, examples, Path(out_dir) / f"{name}.calibration", crag_max_trusted, crag_max_dropped,
                language=language)
        crag_report.update(split=calibrate_split, cost=usage.model_dump())
        thresholds = program.compiled_thresholds or Thresholds()  # None: nothing fitted, no artifact started from
        calibration = {"split": calibrate_split, "thresholds": thresholds.model_dump(),
                       "stages": {"crag": crag_report}, "cost": usage.model_dump()}
    manifest = build_manifest(program, settings, optimizer=optimizer, budget=budget, params=params, stages=stages,
                              meter=meter, seconds=round(time.perf_counter() - start, 2), generator=generator,
                              critic=critic, reflection=reflection_lm, name=name, seed=seed,
                              splits_dir=Path(splits_dir), teacher=teacher_lm)
    manifest.update(language=language, program_name=program_name, collection=corpus if e2e else None,
                    program_settings=settings.program.model_dump(mode="json"))
    if calibration is not None:
        manifest["calibration"] = relative_to(calibration, Path(out_dir))
        manifest["thresholds"] = calibration["thresholds"]
    if start_from is not None:
        manifest["started_from"] = str(start_from)
        if not stages:  # calibrate only: the compiled state (and its measured scores) is the start's
            started = read_artifact(start_from)["manifest"]
            manifest.update({key: started[key] for key in ("scores", "stages", "optimizer") if started.get(key)})
    if data_manifest is not None:
        manifest["data"] = data_entry(data_dir, data_manifest)
    return write_result(program, manifest, Path(out_dir), name, stages)


def check_fit_language(examples: list, language: str) -> None:
    """CompileError (before any LM call) when a fit for ``language``'s questions only (not English, which fits
    the set for any language) would be made on passages whose questions are mostly in another language — e.g.
    ``--language zh`` over an English ``--data`` folder."""
    from optimize import metrics as M
    from programs.language import question_language

    if language == "en" or not examples:
        return
    other = sum(question_language(str(M.field_value(ex, "question"))) != language for ex in examples)
    if other * 2 > len(examples):
        raise CompileError(f"--language {language}: {other} of the {len(examples)} sampled passages' questions are "
                           f"not in {language}; a set for {language} questions must be fitted on them (drop "
                           "--language to fit the set for any language)")
