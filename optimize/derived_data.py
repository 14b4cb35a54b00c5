"""A derived data folder (``selfrag data derive --out DIR``): its files, its manifest, and reading it back.

Layout: ``DIR/<task>/{train,dev}.jsonl`` for the tasks of :mod:`optimize.derive` and ``DIR/manifest.json``
(``format``, ``format_version``, the collection, the QA file's sha256, per file ``count`` and
``sha256``, ``dataset_hash``, label counts, provenance counts, skipped questions, parameters). The
folder is written to a temporary sibling and renamed into place at the end, so a failed derive leaves
nothing half-written (an existing derived folder at ``DIR`` is replaced only then).

:func:`derived_loader` is the ``(task, split) → examples`` loader compile and eval take: it refuses a
folder of another format version or whose files changed since they were written, and serves the
``qa`` task for ``qa_en`` / ``qa_zh`` (what the end-to-end and calibrate stages ask for).
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

import dspy

from optimize.derive import TASKS, Derived
from optimize.errors import DataError
from optimize.sources import read_jsonl, stable_hash
from optimize.splits import MANIFEST, SPLITS, TASK_INPUTS, dump_records, sha256_hex

FORMAT = "selfrag-derived-data"
FORMAT_VERSION = 1
INPUTS: dict[str, tuple[str, ...]] = {**{t: TASK_INPUTS[t] for t in TASKS if t in TASK_INPUTS},
                                      "answer": ("question", "passages"), "qa": ("question",)}
QA_ALIASES = {"qa_en": "qa", "qa_zh": "qa"}


def write_derived(derived: Derived, out_dir: str | Path, meta: dict[str, Any]) -> dict[str, Any]:
    """Write ``derived`` as a derived data folder at ``out_dir`` (temp folder, renamed at the end); ``meta``
    (collection, QA file, parameters) goes into the manifest. Returns the manifest."""
    out_dir = Path(out_dir)
    if out_dir.exists() and not (out_dir.is_dir() and (not any(out_dir.iterdir()) or _is_derived(out_dir))):
        raise DataError(f"--out {out_dir} exists and is not a derived data folder: choose another folder")
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_dir.parent / f".{out_dir.name}.tmp-{uuid.uuid4().hex[:8]}"
    try:
        files: dict[str, dict] = {}
        for task in TASKS:
            (tmp / task).mkdir(parents=True)
            for split in SPLITS:
                recs = sorted((r for r in derived.records[task] if derived.splits[r["group"]] == split),
                              key=lambda r: (stable_hash(r["group"]), r["id"]))
                data = dump_records(recs)
                (tmp / task / f"{split}.jsonl").write_bytes(data)
                files[f"{task}/{split}.jsonl"] = {"count": len(recs), "sha256": sha256_hex(data)}
        manifest = {
            "format": FORMAT, "format_version": FORMAT_VERSION, **meta,
            "dataset_hash": sha256_hex("".join(f"{k} {v['sha256']}\n" for k, v in sorted(files.items())).encode()),
            "files": dict(sorted(files.items())), "questions": derived.questions, "counts": derived.counts(),
            "provenance": derived.provenance(), "skipped": derived.skipped,
            "inputs": {t: list(v) for t, v in INPUTS.items()},
        }
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        old = None
        if out_dir.exists():
            old = out_dir.parent / f".{out_dir.name}.old-{uuid.uuid4().hex[:8]}"
            os.replace(out_dir, old)
        os.replace(tmp, out_dir)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return manifest


def _is_derived(folder: Path) -> bool:
    try:
        return json.loads((folder / MANIFEST).read_text(encoding="utf-8")).get("format") == FORMAT
    except (OSError, json.JSONDecodeError, AttributeError):
        return False


def read_manifest(folder: str | Path) -> dict[str, Any]:
    """The manifest of a derived data folder of this format version, its files unchanged; else a
    :class:`DataError` saying what is wrong."""
    folder = Path(folder)
    path = folder / MANIFEST
    if not folder.is_dir():
        raise DataError(f"derived data folder not found: {folder}")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        raise DataError(f"{folder} is not a derived data folder (no readable {MANIFEST}): "
                        "make one with `selfrag data derive`") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise DataError(f"{folder} is not a derived data folder (its {MANIFEST} is not from `selfrag data derive`)")
    if manifest.get("format_version") != FORMAT_VERSION:
        raise DataError(f"{folder} was derived in format version {manifest.get('format_version')!r}; this selfrag "
                        f"reads version {FORMAT_VERSION}: derive it again with `selfrag data derive`")
    for rel, meta in manifest.get("files", {}).items():
        data = (folder / rel).read_bytes() if (folder / rel).is_file() else None
        if data is None or sha256_hex(data) != meta.get("sha256"):
            raise DataError(f"{folder / rel} {'is missing' if data is None else 'changed'} since it was derived: "
                            "derive the folder again")
    return manifest


def load_derived(task: str, split: str, folder: str | Path) -> list[dspy.Example]:
    """Examples of ``task`` (``qa_en`` / ``qa_zh`` read ``qa``) from a derived folder (not re-verified)."""
    task = QA_ALIASES.get(task, task)
    if task not in INPUTS:
        raise DataError(f"unknown task {task!r}; a derived folder has {', '.join(INPUTS)}")
    if split not in SPLITS:
        raise DataError(f"unknown split {split!r}; expected one of {SPLITS}")
    return [dspy.Example(**r).with_inputs(*INPUTS[task]) for r in read_jsonl(Path(folder) / task / f"{split}.jsonl")]


def derived_loader(folder: str | Path):
    """``(task, split) → examples`` over a derived folder, checked once (:func:`read_manifest`)."""
    read_manifest(folder)

    def loader(task: str, split: str) -> list[dspy.Example]:
        return load_derived(task, split, folder)

    return loader
