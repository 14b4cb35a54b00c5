"""Uploaded documents → the knowledge base, under a source name that does not depend on the worker.

An upload is parsed by the same loaders as ``selfrag ingest`` (so the same file types), from a private
temporary file; its chunks are stored under the source ``upload:<file name>``, so re-uploading a file
replaces its chunks (unchanged chunks are kept), and any worker sharing the store can delete it. An
upload that yields no chunks (empty, corrupt, unparseable) replaces nothing: the earlier version stays.
"""

from __future__ import annotations

import dataclasses
import re
import tempfile
import time
from pathlib import Path
from typing import Any

from selfrag.kb.ingest import IngestReport, chunk_documents, write_chunks
from selfrag.kb.knowledge_base import KnowledgeBase
from selfrag.kb.loaders import Skipped, load_paths
from selfrag.service.errors import ServiceError

UPLOAD_PREFIX = "upload:"
_UNSAFE = re.compile(r"[^\w. -]+")  # letters and digits of any script, . _ - and space


def safe_filename(name: str | None) -> str:
    """The base name of an uploaded file, reduced to a safe character set (no directories)."""
    base = Path((name or "").replace("\\", "/")).name
    cleaned = _UNSAFE.sub("_", base).strip(" .")
    if not cleaned:
        raise ServiceError("invalid_request", "an uploaded file needs a file name")
    return cleaned[:200]


def upload_source(filename: str) -> str:
    return UPLOAD_PREFIX + filename


def check_upload(filename: str, size: int, suffixes: tuple[str, ...], max_bytes: int) -> None:
    suffix = Path(filename).suffix.lower()
    if suffix not in suffixes:
        raise ServiceError("unsupported_file_type",
                           f"{filename}: unsupported file type {suffix or '(none)'!r}; "
                           f"accepted: {', '.join(suffixes)}")
    if size > max_bytes:
        raise ServiceError("upload_too_large", f"{filename}: {size} bytes is over the limit of {max_bytes} bytes")


def ingest_upload(kb: KnowledgeBase, filename: str, data: bytes) -> IngestReport:
    """Load ``data`` as the file ``filename`` and write its chunks to ``kb`` under ``upload:<filename>``
    (bad JSONL lines in ``skipped_lines``). Without chunks nothing is written or removed."""
    t0 = time.perf_counter()
    source = upload_source(filename)
    lines: list[Skipped] = []
    with tempfile.TemporaryDirectory(prefix="selfrag-upload-") as tmp:
        path = Path(tmp) / filename
        path.write_bytes(data)
        docs, skipped, loaded = load_paths([path], skipped_lines=lines)
        loaded_as = (str(path), str(path.resolve()))
    docs = [dataclasses.replace(d, source=source) for d in docs]
    report = IngestReport(files_loaded=loaded, documents=len(docs),
                          skipped=[Skipped(path=filename, reason=s.reason) for s in skipped],
                          skipped_lines=[_renamed(s, loaded_as, filename) for s in lines])
    records = chunk_documents(docs, kb.chunker)
    if records:  # no chunks (nothing usable in the file): the earlier version stays as it is
        write_chunks(kb.store, kb.embedder, records, replace_sources=[source], batch_size=kb.write_batch,
                     report=report)
        kb._invalidate()  # the BM25 index is rebuilt on next use, as after KnowledgeBase.ingest
    report.seconds = time.perf_counter() - t0
    return report


def _renamed(note: Skipped, loaded_as: tuple[str, ...], filename: str) -> Skipped:
    """A bad-line note (``<temporary path>:<line>``) under the uploaded file's name instead."""
    for prefix in sorted(loaded_as, key=len, reverse=True):
        if note.path.startswith(prefix):
            return Skipped(path=filename + note.path[len(prefix):], reason=note.reason)
    return Skipped(path=filename, reason=note.reason)


def report_json(report: IngestReport, sources: list[str]) -> dict[str, Any]:
    body = dataclasses.asdict(report)
    body["skipped"] = [dataclasses.asdict(s) for s in report.skipped]
    body["seconds"] = round(report.seconds, 4)
    body["sources"] = sources
    return body


def merge_reports(reports: list[IngestReport]) -> IngestReport:
    total = IngestReport()
    for r in reports:
        for f in ("files_loaded", "documents", "chunks_total", "chunks_added", "chunks_unchanged", "chunks_updated",
                  "chunks_removed"):
            setattr(total, f, getattr(total, f) + getattr(r, f))
        total.skipped.extend(r.skipped)
        total.skipped_lines.extend(r.skipped_lines)
        total.seconds += r.seconds
    return total
