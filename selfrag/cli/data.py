"""``selfrag data``: the labelled data the judgements are compiled and evaluated on.

``data build`` derives ``data/splits/`` (train/dev files per task and their manifest) from the public
datasets; ``data verify`` checks the files against the manifest. Folders come from
:mod:`selfrag.paths` unless given.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from selfrag import paths
from selfrag.cli.common import ConfigOpt, console, fail, settings_from

data_app = typer.Typer(no_args_is_help=True, help="The labelled data: build and verify the train/dev splits.")


@data_app.command("build")
def build(
    datasets: Annotated[Optional[Path], typer.Option(
        "--datasets", help="The public datasets folder (default: $SELFRAG_DATASETS or ../shared/datasets).")] = None,
    out: Annotated[Optional[Path], typer.Option("--out", help="Where the splits go (default: data/splits).")] = None,
    limit: Annotated[Optional[int], typer.Option(
        "--limit", min=1, help="Sample this many items per source file (a quick, smaller build).")] = None,
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
        with console.status(f"Building the splits from {datasets}…", spinner="dots"):
            manifest = build_splits(datasets, out, paths.data_dir() / RETRIEVE_FILE, limit=limit)
    except OptimizeError as exc:
        fail(str(exc), 2)
    table = Table(title=f"splits in {out}")
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


def register(app: typer.Typer) -> None:
    app.add_typer(data_app, name="data")
