"""Uploaded documents → the knowledge base, under a source name that does not depend on the worker.

An upload is parsed by the same loaders as ``selfrag ingest`` (so the same file types), from a private
temporary file; its chunks are stored under the source ``upload:<file name>``, so re-uploading a file
replaces its chunks (unchanged chunks are kept), and any worker sharing the store can delete it.
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
    """Load ``data`` as the file ``filename`` and write its chunks to ``kb`` under ``upload:<filename>``."""
    t0 = time.perf_counter()
    source = upload_source(filename)
    with tempfile.TemporaryDirectory(prefix="selfrag-upload-") as tmp:
        path = Path(tmp) / filename
        path.write_bytes(data)
        docs, skipped, loaded = load_paths([path])
    docs = [dataclasses.replace(d, source=source) for d in docs]
    report = IngestReport(files_loaded=loaded, documents=len(docs),
                          skipped=[Skipped(path=filename, reason=s.reason) for s in skipped])
    records = chunk_documents(docs, kb.chunker)
    write_chunks(kb.store, kb.embedder, records, replace_sources=[source], batch_size=kb.write_batch, report=report)
    kb._invalidate()  # the BM25 index is rebuilt on next use, as after KnowledgeBase.ingest
    report.seconds = time.perf_counter() - t0
    return report


def report_json(report: IngestReport, sources: list[str]) -> dict[str, Any]:
    body = dataclasses.asdict(report)
    body["skipped"] = [dataclasses.asdict(s) for s in report.skipped]
    body["seconds"] = round(report.seconds, 4)
    body["sources"] = sources
    return body


def merge_reports(reports: list[IngestReport]) -> IngestReport:
    total = IngestReport()
    for r in reports:
        for f in ("files_loaded", "documents", "chunks_total", "chunks_added", "chunks_unchanged", "chunks_removed"):
            setattr(total, f, getattr(total, f) + getattr(r, f))
        total.skipped.extend(r.skipped)
        total.seconds += r.seconds
    return total
