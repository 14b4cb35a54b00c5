"""Dev-set evaluation of SelfRAG against baselines, from a program list to the report files.

:func:`evaluate` builds (or reuses) the ``eval-<corpus>`` knowledge base through the factory it is
given, builds each program of the list from the registry (:mod:`programs.registry`; a
``compiled:PATH`` entry gets the artifact's state), runs them into ``<reports>/<run-id>/results.jsonl``
(:mod:`optimize.eval_runs`, resuming an interrupted run), and writes ``summary.json``, ``summary.md``
and the plot (:mod:`optimize.eval_summary`, :mod:`optimize.eval_reports`). The command line
(``selfrag eval``) builds the LMs, the web search, the knowledge-base factory, the retriever and a
strategy program's components (``components_of``: what ``selfrag ask`` builds it with) through
``selfrag.wiring`` and passes the datasets and splits folders.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import dspy

from optimize import sources
from optimize.errors import DataError
from optimize.eval_examples import (balanced, corpus_name, ensure_corpus, example_id, load_examples,
                                     unanswerable_share)
from optimize.eval_calibration import calibration_markdown, calibration_summary, write_coverage_plot
from optimize.eval_reports import SUMMARY_MD, write_reports
from optimize.eval_runs import SemanticF1Judge, run_eval
from optimize.eval_summary import summarize
from optimize.progress import Reporter
from optimize.qa_format import Catalog, with_gold_refs
from optimize.splits import load_split
from programs.artifacts import ArtifactError, content_hash, load_state_into, read_artifact
from programs.registry import ProgramSpec
from programs.strategy_retrieval import StrategyRetrieval

CONFIG = "config.json"
SUMMARY_PROGRAM_SETTINGS = ("k", "max_candidates", "max_rewrites", "max_web_rounds", "max_regenerations",
                            "passage_chars", "retrieve_mode")


def build_program(spec: ProgramSpec, retriever: Any, *, web_search: Any = None, config: Any = None,
                  generator_lm: Any = None, critic_lm: Any = None, adapter: Any = None,
                  logprobs: bool = False, components: Mapping[str, Any] | None = None,
                  strict: bool = False) -> dspy.Module:
    """The program of one registry entry; a ``compiled:PATH`` entry gets the artifact's state loaded
    (raises :class:`programs.artifacts.ArtifactError` for an unusable artifact; ``strict``: also for
    one whose content hash does not match). A program with retrieval strategies (``StrategyRetrieval``)
    also gets ``logprobs`` (``lm.logprobs``: its rerank ``judge`` / ``auto`` then scores with its own
    relevance judgement) and ``components`` (what its settings need, e.g. ``metadata_schema`` for
    ``self_query``; a ``retriever`` there replaces ``retriever``, e.g. one over routed collections);
    other programs are built from ``retriever`` alone."""
    extra: dict[str, Any] = {"retriever": retriever}
    if issubclass(spec.cls, StrategyRetrieval):
        extra.update({**(components or {}), "logprobs": logprobs})
    program = spec.cls(web_search=web_search, config=config, generator_lm=generator_lm, critic_lm=critic_lm,
                       adapter=adapter, **extra)
    if spec.artifact is not None:
        load_state_into(program, spec.artifact, strict=strict)
    try:  # CRAG: a threshold set in the settings against the other one the artifact (or the default) holds
        getattr(program, "check_crag_settings", lambda: None)()
    except ValueError as exc:
        raise ArtifactError(f"{spec.label}: program settings: {exc}") from None
    return program


QA_STAGES = ("similarity", "stated", "answer")  # the calibrate stages that read the qa questions
DATASET_LANGUAGE = {"clapnq": "en", "cmrc": "zh"}  # the bundled datasets an eval reads the dev split of


def fitted_splits(manifest: dict[str, Any]) -> set[tuple[str, str]]:
    """(language, split) of the qa questions whose rows fitted a compiled artifact's thresholds, as its
    manifest's calibration stages record them (each stage's ``row_splits`` or ``split``, its language from
    its key ``stage@EMBEDDER@LANG``, its ``language`` or the run's); empty for a manifest whose stages do
    not record their split (older ones: their calibration's ``split`` was the run's ``--cal-split``, whatever
    split pooled rows came from)."""
    calibration = manifest.get("calibration")
    stages = calibration.get("stages") if isinstance(calibration, dict) else None
    out: set[tuple[str, str]] = set()
    for name, report in (stages if isinstance(stages, dict) else {}).items():
        base, _, key = name.partition("@")
        if base not in QA_STAGES or not isinstance(report, dict):
            continue
        language = key.partition("@")[2] or report.get("language") or manifest.get("language") or "en"
        splits = report.get("row_splits") if isinstance(report.get("row_splits"), dict) else [report.get("split")]
        out |= {(str(language), part) for split in splits if isinstance(split, str) for part in split.split("+")}
    return out


def in_sample_warnings(dataset: str, programs: Sequence[ProgramSpec]) -> list[str]:
    """One line per ``compiled:PATH`` program whose thresholds were fitted on rows of the questions an eval
    on ``dataset`` scores — the dev split of ``clapnq`` / ``cmrc`` (:func:`fitted_splits`); none for a QA file
    or a derived folder, an artifact compiled on a derived folder (``--data``) or an unreadable one (refused
    when it is built)."""
    language = DATASET_LANGUAGE.get(dataset)
    out = []
    for spec in programs if language is not None else ():
        try:
            manifest = read_artifact(spec.artifact)["manifest"] if spec.artifact is not None else None
        except ArtifactError:
            continue
        if isinstance(manifest, dict) and not manifest.get("data") and (language, "dev") in fitted_splits(manifest):
            split = (manifest.get("calibration") or {}).get("split")
            out.append(f"{spec.label}: its thresholds were fitted on {dataset} dev questions (calibration split "
                       f"{split!r}): its scores on them are in-sample")
    return out


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S")


_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def check_run_id(run_id: str) -> str:
    """``run_id`` when it is a plain folder name (letters, digits, ``.``, ``_``, ``-``; no path, no ``..``),
    so ``<reports>/<run-id>`` stays inside the reports folder; DataError otherwise."""
    if not isinstance(run_id, str) or not _RUN_ID.match(run_id) or ".." in run_id:
        raise DataError(f"invalid run id {run_id!r}: use 1-128 letters, digits, '.', '_' or '-' "
                        "(a folder name under the reports folder, not a path)")
    return run_id


def _shaping(settings: Any, dataset: str) -> dict[str, Any]:
    """What makes a run's results comparable: a resumed run must have the same."""
    lm = settings.lm
    return {"dataset": dataset, "profile": lm.profile, "model": lm.model,
            "lm": {"critic_model": lm.critic_model, "api_base": lm.api_base, "temperature": lm.temperature,
                   "max_tokens": lm.max_tokens, "adapter": lm.adapter, "logprobs": lm.logprobs},
            "program_settings": settings.program.model_dump(mode="json"),
            "retrieval": settings.retrieval.model_dump(mode="json"),
            "web": settings.web.backend}


