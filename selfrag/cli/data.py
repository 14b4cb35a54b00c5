"""``selfrag data``: the labelled data the judgements are compiled and evaluated on.

``data build`` derives ``data/splits/`` (train/dev files per task and their manifest) from the public
datasets; ``data verify`` checks the files against the manifest. Folders come from
:mod:`selfrag.paths` unless given.

Your own data: ``data check QA.jsonl`` validates a QA file (:mod:`optimize.qa_format`); ``data derive
QA.jsonl --collection NAME --out DIR`` builds the judgement sets from it with the collection's retriever
(``wiring.build_retriever``: the chunks, or the index in ``retrieval.index`` / ``--index``, as ``ask``
and ``eval`` retrieve; :mod:`optimize.derive`, written by :mod:`optimize.derived_data`).
:func:`open_collection` and :func:`collection_catalog` are shared with ``compile --data`` and ``eval
--collection``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.table import Table

from selfrag import paths
from selfrag.cli.common import ConfigOpt, IndexOpt, console, fail, plain, settings_from

if TYPE_CHECKING:  # pragma: no cover
    from selfrag.kb.knowledge_base import KnowledgeBase
    from selfrag.settings import Settings

data_app = typer.Typer(no_args_is_help=True, help="The labelled data: build and verify the train/dev splits; "
                                                   "check a QA file and derive judgement sets from it.")


@data_app.command("build")
def build(
    datasets: Annotated[Optional[Path], typer.Option(
        "--datasets", help="The public datasets folder (default: $SELFRAG_DATASETS or ../shared/datasets).")] = None,
    out: Annotated[Optional[Path], typer.Option("--out", help="Where the splits go (default: data/splits).")] = None,
    limit: Annotated[Optional[int], typer.Option(
        "--limit", min=1, help="Sample this many items per source file (a quick, smaller build).")] = None,
    tasks: Annotated[Optional[str], typer.Option(
        "--tasks", help="Rebuild only these tasks (comma list, e.g. qa_zh,relevance_zh), keeping the other "
                        "files of the existing manifest.")] = None,
    config: ConfigOpt = None,
) -> None:
    """Build the train/dev split files of every task and their manifest (a few minutes on CPU)."""
    settings_from(config, {})  # a bad settings file is refused here too
    from optimize.errors import OptimizeError
    from optimize.sources import RETRIEVE_FILE
    from optimize.splits import build_splits

    datasets = datasets or paths.datasets_dir()
    if not datasets.is_dir():
        fail(f"datasets folder not found: {datasets} (pass --datasets or set {paths.DATASETS_ENV})", 2)
    out = out or paths.splits_dir()
    try:
        with console.status(plain(f"Building the splits from {datasets}…"), spinner="dots"):
            manifest = build_splits(datasets, out, paths.data_dir() / RETRIEVE_FILE, limit=limit,
                                    tasks=[t.strip() for t in tasks.split(",") if t.strip()] if tasks else None)
    except OptimizeError as exc:
        fail(str(exc), 2)
    table = Table(title=plain(f"splits in {out}"))
    table.add_column("file")
    table.add_column("examples", justify="right")
    table.add_column("sha256")
    for rel, meta in manifest["files"].items():
        table.add_row(rel, str(meta["count"]), meta["sha256"][:12])
    console.print(table)
    console.print(f"dataset_hash {manifest['dataset_hash']}")


@data_app.command("verify")
def verify(
    splits: Annotated[Optional[Path], typer.Option("--splits", help="The splits folder (default: data/splits).")]
    = None,
    config: ConfigOpt = None,
) -> None:
    """Check the split files against their manifest (exit 1 on a mismatch)."""
    settings_from(config, {})
    from optimize.errors import OptimizeError
    from optimize.splits import verify_manifest

    try:
        bad = verify_manifest(splits or paths.splits_dir())
    except OptimizeError as exc:
        fail(str(exc), 2)
    if bad:
        fail("mismatch: " + ", ".join(bad), 1)
    console.print("ok")


# ---------------------------------------------------------------- your own data


def open_collection(settings: Settings, name: str) -> KnowledgeBase:
    """The knowledge base of an existing, non-empty collection (nothing is created); else a one-line
    error naming the collections there are."""
    from selfrag import wiring
    from selfrag.kb.factory import list_collections

    present = dict(list_collections(settings.kb))
    if not present.get(name):
        known = ", ".join(n for n, c in present.items() if c) or "none"
        fail(f"unknown or empty collection {name!r} (collections: {known}); ingest your documents with "
             f"`selfrag ingest PATH --collection {name}`", 2)
    return wiring.build_knowledge_base(settings, collection=name)


def collection_catalog(kb: KnowledgeBase) -> Any:
    """What ``kb`` holds by passage id, doc id and source (:class:`optimize.qa_format.Catalog`)."""
    from optimize.qa_format import Catalog

    return Catalog.from_chunks((cid, meta) for cid, _, meta in kb.store.iter_all(include_sources_only=True))


@data_app.command("check")
def check(
    qa_file: Annotated[Path, typer.Argument(help="QA file: JSON lines with question, answers (list), optional "
                                                 "gold_doc_ids, gold_sources, language, id.")],
    config: ConfigOpt = None,
) -> None:
    """Validate a QA file: counts, and every bad line with its number and reason (exit 1 if any)."""
    settings_from(config, {})  # a bad settings file is refused here too
    from optimize.errors import OptimizeError
    from optimize.qa_format import check_qa_file

    try:
        result = check_qa_file(qa_file)
    except OptimizeError as exc:
        fail(str(exc), 2)
    for problem in result.problems:
        console.print(plain(f"{qa_file}:{problem.line}: {problem.reason}"), highlight=False)
    n = len(result.items)
    console.print(f"{result.lines} line(s): {n} usable ({result.answerable} answerable, {n - result.answerable} "
                  f"unanswerable, {result.with_gold} with gold documents), {len(result.problems)} bad")
    fatal = result.fatal()
    if fatal:
        fail(fatal, 1)
    if result.problems:
        fail(f"{len(result.problems)} bad line(s): fix them (derive, compile and eval refuse this file)", 1)
    console.print("ok")


@data_app.command("derive")
def derive(
    qa_file: Annotated[Path, typer.Argument(help="QA file (see `selfrag data check`).")],
    collection: Annotated[str, typer.Option("--collection", help="The collection the questions are about.")],
    out: Annotated[Path, typer.Option("--out", help="The derived data folder to write (replaced if it is one).")],
    k: Annotated[int, typer.Option("--k", min=2, help="Passages retrieved per question (hard-negative pool).")] = 8,
    index: IndexOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Derive labelled sets for every judgement and the answer from QA pairs and their collection."""
    from optimize.derive import derive_records
    from optimize.derived_data import write_derived
    from optimize.errors import OptimizeError
    from optimize.qa_format import load_qa_file
    from optimize.records import MAX_PASSAGE_CHARS
    from optimize.sources import RETRIEVE_FILE, read_retrieve_file
    from optimize.splits import sha256_hex
    from selfrag import wiring

    settings = settings_from(config, {"retrieval": {"index": index}})
    try:
        items = load_qa_file(qa_file, need_answerable=True)
    except OptimizeError as exc:
        fail(str(exc), 2)
    kb = open_collection(settings, collection)
    retriever = wiring.build_retriever(settings, kb)  # no such index: one line, exit 2, nothing written
    try:
        status = plain(f"Deriving labelled sets from {len(items)} questions over {collection!r}…")
        with console.status(status, spinner="dots"):
            derived = derive_records(items, retriever, collection_catalog(kb),
                                     read_retrieve_file(paths.data_dir() / RETRIEVE_FILE), k=k,
                                     collection=f"collection {collection!r}")
            meta = {"collection": collection, "qa_file": str(qa_file), "qa_sha256": sha256_hex(qa_file.read_bytes()),
                    "params": {"k": k, "max_passage_chars": MAX_PASSAGE_CHARS,
                               "retrieval": settings.retrieval.model_dump(mode="json"),
                               "embedder": kb.embedder.name}}
            manifest = write_derived(derived, out, meta)
    except OptimizeError as exc:
        fail(str(exc), 2)
    over = "" if settings.retrieval.index == "none" else f" ({settings.retrieval.index} index)"
    table = Table(title=plain(f"derived from {qa_file} over {collection!r}{over} → {out}"))
    for col in ("task", "train", "dev", "made by"):
        table.add_column(col)
    for task, per in manifest["counts"].items():
        table.add_row(task, *(" ".join(f"{lab}:{c}" for lab, c in per[s].items()) or "-" for s in ("train", "dev")),
                      " ".join(f"{how}:{c}" for how, c in manifest["provenance"][task].items()))
    console.print(table)
    skipped = manifest["skipped"]
    for s in skipped[:10]:
        console.print(plain(f"skipped line {s['line']} ({s['id']}): {s['reason']}"), highlight=False)
    if len(skipped) > 10:
        console.print(plain(f"… and {len(skipped) - 10} more skipped question(s): "
                            f"see {out / 'manifest.json'}"))
    console.print(f"dataset_hash {manifest['dataset_hash']}")


def register(app: typer.Typer) -> None:
    app.add_typer(data_app, name="data")
