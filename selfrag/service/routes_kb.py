"""Knowledge-base routes: search, collections, stats, upload documents, remove a source."""

from __future__ import annotations

import logging

from fastapi import APIRouter, File, Request, UploadFile
from starlette.concurrency import run_in_threadpool

from programs.types import Passage
from selfrag.kb.filters import validate_where
from selfrag.service.errors import ServiceError
from selfrag.service.schemas import CollectionInfo, CollectionsResponse, DeleteResponse, SearchRequest, SearchResponse
from selfrag.service.uploads import (
    UPLOAD_PREFIX, check_upload, ingest_upload, merge_reports, report_json, safe_filename, upload_source,
)

log = logging.getLogger(__name__)

router = APIRouter(prefix="/v1")


def _state(request: Request):
    return request.app.state.service


@router.post("/search", response_model=SearchResponse)
async def search(body: SearchRequest, request: Request) -> SearchResponse:
    """Retrieve from a collection as its questions do: over ``retrieval.index`` when one is set
    (``index_not_found`` when the collection lacks it), else over its chunks."""
    state = _state(request)
    collections = state.runtime.collections
    limit = state.settings.max_top_k
    if body.k is not None and body.k > limit:
        raise ServiceError("top_k_too_large", f"k={body.k} is over the limit of {limit}")
    try:
        validate_where(body.filters)
    except ValueError as exc:
        raise ServiceError("invalid_request", f"filters: {exc}") from None

    def run() -> tuple[str, str, list[Passage]]:
        kb = collections.get(body.collection)
        collections.refresh(kb.name)
        mode = body.mode or kb.retrieval.mode
        retriever = collections.answering_retriever(kb.name, mode)  # retrieval.index, as questions use
        with collections.lock(kb.name):
            return kb.name, mode, retriever.retrieve(body.query, k=min(body.k or kb.retrieval.k, limit),
                                                     filters=body.filters)

    name, mode, passages = await run_in_threadpool(run)
    return SearchResponse(collection=name, mode=mode, index=collections.retrieval.index, passages=passages)


@router.get("/collections", response_model=CollectionsResponse)
async def collections(request: Request) -> CollectionsResponse:
    c = _state(request).runtime.collections
    listed = await run_in_threadpool(c.list)
    return CollectionsResponse(default=c.default, collections=[CollectionInfo(name=n, chunks=k) for n, k in listed])


@router.get("/collections/{name}/stats")
async def stats(name: str, request: Request) -> dict:
    c = _state(request).runtime.collections

    def run() -> dict:
        info = c.get(name).stats()
        info.pop("bm25_index", None)  # a local file path: not the client's business
        return info

    return await run_in_threadpool(run)


@router.get("/collections/{name}/chunks/{chunk_id}", response_model=Passage)
async def chunk(name: str, chunk_id: str, request: Request) -> Passage:
    """One stored chunk in full (the page opens a citation with it)."""
    c = _state(request).runtime.collections

    def run() -> Passage:
        found = c.get(name).store.get([chunk_id])
        if chunk_id not in found:
            raise ServiceError("chunk_not_found", f"no chunk {chunk_id!r} in {name!r}")
        text, meta = found[chunk_id]
        return Passage(id=chunk_id, text=text, metadata=meta)

    return await run_in_threadpool(run)


@router.post("/collections/{name}/documents")
async def upload(name: str, request: Request, files: list[UploadFile] = File(...)) -> dict:
    """Ingest uploaded files (the types ``selfrag ingest`` takes) into ``name`` (created if missing).
    Each is stored under the source ``upload:<file name>``; uploading it again replaces it."""
    state = _state(request)
    s = state.settings
    if len(files) > s.max_upload_files:
        raise ServiceError("too_many_files", f"{len(files)} files; the limit is {s.max_upload_files} per request")
    items: list[tuple[str, bytes]] = []
    for f in files:
        filename = safe_filename(f.filename)
        check_upload(filename, f.size or 0, s.upload_suffixes, s.max_upload_bytes)
        data = await f.read(s.max_upload_bytes + 1)
        check_upload(filename, len(data), s.upload_suffixes, s.max_upload_bytes)
        items.append((filename, data))
    collections = state.runtime.collections

    def run() -> dict:
        kb = collections.get(name, create=True)
        with collections.lock(kb.name):
            reports = [ingest_upload(kb, filename, data) for filename, data in items]
        report = merge_reports(reports)
        state.metrics.uploads.inc(report.chunks_added)
        return report_json(report, [upload_source(fn) for fn, _ in items])

    body = await run_in_threadpool(run)
    if body["documents"] == 0:
        reasons = "; ".join(f"{s['path']}: {s['reason']}" for s in body["skipped"]) or "no text"
        raise ServiceError("nothing_ingested", f"nothing was ingested ({reasons}); earlier uploads are kept")
    body["collection"] = name
    return body


@router.delete("/collections/{name}/sources/{source:path}", response_model=DeleteResponse)
async def delete_source(name: str, source: str, request: Request) -> DeleteResponse:
    """Delete the chunks of a source: an upload's file name (or ``upload:<name>``), or a source as
    ``selfrag ingest`` stored it (a file or folder path)."""
    collections = _state(request).runtime.collections

    def run() -> tuple[str, int]:
        kb = collections.get(name)
        candidates = [source] if source.startswith(UPLOAD_PREFIX) else [upload_source(source), source]
        with collections.lock(kb.name):
            for candidate in candidates:
                removed = kb.delete_source(candidate)
                if removed:
                    return candidate, removed
        raise ServiceError("source_not_found", f"no chunks found for source {source!r} in {name!r}")

    found, removed = await run_in_threadpool(run)
    return DeleteResponse(collection=name, source=found, chunks_removed=removed)
