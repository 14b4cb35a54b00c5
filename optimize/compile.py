"""Compile SelfRAG: each judgement on its own labelled set, then (optionally) the whole program end to end.

:func:`compile_program` checks the request (:func:`check_request`), runs the requested judgement
stages and the end-to-end stage when asked (:mod:`optimize.stages`), and writes
``<out_dir>/<name>.json`` through :func:`programs.artifacts.save_artifact` and
``<out_dir>/<name>.manifest.json`` (the manifest alone, :mod:`optimize.manifest`). Judgements are in
:mod:`optimize.judgements`, optimizers and their budgets in :mod:`optimize.optimizers`.

Everything it needs comes from the caller (the command line builds it through ``selfrag.wiring``):
the LMs, the splits folder, and for the end-to-end stage a retriever or a knowledge-base factory
with the datasets folder. With ``data_dir`` (a derived data folder, ``selfrag compile --data``) the
stages read it instead of the splits, and the answer signature is a stage too; ``teacher_lm``
bootstraps the demos (and is GEPA's reflection LM); the manifest records it and the data folder.
"""

from __future__ import annotations

import functools
import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dspy

from optimize.calibrate import DEFAULT_ANSWER_OBJECTIVE, DEFAULT_SIMILARITY_FALSE_ABSTENTION
from optimize.calibrate import DEFAULT_VERIFIED_PRECISION, calibrate, joined_split
from optimize.gate_check import StatedRows, stage_split
from optimize.derived_data import derived_loader, read_manifest
from optimize.errors import CompileError
from optimize.eval_examples import balanced_after
from optimize.judgements import SEED, STAGES, SplitLoader, parse_judgements
from optimize.manifest import build_manifest
from optimize.optimizers import MIPRO_NEEDS_OPTUNA, OPTIMIZERS, has_optuna
from optimize.progress import Reporter
from optimize.records_zh import QA_CORPUS
from optimize.splits import language_loader, load_split
from optimize.stages import E2E_COLLECTION, StageReport, compile_e2e, compile_judgement, e2e_retriever
from optimize.usage import UsageMeter
from programs.artifacts import load_state_into, read_artifact, save_artifact
from programs.registry import PROGRAM_NAMES
from programs.selfrag import SelfRAG

_ARTIFACT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


@dataclass
class CompileResult:
    program: Any  # SelfRAG, or the strategy program compiled end to end
    manifest: dict[str, Any]
    artifact: Path
    manifest_path: Path
    stages: list[StageReport]


class NullRetriever:
    """The per-judgement compile never retrieves; the artifact is loaded over a real retriever later."""

    def retrieve(self, query: str, k: int = 5, filters: dict[str, Any] | None = None) -> list:
        return []


