"""Loaders: turn files and folders into documents (text + metadata), recording what was skipped.

Supported: ``.txt``, ``.md``/``.markdown``, ``.html``/``.htm``, ``.pdf`` (pypdf) and ``.jsonl``
(one JSON object a line with ``text`` plus optional ``title``, ``doc_id``/``id``, ``metadata``
and other scalar fields). Empty, binary, unreadable and undecodable files are skipped, never fatal.
"""

from __future__ import annotations

import errno
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


class _Walk:
    """What a walk over the inputs found besides files: what it skipped (with the reason) and why."""

    def __init__(self, follow_symlinks: bool, exclude: Iterable[Path]):
        self.follow_symlinks = follow_symlinks
        self.exclude = {Path(os.path.realpath(e)) for e in exclude}
        self.skipped: list[Skipped] = []

    def skip(self, path: str | os.PathLike[str], reason: str) -> None:
        self.skipped.append(Skipped(str(path), reason))
        log.info("skipped %s: %s", path, reason)

    def excluded(self, path: Path) -> bool:
        real = Path(os.path.realpath(path))
        return any(real == e or e in real.parents for e in self.exclude)


def path_problem(path: Path) -> str | None:
    """Why an explicitly named path cannot be used (None: it can): permission, a symlink loop, a
    dangling symlink. Raises MissingPathError when it simply does not exist."""
    try:
        os.stat(path)
        return None
    except PermissionError:
        return "permission denied (its folder is not readable)"
    except FileNotFoundError:
        if os.path.islink(path):
            return "unreadable (broken symlink: its target does not exist)"
        raise MissingPathError(f"path does not exist: {path}") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "unreadable (symlink loop)"
        return f"unreadable ({exc.strerror or exc})"


def _utf8_name(path: Path) -> bool:
    try:
        str(path).encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def iter_files(paths: Iterable[str | os.PathLike[str]], walk: _Walk | None = None) -> Iterator[tuple[Path, bool]]:
    """Yield ``(file, explicit)`` for every file under ``paths`` (folders recursively, sorted, hidden
    entries ignored). Raises MissingPathError (a FileNotFoundError) for a path that does not exist.

    With ``walk`` (what :func:`load_paths` passes), what cannot be used is recorded there with its reason
    instead of stopping the walk: an unreadable or looping explicit path, an unreadable subfolder, a
    folder symlink (not followed), a file symlink pointing out of the ingested folder (unless
    ``walk.follow_symlinks``), a non-UTF-8 file name, and anything under ``walk.exclude`` (the knowledge
    base's own folder)."""
    walk = walk or _Walk(follow_symlinks=True, exclude=())
    for raw in paths:
        p = Path(raw).expanduser()
        problem = path_problem(p)
        if problem is not None:
            walk.skip(p, problem)
            continue
        if walk.excluded(p):
            walk.skip(p, "inside the knowledge base's own folder (never ingested)")
            continue
        if not p.is_dir():
            yield p, True
            continue
        top = Path(os.path.realpath(p))
        for root, dirs, files in os.walk(p, onerror=lambda exc: walk.skip(
                exc.filename, f"unreadable folder ({exc.strerror or exc})")):
            kept = []
            for d in sorted(d for d in dirs if not d.startswith(".")):
                sub = Path(root) / d
                if os.path.islink(sub):
                    walk.skip(sub, "folder symlink (not followed)")
                elif walk.excluded(sub):
                    walk.skip(sub, "the knowledge base's own folder (never ingested)")
                else:
                    kept.append(d)
            dirs[:] = kept
            for name in sorted(f for f in files if not f.startswith(".")):
                path = Path(root) / name
                if not _utf8_name(path):
                    walk.skip(path, "file name is not valid UTF-8")
                    continue
                if os.path.islink(path):
                    try:
                        target = path.resolve(strict=True)
                    except (OSError, RuntimeError) as exc:
                        loop = isinstance(exc, RuntimeError) or getattr(exc, "errno", None) == errno.ELOOP
                        walk.skip(path, "unreadable (symlink loop)" if loop
                                  else "unreadable (broken symlink: its target does not exist)")
                        continue
                    if not walk.follow_symlinks and top != target and top not in target.parents:
                        walk.skip(path, "symlink to a file outside the ingested folder (not followed; "
                                        "--follow-symlinks includes it)")
                        continue
                    if walk.excluded(target):
                        walk.skip(path, "symlink into the knowledge base's own folder")
                        continue
                yield path, False


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


