"""Dev-set evaluation of SelfRAG against baselines, from a program list to the report files.

:func:`evaluate` builds (or reuses) the ``eval-<corpus>`` knowledge base through the factory it is
given, builds each program of the list from the registry (:mod:`programs.registry`; a
``compiled:PATH`` entry gets the artifact's state), runs them into ``<reports>/<run-id>/results.jsonl``
(:mod:`optimize.eval_runs`, resuming an interrupted run), and writes ``summary.json``, ``summary.md``
and the plot (:mod:`optimize.eval_summary`, :mod:`optimize.eval_reports`). The command line
(``selfrag eval``) builds the LMs, the web search and the knowledge-base factory through
``selfrag.wiring`` and passes the datasets and splits folders.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import dspy

from optimize import sources
from optimize.errors import DataError
from optimize.eval_examples import balanced, corpus_name, ensure_corpus, example_id, load_examples
from optimize.eval_reports import write_reports
from optimize.eval_runs import SemanticF1Judge, run_eval
from optimize.eval_summary import summarize
from optimize.progress import Reporter
from optimize.qa_format import Catalog, with_gold_refs
from optimize.splits import load_split
from programs.artifacts import load_state_into
from programs.registry import ProgramSpec

CONFIG = "config.json"
SUMMARY_PROGRAM_SETTINGS = ("k", "max_candidates", "max_rewrites", "max_web_rounds", "max_regenerations",
                            "passage_chars", "retrieve_mode")


def build_program(spec: ProgramSpec, retriever: Any, *, web_search: Any = None, config: Any = None,
                  generator_lm: Any = None, critic_lm: Any = None, adapter: Any = None) -> dspy.Module:
    """The program of one registry entry; a ``compiled:PATH`` entry gets the artifact's state loaded
    (raises :class:`programs.artifacts.ArtifactError` for an unusable artifact)."""
    program = spec.cls(retriever, web_search=web_search, config=config, generator_lm=generator_lm,
                       critic_lm=critic_lm, adapter=adapter)
    if spec.artifact is not None:
        load_state_into(program, spec.artifact)
    return program


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S")


def _run_config(settings: Any, dataset: str, labels: list[str], limit: int | None, run_id: str,
                examples: list[Any], config_path: Path) -> tuple[dict[str, Any], list[Any]]:
    """The run's config and examples: a new run takes ``balanced(examples, limit)``; a resumed one
    (its config exists) the questions it started with, and adds the new programs to its list."""
    if config_path.is_file():
        config = json.loads(config_path.read_text(encoding="utf-8"))
        by_id = {example_id(e): e for e in examples}
        missing = [i for i in config["example_ids"] if i not in by_id]
        if missing:
            raise DataError(f"run {run_id}: {len(missing)} example(s) of the run are not in {dataset}")
        config["programs"] = list(dict.fromkeys([*config.get("programs", []), *labels]))
        return config, [by_id[i] for i in config["example_ids"]]
    examples = balanced(examples, limit)
    config = {"run_id": run_id, "dataset": dataset, "programs": labels, "limit": limit,
              "example_ids": [example_id(e) for e in examples], "started": time.strftime("%Y-%m-%d %H:%M:%S"),
              "profile": settings.lm.profile, "model": settings.lm.model,
              "program_settings": settings.program.model_dump(mode="json"),
              "retrieval": settings.retrieval.model_dump(mode="json")}
    return config, examples


def evaluate(settings: Any, dataset: str, programs: Sequence[ProgramSpec], *, lms: tuple,
             knowledge_base: Callable[[str], Any], datasets_dir: Path | str, splits_dir: Path | str,
             web_search: Any = None, limit: int | None = None, run_id: str | None = None,
             reports_dir: Path | str = "reports", support_limit: int = 0, semantic_f1: bool = False,
             reporter: Reporter | None = None, ingest_progress: bool = False,
             on_row: Callable[[dict[str, Any]], None] | None = None,
             collection: str | None = None) -> tuple[Path, dict[str, Any]]:
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
        collection: answer from this existing collection (the user's own) instead of ``eval-<corpus>``;
            gold documents are matched by doc id or source (:func:`optimize.qa_format.with_gold_refs`).
    """
    labels = [spec.label for spec in programs]
    run_id = run_id or new_run_id()
    out_dir = Path(reports_dir) / run_id
    config_path = out_dir / CONFIG
    config, examples = _run_config(settings, dataset, labels, limit, run_id, load_examples(dataset, splits_dir),
                                   config_path)
    out_dir.mkdir(parents=True, exist_ok=True)
    config_path.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")

    if collection is not None:  # the user's own collection: nothing is ingested, gold matched by id or source
        kb, added = knowledge_base(collection), 0
        examples = with_gold_refs(examples, Catalog.from_chunks(
            (cid, meta) for cid, _, meta in kb.store.iter_all(include_sources_only=True)), collection)
    else:
        corpus = corpus_name(dataset, examples)
        kb = knowledge_base(f"eval-{corpus}")
        added = ensure_corpus(kb, sources.corpus_documents(corpus, Path(datasets_dir)), progress=ingest_progress)
    retriever = kb.retriever()
    generator, critic, adapter = lms
    built = {spec.label: build_program(spec, retriever, web_search=web_search, config=settings.program,
                                       generator_lm=generator, critic_lm=critic, adapter=adapter)
             for spec in programs}
    support_examples = load_split("support", "dev", splits_dir)[:support_limit] if support_limit else []
    judge = SemanticF1Judge(critic or generator, adapter) if semantic_f1 else None
    rows = run_eval(built, examples, out_dir, support_examples=support_examples, semantic_f1=judge,
                    reporter=reporter, on_row=on_row)
    meta = {"run_id": run_id, "dataset": dataset, "examples": len(examples), "profile": settings.lm.profile,
            "model": settings.lm.model,
            "program_settings": {k: v for k, v in settings.program.model_dump().items()
                                 if k in SUMMARY_PROGRAM_SETTINGS},
            "collection": kb.name, "corpus_added": added, "started": config["started"],
            "finished": time.strftime("%Y-%m-%d %H:%M:%S")}
    summary = summarize(rows, labels, meta)
    write_reports(out_dir, summary)
    return out_dir, summary