def check_request(*, optimizer: str = "bootstrap", judgements: str | Sequence[str] = "all", e2e: bool = False,
                  train: int | None = 50, dev: int | None = 40, e2e_train: int | None = None,
                  e2e_dev: int | None = None, budget: int | None = None, name: str | None = None,
                  calibrate: bool = False, with_answer: bool = False,
                  program: str = "selfrag") -> tuple[list[str], str]:
    """Validate a compile request before anything is built; returns the judgement names and the artifact name.

    ``program`` is a registry name: SelfRAG compiles its judgements, end to end and calibrates; CRAG end to
    end and / or calibrates (its evaluator's thresholds, :mod:`optimize.calibrate_crag`); any other program
    only end to end (``e2e`` with no judgement and no ``calibrate``: its LM steps have no labelled sets).
    Raises :class:`CompileError` naming the problem."""
    if program not in PROGRAM_NAMES:
        raise CompileError(f"unknown program {program!r}: use one of {', '.join(PROGRAM_NAMES)}")
    if optimizer not in OPTIMIZERS:
        raise CompileError(f"unknown optimizer {optimizer!r}: use one of {', '.join(OPTIMIZERS)}")
    for label, value in (("train", train), ("dev", dev), ("e2e_train", e2e_train), ("e2e_dev", e2e_dev)):
        minimum = 1 if label.endswith("train") else 0
        if value is not None and value < minimum:
            raise CompileError(f"--{label.replace('_', '-')} must be >= {minimum}, got {value}")
    if budget is not None and budget < 1:
        raise CompileError(f"--budget must be >= 1, got {budget}")
    if optimizer == "mipro" and not has_optuna():  # refuse before any LM call
        raise CompileError(MIPRO_NEEDS_OPTUNA)
    if isinstance(judgements, str) and judgements.strip().lower() == "none":
        names: list[str] = []
    else:
        names = parse_judgements(judgements, with_answer) if judgements else []
    if program == "crag" and (names or not (e2e or calibrate)):
        raise CompileError("--program crag compiles end to end and / or calibrates its evaluator's thresholds: "
                           "use --e2e and / or --calibrate with --judgement none (the judgement stages are SelfRAG's)")
    if program not in ("selfrag", "crag") and (names or calibrate or not e2e):
        raise CompileError(f"--program {program} compiles end to end only: use --e2e --judgement none "
                           "(the judgement stages are SelfRAG's; --calibrate is SelfRAG's and CRAG's)")
    if not names and not e2e and not calibrate:
        raise CompileError("nothing to compile: give a judgement, --e2e or --calibrate")
    name = name or f"compiled-{optimizer}"
    if not _ARTIFACT_NAME.fullmatch(name) or name.endswith(".json"):
        raise CompileError(f"invalid artifact name {name!r}: letters, digits, '.', '_' and '-' only, no extension")
    return names, name


