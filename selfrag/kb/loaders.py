"""Loaders: turn files and folders into documents (text + metadata), recording what was skipped.

Supported: ``.txt``, ``.md``/``.markdown``, ``.html``/``.htm``, ``.pdf`` (pypdf) and ``.jsonl``
(one JSON object a line with ``text`` plus optional ``title``, ``doc_id``/``id``, ``metadata``
and other scalar fields). Empty, binary, unreadable and undecodable files are skipped, never fatal.
"""

from __future__ import annotations

import json
import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

from selfrag.errors import MissingPathError

log = logging.getLogger(__name__)

TEXT_SUFFIXES = {".txt", ".text"}
MARKDOWN_SUFFIXES = {".md", ".markdown"}
HTML_SUFFIXES = {".html", ".htm"}
SUPPORTED_SUFFIXES = TEXT_SUFFIXES | MARKDOWN_SUFFIXES | HTML_SUFFIXES | {".pdf", ".jsonl"}


@dataclass
class Document:
    """One unit of text before chunking. ``key`` distinguishes documents inside one source
    (a JSONL line's ``doc_id`` or line number); it is part of every chunk id."""

    text: str
    source: str
    title: str
    key: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class Skipped:
    path: str
    reason: str


class SkipFile(Exception):
    """Raised by a loader for a file that must be skipped; the message is the reason."""


def iter_files(paths: Iterable[str | os.PathLike[str]]) -> Iterator[tuple[Path, bool]]:
    """Yield ``(file, explicit)`` for every file under ``paths`` (folders recursively, sorted,
    hidden entries ignored). Raises MissingPathError (a FileNotFoundError) for a path that does not exist."""
    for raw in paths:
        p = Path(raw).expanduser()
        if not p.exists():
            raise MissingPathError(f"path does not exist: {raw}")
        if p.is_dir():
            for root, dirs, files in os.walk(p):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                for name in sorted(files):
                    if not name.startswith("."):
                        yield Path(root) / name, False
        else:
            yield p, True


def _read_text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise SkipFile(f"unreadable ({exc.strerror or exc})") from exc
    if not data.strip():
        raise SkipFile("empty")
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError as exc:
            raise SkipFile("undecodable (bad UTF-16)") from exc
    if b"\x00" in data[:8192]:
        raise SkipFile("binary")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SkipFile(f"undecodable (not UTF-8 at byte {exc.start})") from exc


def _non_empty(text: str) -> str:
    if not text.strip():
        raise SkipFile("empty")
    return text


_MD_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)


def load_text(path: Path) -> list[Document]:
    text = _non_empty(_read_text(path))
    return [Document(text=text, source=str(path), title=path.stem)]


def load_markdown(path: Path) -> list[Document]:
    text = _non_empty(_read_text(path))
    m = _MD_HEADING.search(text)
    return [Document(text=text, source=str(path), title=m.group(1).strip() if m else path.stem)]


def load_html(path: Path) -> list[Document]:
    from bs4 import BeautifulSoup

    raw = _read_text(path)
    soup = BeautifulSoup(raw, "html.parser")
    for tag in soup(["script", "style", "noscript", "template"]):
        tag.decompose()
    title = ""
    if soup.title and soup.title.get_text(strip=True):
        title = soup.title.get_text(strip=True)
    elif soup.find("h1"):
        title = soup.find("h1").get_text(" ", strip=True)
    if soup.title:
        soup.title.decompose()
    lines = [ln.strip() for ln in soup.get_text("\n").splitlines()]
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    return [Document(text=_non_empty(text), source=str(path), title=title or path.stem)]


def load_pdf(path: Path) -> list[Document]:
    from pypdf import PdfReader

    try:
        reader = PdfReader(str(path))
        pages = [(page.extract_text() or "") for page in reader.pages]
        meta_title = (reader.metadata.title if reader.metadata else None) or ""
    except Exception as exc:  # pypdf raises many types on corrupt files
        raise SkipFile(f"unreadable PDF ({type(exc).__name__}: {exc})") from exc
    text = "\n\n".join(p.strip() for p in pages if p.strip())
    if not text.strip():
        raise SkipFile("empty (no extractable text)")
    return [Document(text=text, source=str(path), title=str(meta_title).strip() or path.stem)]


_SCALARS = (str, int, float, bool)


def load_jsonl(path: Path) -> list[Document]:
    raw = _read_text(path)
    docs: list[Document] = []
    bad = 0
    for lineno, line in enumerate(raw.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            bad += 1
            continue
        if not isinstance(obj, dict) or not isinstance(obj.get("text"), str) or not obj["text"].strip():
            bad += 1
            continue
        meta: dict[str, Any] = {}
        if isinstance(obj.get("metadata"), dict):
            meta.update(obj["metadata"])
        for key, value in obj.items():
            if key not in ("text", "metadata") and isinstance(value, _SCALARS):
                meta[key] = value
        doc_id = meta.pop("doc_id", None) or meta.pop("id", None)
        if doc_id is not None:
            meta["doc_id"] = str(doc_id)
        title = str(meta.pop("title", "") or f"{path.stem} #{lineno}")
        meta["line"] = lineno
        key = f"doc:{doc_id}" if doc_id is not None else f"line:{lineno}"
        docs.append(Document(text=obj["text"], source=str(path), title=title, key=key, metadata=meta))
    if bad:
        log.warning("%s: skipped %d malformed line(s)", path, bad)
    if not docs:
        raise SkipFile("no valid JSONL lines (need objects with a non-empty 'text')" if bad else "empty")
    return docs


_LOADERS = {
    **{s: load_text for s in TEXT_SUFFIXES},
    **{s: load_markdown for s in MARKDOWN_SUFFIXES},
    **{s: load_html for s in HTML_SUFFIXES},
    ".pdf": load_pdf,
    ".jsonl": load_jsonl,
}


def load_file(path: Path) -> list[Document]:
    """Documents of one file; raises SkipFile with the reason when it cannot be used."""
    loader = _LOADERS.get(path.suffix.lower())
    if loader is None:
        raise SkipFile(f"unsupported file type {path.suffix or '(none)'!r}")
    return loader(path.resolve())


def load_paths(paths: Iterable[str | os.PathLike[str]]) -> tuple[list[Document], list[Skipped], int]:
    """Load every supported file under ``paths``: ``(documents, skipped, files_loaded)``.
    Unsupported types inside folders are ignored silently; given explicitly, they are skipped
    and reported."""
    docs: list[Document] = []
    skipped: list[Skipped] = []
    loaded = 0
    for path, explicit in iter_files(paths):
        if not explicit and path.suffix.lower() not in SUPPORTED_SUFFIXES:
            log.debug("ignoring %s (unsupported type)", path)
            continue
        try:
            file_docs = load_file(path)
        except SkipFile as exc:
            skipped.append(Skipped(str(path), str(exc)))
            log.info("skipped %s: %s", path, exc)
            continue
        docs.extend(file_docs)
        loaded += 1
    return docs, skipped, loaded