_MD_FRONT_MATTER = re.compile(r"\A---[ \t]*\n(.*?)\n(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.DOTALL)
_YAML_LINE = re.compile(r"^(?:[A-Za-z_][\w-]*[ \t]*:|[ \t]+\S|-[ \t]|#|[ \t]*$)")  # key:, nested, list, comment
# A fence opens on a line of ``` (no backtick after it: ```js``` is inline code) or ~~~, and closes on the
# same character at least as long.
_MD_FENCE = re.compile(r"^[ ]{0,3}(`{3,}(?=[^`\n]*$)|~{3,}).*?(?:^[ ]{0,3}\1[`~]*[ \t]*$|\Z)",
                       re.MULTILINE | re.DOTALL)


def markdown_title(text: str) -> str | None:
    """The title of a Markdown text: its front matter's ``title:``, else its first heading outside code
    blocks (a ``# comment`` in a fenced shell block is not a heading)."""
    text = text.replace("\r\n", "\n")
    front = _MD_FRONT_MATTER.match(text)
    if front and not all(_YAML_LINE.match(line) for line in front.group(1).split("\n")):
        front = None  # a horizontal rule, then text: not front matter
    if front:
        for line in front.group(1).splitlines():
            key, _, value = line.partition(":")
            if key.strip().lower() == "title" and value.strip().strip("'\"").strip():
                return value.strip().strip("'\"").strip()
        text = text[front.end():]
    m = _MD_HEADING.search(_MD_FENCE.sub("", text))
    return m.group(1).strip() if m else None


def load_markdown(path: Path) -> list[Document]:
    text = _non_empty(_read_text(path))
    return [Document(text=text, source=str(path), title=markdown_title(text) or path.stem)]


# Elements that end a paragraph; everything else (b, a, span, em...) is inline and joins its text.
_HTML_BLOCKS = ("address", "article", "aside", "blockquote", "dd", "div", "dl", "dt", "figcaption", "figure",
                "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "li", "main", "nav", "ol",
                "p", "pre", "section", "table", "tr", "ul")
_PARAGRAPH, _BREAK, _SPACE = "\x00P\x00", "\x00B\x00", "\x00S\x00"


def html_text(soup: Any) -> str:
    """The text of parsed HTML as a reader sees it: inline tags join their words (``The <b>Heron</b>
    rides`` → ``The Heron rides``; no space is added, so Chinese stays unbroken), a block element is a
    paragraph (a blank line between), ``<br>`` a line break, table cells are separated by a space, the
    source's own line wrapping is a space, and ``<pre>`` keeps its lines and indentation."""
    for pre in soup.find_all("pre"):  # preformatted: its line breaks and indentation are kept
        kept = pre.get_text().strip("\n").replace("\n", _BREAK).replace(" ", _SPACE)
        pre.replace_with(_PARAGRAPH + kept + _PARAGRAPH)
    for br in soup.find_all("br"):
        br.replace_with(_BREAK)
    for cell in soup.find_all(["td", "th"]):
        cell.insert_after(" ")
    for block in soup.find_all(_HTML_BLOCKS):
        block.insert_before(_PARAGRAPH)
        block.insert_after(_PARAGRAPH)
    text = re.sub(r"\s+", " ", soup.get_text())
    text = text.replace(_BREAK, "\n")
    paragraphs = ("\n".join(line.strip() for line in chunk.split("\n")) for chunk in text.split(_PARAGRAPH))
    return "\n\n".join(p.strip() for p in paragraphs if p.strip()).replace(_SPACE, " ")


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
    return [Document(text=_non_empty(html_text(soup)), source=str(path), title=title or path.stem)]


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
_MAX_LINE_NOTES = 20  # listed per file; the rest are counted


def bad_metadata_key(key: Any) -> bool:
    """A metadata key Chroma refuses: not a string, empty, starting with ``$`` or ``#``, or ``chroma:``."""
    return not isinstance(key, str) or not key or key.startswith(("$", "#", "chroma:"))


def _has_surrogates(value: Any) -> bool:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
            return False
        except UnicodeEncodeError:
            return True
    if isinstance(value, dict):
        return any(_has_surrogates(k) or _has_surrogates(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_surrogates(v) for v in value)
    return False


def _line_problem(obj: Any) -> str | None:
    if not isinstance(obj, dict) or not isinstance(obj.get("text"), str) or not obj["text"].strip():
        return "not an object with a non-empty 'text'"
    if _has_surrogates(obj):
        return "invalid Unicode (a lone surrogate escape)"
    keys = [k for k in obj if k not in ("text", "metadata")]
    if isinstance(obj.get("metadata"), dict):
        keys += list(obj["metadata"])
    bad = [k for k in keys if bad_metadata_key(k)]
    if bad:
        return f"metadata key {bad[0]!r} is not allowed (empty, or starting with '$', '#' or 'chroma:')"
    return None


def load_jsonl(path: Path, notes: list[Skipped] | None = None) -> list[Document]:
    """One document per valid line. A bad line (not JSON, no text, a metadata key Chroma refuses, a
    lone surrogate) is skipped; with ``notes``, listed there as ``Skipped("<file>:<line>", reason)``."""
    raw = _read_text(path)
    docs: list[Document] = []
    bad = 0
    # JSONL lines end at "\n" only: str.splitlines() also breaks at U+2028/U+2029/NEL, which JSON leaves
    # unescaped inside strings (json.dumps(..., ensure_ascii=False)), cutting valid records in two
    for lineno, line in enumerate(raw.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            problem = _line_problem(obj)
        except (json.JSONDecodeError, RecursionError):
            problem = "not valid JSON"
        if problem is not None:
            bad += 1
            if notes is not None and bad <= _MAX_LINE_NOTES:
                notes.append(Skipped(f"{path}:{lineno}", f"line {lineno}: {problem}"))
            continue
        meta: dict[str, Any] = {}
        if isinstance(obj.get("metadata"), dict):
            meta.update(obj["metadata"])
        for key, value in obj.items():
            if key not in ("text", "metadata") and isinstance(value, _SCALARS):
                meta[key] = value
        doc_id = meta.pop("doc_id", None)
        if doc_id is None or doc_id == "":  # (0 is an id: 0-based ids are common)
            doc_id = meta.pop("id", None)
        if doc_id == "":
            doc_id = None
        if doc_id is not None:
            meta["doc_id"] = str(doc_id)
        title = str(meta.pop("title", "") or f"{path.stem} #{lineno}")
        meta["line"] = lineno
        key = f"doc:{doc_id}" if doc_id is not None else f"line:{lineno}"
        docs.append(Document(text=obj["text"], source=str(path), title=title, key=key, metadata=meta))
    if bad:
        log.warning("%s: skipped %d malformed line(s)", path, bad)
        if notes is not None and bad > _MAX_LINE_NOTES:
            notes.append(Skipped(str(path), f"and {bad - _MAX_LINE_NOTES} more bad line(s)"))
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


def load_file(path: Path, notes: list[Skipped] | None = None) -> list[Document]:
    """Documents of one file; raises SkipFile with the reason when it cannot be used (``notes``
    collects the bad lines of a JSONL file)."""
    loader = _LOADERS.get(path.suffix.lower())
    if loader is None:
        raise SkipFile(f"unsupported file type {path.suffix or '(none)'!r}")
    try:
        resolved = path.resolve(strict=True)
    except RuntimeError as exc:  # Python 3.11 reports a symlink loop this way
        raise SkipFile("unreadable (symlink loop)") from exc
    except OSError as exc:
        raise SkipFile(f"unreadable ({exc.strerror or exc})") from exc
    return load_jsonl(resolved, notes) if loader is load_jsonl else loader(resolved)


def load_paths(paths: Iterable[str | os.PathLike[str]], *, follow_symlinks: bool = False,
               exclude: Iterable[str | os.PathLike[str]] = (),
               skipped_lines: list[Skipped] | None = None) -> tuple[list[Document], list[Skipped], int]:
    """Load every supported file under ``paths``: ``(documents, skipped, files_loaded)``.

    Unsupported types inside folders are ignored silently; given explicitly, they are skipped and
    reported. Everything else that cannot be used — a bad file, an unreadable path or subfolder, a
    symlink loop, a folder symlink, a file symlink out of the ingested folder (unless
    ``follow_symlinks``), a non-UTF-8 file name, anything under ``exclude`` — is in ``skipped`` with its
    reason; one bad input never stops the others. Bad JSONL lines go to ``skipped_lines`` when given."""
    docs: list[Document] = []
    walk = _Walk(follow_symlinks, exclude)
    loaded = 0
    for path, explicit in iter_files(paths, walk):
        if not explicit and path.suffix.lower() not in SUPPORTED_SUFFIXES:
            log.debug("ignoring %s (unsupported type)", path)
            continue
        try:
            file_docs = load_file(path, skipped_lines)
        except SkipFile as exc:
            walk.skip(path, str(exc))
            continue
        except Exception as exc:  # noqa: BLE001 - a loader failing on one odd file must not stop the ingest
            log.debug("loading %s failed", path, exc_info=True)
            walk.skip(path, f"could not be loaded ({type(exc).__name__}: {exc})")
            continue
        docs.extend(file_docs)
        loaded += 1
    return docs, walk.skipped, loaded