def compile_program(settings: Any, *, lms: tuple, splits_dir: Path | str, out_dir: Path | str,
                    optimizer: str = "bootstrap", judgements: str | Sequence[str] = "all", train: int | None = 50,
                    dev: int | None = 40, budget: int | None = None, e2e: bool = False, e2e_train: int | None = None,
                    e2e_dev: int | None = None, name: str | None = None, num_threads: int = 1, retriever: Any = None,
                    knowledge_base: Callable[[str], Any] | None = None, datasets_dir: Path | str | None = None,
                    reporter: Reporter | None = None, loader: SplitLoader | None = None,
                    seed: int = SEED, start_from: Path | str | None = None, calibrate_sizes: dict | None = None,
                    answer_objective: Any = DEFAULT_ANSWER_OBJECTIVE, data_dir: Path | str | None = None,
                    verified_precision: float = DEFAULT_VERIFIED_PRECISION,
                    similarity_false_abstention: float = DEFAULT_SIMILARITY_FALSE_ABSTENTION,
                    teacher_lm: Any = None, language: str = "en",
                    retriever_of: Callable[[Any], Any] | None = None, calibrate_split: str = "train",
                    stated_rows: StatedRows | None = None, calibrate_skip: int = 0,
                    check_prior: bool | None = None) -> CompileResult:
    """Compile SelfRAG's judgements (and end to end with ``e2e``) and write the artifact and its manifest.

    Args:
        settings: resolved settings (``settings.program`` bounds the program; ``settings.lm`` is recorded).
        lms: ``(generator, critic, adapter)``; ``critic`` may be None (the generator judges).
        splits_dir: the labelled splits (``<splits_dir>/<task>/<split>.jsonl`` and its manifest).
        out_dir: where ``<name>.json`` and ``<name>.manifest.json`` go.
        optimizer: ``bootstrap`` | ``random-search`` | ``mipro`` | ``gepa``.
        judgements: ``"all"``, a name, a comma list or a list of names (``retrieve``, ``relevance``,
            ``support``, ``usefulness``); ``"none"`` or ``[]`` with ``e2e`` compiles end to end only.
        train / dev: examples per judgement (None = all of the split; ``dev=0`` skips the scores).
        budget: the optimizer's budget knob (see :mod:`optimize.optimizers`); None = its default.
        e2e: also compile the whole program on ``qa_en`` (``e2e_train``/``e2e_dev`` default to
            ``min(train, 20)``/``min(dev, 10)``).
        name: artifact name (``<out_dir>/<name>.json``); default ``compiled-<optimizer>``.
        retriever: retriever for the end-to-end stage; None = the ``clapnq`` collection opened with
            ``knowledge_base(name)`` and filled from ``datasets_dir`` once.
        loader: ``(task, split) → examples``; default :func:`optimize.splits.load_split` on ``splits_dir``.
        start_from: an artifact whose compiled state (and thresholds) the program starts from.
        calibrate_sizes: run the calibrate stage (:mod:`optimize.calibrate`) after the optimizer stages,
            with these sizes (``{"retrieve": 60, "relevance": 30, "answer": 24}``, 0 skips one); None = no.
        answer_objective: the stated and answer thresholds' objective (``"accuracy"``,
            ``("max_false_abstention", x)`` or ``("max_false_abstention", x, confidence)``; default x = 0.1 held
            by its upper confidence bound at 0.8).
        verified_precision: the share of answerable questions above the ``verified`` threshold it is fitted for.
        similarity_false_abstention: the false abstention the similarity gate is fitted for
            (``calibrate_sizes["similarity"]`` questions; its share of the answer objective's budget).
        data_dir: a derived data folder (:mod:`optimize.derived_data`) read instead of ``splits_dir``;
            ``"all"`` then includes the ``answer`` stage.
        teacher_lm: the teacher LM of the bootstrapping optimizers and GEPA's reflection LM.
        language: ``en``, or ``zh``: the Chinese sets (``relevance_zh``..., ``qa_zh``; :func:`optimize.splits.language_loader`)
            and the ``cmrc-qa`` collection for the end-to-end and calibrate stages.
        calibrate_split: the split the calibrate stages read (``train``; ``dev`` records dev rows).
        calibrate_skip: the stated and answer stages start after this many of their balanced ``qa_en``
            questions (an earlier calibration asked them: its rows are pooled with ``stated_rows``).
        stated_rows: rows of earlier calibrations to fit the stated stage on
            (:class:`optimize.gate_check.RecordedRows`; no check call).
        check_prior: the stated stage fits the answer check less its prior (True), the bare check (False), or
            (None) as the thresholds it starts from say.
        retriever_of: knowledge base → its retriever for that collection (``selfrag compile`` passes
            ``selfrag.wiring.build_retriever``: the index in ``retrieval.index``); checked before any LM call.
    """
    names, name = check_request(optimizer=optimizer, judgements=judgements, e2e=e2e, train=train, dev=dev,
                                e2e_train=e2e_train, e2e_dev=e2e_dev, budget=budget, name=name,
                                calibrate=calibrate_sizes is not None, with_answer=data_dir is not None)
    runs_program = bool(calibrate_sizes and (calibrate_sizes.get("answer", 1) or calibrate_sizes.get("stated", 1)
                                             or calibrate_sizes.get("similarity", 0)))
    needs_corpus = e2e or runs_program
    if needs_corpus and retriever is None and (knowledge_base is None or datasets_dir is None):
        raise CompileError("the end-to-end stage needs a retriever, or a knowledge base and the datasets folder")
    corpus = QA_CORPUS if language == "zh" else E2E_COLLECTION
    if needs_corpus and retriever is None and retriever_of is not None:
        retriever_of(knowledge_base(corpus))  # a missing retrieval.index is refused before any LM call
    out_dir = Path(out_dir)
    data_manifest = read_manifest(data_dir) if data_dir is not None else None  # refused before any LM call
    if data_dir is not None:
        splits_dir, loader = data_dir, loader or derived_loader(data_dir)
    loader = language_loader(loader or functools.partial(load_split, splits_dir=splits_dir), language)
    reporter = reporter or Reporter()
    generator, critic, adapter = lms
    critic_lm = critic or generator
    reflection_lm = reflection_lm_for(optimizer, generator, teacher_lm)

    program = SelfRAG(retriever if retriever is not None else NullRetriever(), config=settings.program,
                      generator_lm=generator, critic_lm=critic, adapter=adapter)
    if start_from is not None:
        load_state_into(program, Path(start_from))
    meter = UsageMeter()
    stages: list[StageReport] = []
    params: dict[str, Any] = {}
    start = time.perf_counter()
    for judgement in names:
        report, params = compile_judgement(program, judgement, loader=loader, optimizer=optimizer, train=train,
                                           dev=dev, budget=budget, num_threads=num_threads, critic_lm=critic_lm,
                                           adapter=adapter, reflection_lm=reflection_lm, reporter=reporter,
                                           meter=meter, seed=seed, teacher_lm=teacher_lm)
        stages.append(report)
    if e2e:
        if retriever is None:
            program.retriever = e2e_retriever(knowledge_base, Path(datasets_dir), reporter, corpus, retriever_of)
        keep = [STAGES[n].predictor for n in names]
        with dspy.context(lm=generator, adapter=adapter):
            report, e2e_params = compile_e2e(
                program, loader=loader, optimizer=optimizer,
                train=e2e_train if e2e_train is not None else min(train or 20, 20),
                dev=e2e_dev if e2e_dev is not None else min(dev if dev is not None else 10, 10), budget=budget,
                num_threads=num_threads, keep=keep, reflection_lm=reflection_lm, reporter=reporter, meter=meter,
                seed=seed, teacher_lm=teacher_lm)
        stages.append(report)
        params = params or e2e_params
    calibration = None
    if calibrate_sizes is not None:
        if runs_program and retriever is None and isinstance(program.retriever, NullRetriever):
            program.retriever = e2e_retriever(knowledge_base, Path(datasets_dir), reporter, corpus, retriever_of)
        sizes = {"stated": 24, "answer": 24, **calibrate_sizes}
        qa_n = max(sizes["stated"], sizes["answer"])  # the stated and answer stages share balanced qa_en examples
        answer_examples = (balanced_after(list(loader("qa_en", calibrate_split)), calibrate_skip, qa_n)
                           if qa_n else None)
        if qa_n and calibrate_skip and not answer_examples:
            raise CompileError(f"--cal-skip {calibrate_skip}: the {calibrate_split} split has no qa_en question "
                               "after those")
        with dspy.context(callbacks=[*dspy.settings.get("callbacks", []), meter]):  # the manifest's cost counts it
            calibration = calibrate(program, loader=loader, out_dir=out_dir / f"{name}.calibration",
                                    answer_objective=answer_objective, answer_examples=answer_examples,
                                    verified_precision=verified_precision, reporter=reporter,
                                    similarity_false_abstention=similarity_false_abstention, language=language,
                                    split=calibrate_split, stated_rows=stated_rows, check_prior=check_prior,
                                    **sizes)
    seconds = round(time.perf_counter() - start, 2)

    manifest = build_manifest(program, settings, optimizer=optimizer, budget=budget, params=params, stages=stages,
                              meter=meter, seconds=seconds, generator=generator, critic=critic,
                              reflection=reflection_lm, name=name, seed=seed, splits_dir=Path(splits_dir),
                              teacher=teacher_lm)
    manifest["language"] = language
    if calibration is not None:
        if calibrate_skip:
            calibration["qa_skipped"] = calibrate_skip
        fitted = set(calibration["stages"])  # this run's stages (before the start's are merged in below)
        sources = list(getattr(stated_rows, "sources", [])) if stated_rows is not None else []
        manifest["calibration"] = calibration
        manifest["thresholds"] = calibration["thresholds"]
    if start_from is not None:
        manifest["started_from"] = str(start_from)
        started = read_artifact(start_from)["manifest"]
        if not stages:  # calibrate only: the compiled state (and its measured scores) is the start's
            for key in ("scores", "stages", "optimizer"):
                if started.get(key):
                    manifest[key] = started[key]
        if calibration is not None:  # a stage not re-run keeps its report from the start (its threshold was kept)
            calibration["stages"] = {**kept_stages(started.get("calibration"), calibration["stages"]),
                                     **calibration["stages"]}
            calibration["split"] = joined_split(calibration["stages"], calibration["split"])
    if calibration is not None:
        earlier = (started.get("calibration") or {}).get("stated_rows_from") if start_from is not None else None
        named = stated_sources(calibration["stages"], fitted, sources, earlier)
        if named:
            calibration["stated_rows_from"] = named
    if data_manifest is not None:
        manifest["data"] = data_entry(data_dir, data_manifest)
    if "calibration" in manifest:
        manifest["calibration"] = relative_to(manifest["calibration"], Path(out_dir))
    return write_result(program, manifest, Path(out_dir), name, stages)