def artifact_hashes(programs: Sequence[ProgramSpec]) -> dict[str, str]:
    """The content hash (:func:`programs.artifacts.content_hash`: its state and thresholds, what the
    results depend on) of each ``compiled:PATH`` program's artifact, by label."""
    return {spec.label: content_hash(read_artifact(spec.artifact)) for spec in programs if spec.artifact is not None}


def _changed_artifacts(config: dict[str, Any], artifacts: dict[str, str], run_id: str) -> None:
    """Refuse (DataError) a resume whose ``compiled:PATH`` program's artifact is not the one the run
    recorded: its old rows would be mixed with the new artifact's."""
    recorded = config.get("artifacts") if isinstance(config.get("artifacts"), dict) else {}
    for label, sha in artifacts.items():
        if label in recorded and recorded[label] != sha:
            raise DataError(f"run {run_id}: {label} changed since the run started (content "
                            f"{str(recorded[label])[:12]} → {sha[:12]}): its results would mix two artifacts; "
                            "start a new run with another --run-id")


def _differences(old: Any, new: Any, prefix: str = "") -> list[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for key in sorted(set(old) | set(new), key=str):
            if key in old and key in new:
                out += _differences(old[key], new[key], f"{prefix}{key}.")
            elif key in new and new[key] is not None:  # a key the old run did not record: not comparable
                continue
        return out
    return [] if old == new else [f"{prefix.rstrip('.')}: {old!r} → {new!r}"]


def _run_config(settings: Any, dataset: str, labels: list[str], limit: int | None, run_id: str,
                examples: list[Any], config_path: Path,
                artifacts: dict[str, str] | None = None) -> tuple[dict[str, Any], list[Any]]:
    """The run's config and examples: a new run takes ``balanced(examples, limit)``; a resumed one
    (its config exists) the questions it started with, and adds the new programs to its list.
    ``artifacts``: the content hash of each compiled program's artifact (:func:`artifact_hashes`), recorded.

    A resume is refused (DataError saying which) when its dataset, ``limit`` (None = the run's), LM,
    program, retrieval or web settings differ from the run's, or a compiled program's artifact changed
    (:func:`_changed_artifacts`): its old results would be relabelled."""
    artifacts = artifacts or {}
    # the corpus the questions are answered from: a resume under code that picks another one is refused
    shaping = {**_shaping(settings, dataset), "corpus": corpus_name(dataset, examples)}
    if config_path.is_file():
        try:
            config = json.loads(config_path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise DataError(f"run {run_id}: its {config_path} is unreadable ({exc}); use another --run-id") from None
        if not isinstance(config, dict) or not isinstance(config.get("example_ids"), list):
            raise DataError(f"run {run_id}: {config_path} is not a run config; use another --run-id")
        diffs = _differences({k: config[k] for k in shaping if k in config}, shaping)
        if limit is not None and limit != config.get("limit"):
            diffs.append(f"limit: {config.get('limit')!r} → {limit!r}")
        if diffs:
            raise DataError(f"run {run_id} was started with other settings ({'; '.join(diffs)}); resume it with "
                            "the same ones, or start a new run with another --run-id")
        by_id = {example_id(e): e for e in examples}
        missing = [i for i in config["example_ids"] if i not in by_id]
        if missing:
            raise DataError(f"run {run_id}: {len(missing)} example(s) of the run are not in {dataset}")
        _changed_artifacts(config, artifacts, run_id)
        config["programs"] = list(dict.fromkeys([*config.get("programs", []), *labels]))
        if artifacts:
            config["artifacts"] = {**(config.get("artifacts") if isinstance(config.get("artifacts"), dict) else {}),
                                   **artifacts}
        return config, [by_id[i] for i in config["example_ids"]]
    examples = balanced(examples, limit, unanswerable_share(dataset))
    config = {"run_id": run_id, "programs": labels, "limit": limit,
              "example_ids": [example_id(e) for e in examples], "started": time.strftime("%Y-%m-%d %H:%M:%S"),
              **shaping, **({"artifacts": artifacts} if artifacts else {})}
    return config, examples


def evaluate(settings: Any, dataset: str, programs: Sequence[ProgramSpec], *, lms: tuple,
             knowledge_base: Callable[[str], Any], datasets_dir: Path | str, splits_dir: Path | str,
             web_search: Any = None, limit: int | None = None, run_id: str | None = None,
             reports_dir: Path | str = "reports", support_limit: int = 0, semantic_f1: bool = False,
             reporter: Reporter | None = None, ingest_progress: bool = False, strict: bool = False,
             on_row: Callable[[dict[str, Any]], None] | None = None,
             collection: str | None = None,
             retriever_of: Callable[[Any], Any] | None = None,
             components_of: Callable[[Any, Any], Mapping[str, Any]] | None = None,
             fresh_start: Callable[[], None] | None = None) -> tuple[Path, dict[str, Any]]:
    """Run ``programs`` on ``dataset`` (resuming ``run_id`` when its folder exists: the examples are the
    ones the run started with) and write the reports. Returns ``(out_dir, summary)``.

    Args:
        settings: resolved settings (``settings.program`` configures every program; ``settings.lm`` and
            ``settings.retrieval`` are recorded in the run's config).
        dataset: ``clapnq`` | ``cmrc`` | path of a JSONL file of QA records.
        programs: parsed program list (:func:`programs.registry.parse_programs`).
        lms: ``(generator, critic, adapter)``; ``critic`` may be None.
        knowledge_base: collection name → knowledge base (``is_empty``, ``store``, ``add_documents``,
            ``retriever``, ``name``); the run uses ``eval-<corpus>``.
        datasets_dir / splits_dir: the public datasets (the corpus) and the derived splits (dev questions).
        web_search: the programs' web fallback (None = no web).
        run_id: a folder name (:func:`check_run_id`); a resume must use the run's settings and the
            same artifacts (:func:`_run_config` refuses it otherwise, naming the differences).
        strict: refuse a ``compiled:`` artifact whose content hash does not match.
        collection: answer from this existing collection (the user's own) instead of ``eval-<corpus>``;
            gold documents are matched by doc id or source (:func:`optimize.qa_format.with_gold_refs`).
        retriever_of: knowledge base → the retriever the programs answer from (``selfrag eval`` passes
            ``selfrag.wiring.build_retriever``: the chunks, or the index in ``retrieval.index``);
            None = the knowledge base's own retriever.
        components_of: (knowledge base, its retriever) → the components a program with retrieval
            strategies takes (:func:`build_program`; ``selfrag eval`` passes
            ``selfrag.wiring.strategy_components``, what ``selfrag ask`` builds it with: the metadata
            schema for ``self_query``, the described collections for ``route_collections``); called
            once, when such a program is in the list. None = those programs get the retriever only.
        fresh_start: called before each (program, question) is run (``selfrag eval`` passes
            :func:`selfrag.lm.factory.forget_prompts` of its LMs), so each question is timed from a cold
            prompt cache, as a fresh ``selfrag ask`` process would run it.

    Every program is built (its artifact checked) before the run's folder or the knowledge base is
    written, but one with retrieval strategies when ``components_of`` is given: its components are read
    from the collection (its metadata schema), so it is built once the corpus is in it, still before the
    run's folder is written.
    """
    labels = [spec.label for spec in programs]
    run_id = check_run_id(run_id) if run_id is not None else new_run_id()
    out_dir = Path(reports_dir) / run_id
    config_path = out_dir / CONFIG
    config, examples = _run_config(settings, dataset, labels, limit, run_id, load_examples(dataset, splits_dir),
                                   config_path, artifact_hashes(programs))
    corpus = None
    if collection is not None:  # the user's own collection: nothing is ingested, gold matched by id or source
        kb = knowledge_base(collection)
        examples = with_gold_refs(examples, Catalog.from_chunks(
            (cid, meta) for cid, _, meta in kb.store.iter_all(include_sources_only=True)), collection)
    else:
        corpus = corpus_name(dataset, examples)
        kb = knowledge_base(f"eval-{corpus}")
    retriever = retriever_of(kb) if retriever_of is not None else kb.retriever()
    generator, critic, adapter = lms

    def build(spec: ProgramSpec, components: Mapping[str, Any] | None = None) -> dspy.Module:
        return build_program(spec, retriever, web_search=web_search, config=settings.program, generator_lm=generator,
                             critic_lm=critic, adapter=adapter, logprobs=settings.lm.logprobs,
                             components=components, strict=strict)

    later = [s for s in programs if components_of is not None and issubclass(s.cls, StrategyRetrieval)]
    built = {spec.label: build(spec) for spec in programs if spec not in later}
    added = 0 if corpus is None else ensure_corpus(kb, sources.corpus_documents(corpus, Path(datasets_dir)),
                                                   progress=ingest_progress)
    if later:
        components = components_of(kb, retriever)
        built.update({spec.label: build(spec, components) for spec in later})
        built = {label: built[label] for label in labels}

    out_dir.mkdir(parents=True, exist_ok=True)
    config_path.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    support_task = "support_zh" if (corpus or "").startswith("cmrc") else "support"
    support_examples = load_split(support_task, "dev", splits_dir)[:support_limit] if support_limit else []
    judge = SemanticF1Judge(critic or generator, adapter) if semantic_f1 else None
    rows = run_eval(built, examples, out_dir, support_examples=support_examples, semantic_f1=judge,
                    reporter=reporter, on_row=on_row, fresh_start=fresh_start)
    meta = {"run_id": run_id, "dataset": dataset, "examples": len(examples), "profile": settings.lm.profile,
            "model": settings.lm.model,
            "program_settings": {k: v for k, v in settings.program.model_dump().items()
                                 if k in SUMMARY_PROGRAM_SETTINGS},
            "collection": kb.name, "corpus_added": added, "started": config["started"],
            "finished": time.strftime("%Y-%m-%d %H:%M:%S")}
    summary = summarize(rows, labels, meta)
    summary["calibration"] = calibration_summary(rows, labels)
    write_reports(out_dir, summary)
    write_coverage_plot(summary["calibration"], out_dir)
    with open(Path(out_dir) / SUMMARY_MD, "a", encoding="utf-8") as fh:
        fh.write(calibration_markdown(summary["calibration"]))
    return out_dir, summary