def stated_sources(stages: dict[str, Any], fitted: set[str], sources: list[str], earlier: Any) -> dict[str, Any]:
    """``stated_rows_from`` per stage: this run's ``--stated-rows`` manifests for the stated stages it fitted
    on them, and for the stages kept from the start (``--from``) what its manifest named — per stage, or,
    from an older manifest that kept one list for its run, that list for its stages fitted on recorded rows.
    (One list for the whole calibration would name this run's English manifests as the source of a Chinese
    stage carried over from the start.)"""
    named: dict[str, Any] = {}
    for stage, report in stages.items():
        if not isinstance(report, dict):
            continue
        if stage in fitted:
            if sources and "rows_from" in report:
                named[stage] = list(sources)
        elif isinstance(earlier, dict) and stage in earlier:
            named[stage] = earlier[stage]
        elif isinstance(earlier, list) and "rows_recorded" in report:
            named[stage] = list(earlier)
    return named


def kept_stages(started: Any, fitted: dict[str, Any]) -> dict[str, Any]:
    """The stage reports of the calibration a compile started from (``--from``) that this one did not
    re-run, each with the split it was fitted on (:func:`~optimize.gate_check.stage_split`: its own, else
    its calibration's — "unknown" for rows it pooled without saying from where)."""
    started = started if isinstance(started, dict) else {}
    earlier = started.get("stages") if isinstance(started.get("stages"), dict) else {}
    return {k: ({**v, "split": stage_split(started, v)} if isinstance(v, dict) else v)
            for k, v in earlier.items() if k not in fitted}


def data_entry(data_dir: Path | str, data_manifest: dict[str, Any]) -> dict[str, Any]:
    """What a compile manifest records of the derived data folder it compiled on."""
    return {"dir": str(data_dir), **{k: data_manifest.get(k) for k in (
        "format_version", "collection", "qa_file", "qa_sha256", "dataset_hash")}}


def write_result(program: Any, manifest: dict[str, Any], out_dir: Path, name: str,
                 stages: list[StageReport]) -> CompileResult:
    """Save ``<out_dir>/<name>.json`` (:func:`programs.artifacts.save_artifact`: its header names the
    program's class) and ``<out_dir>/<name>.manifest.json`` (the manifest as saved, with the content hash)."""
    artifact = save_artifact(program, out_dir / f"{name}.json", manifest)
    manifest = read_artifact(artifact)["manifest"]
    manifest_path = out_dir / f"{name}.manifest.json"
    manifest_path.write_text(json.dumps(manifest, ensure_ascii=False, indent=2, default=str) + "\n", encoding="utf-8")
    return CompileResult(program=program, manifest=manifest, artifact=artifact, manifest_path=manifest_path,
                         stages=stages)


def relative_to(report: Any, folder: Path) -> Any:
    """``report`` with every file path under ``folder`` (the plots) written relative to it, so a manifest
    names its plots the same on any machine (``<name>.calibration/reliability-stated.png``)."""
    if isinstance(report, dict):
        return {k: relative_to(v, folder) for k, v in report.items()}
    if isinstance(report, list):
        return [relative_to(v, folder) for v in report]
    if isinstance(report, str) and report.endswith(".png"):
        try:
            return str(Path(report).resolve().relative_to(folder.resolve()))
        except ValueError:  # a plot somewhere else: kept as written
            return report
    return report


def reflection_lm_for(optimizer: str, generator: Any, teacher_lm: Any = None) -> Any:
    """GEPA's reflection LM (the teacher when given, else the generator) with room for its long
    reflections; None for the other optimizers."""
    if optimizer != "gepa":
        return None
    reflector = teacher_lm or generator
    return reflector.copy(max_tokens=max(2048, int(reflector.kwargs.get("max_tokens") or 0)))
