"""The QA file a user brings (JSON lines), its checking, and how its gold documents are found in a collection.

One JSON object a line (blank lines are skipped)::

    {"question": "How long is parental leave?", "answers": ["16 weeks"],
     "gold_sources": ["handbook/leave.md"], "id": "hr-1", "language": "en"}

- ``question`` (string, required, not blank)
- ``answers`` (list of strings, required; ``[]`` = the collection does not answer it). A single
  ``answer`` string is accepted in its place.
- ``gold_doc_ids`` / ``gold_sources`` (optional lists of strings): the documents that answer it, by the
  ``doc_id`` given at ingest (JSONL documents) or by source: a file's path, absolute, relative to the
  working folder, or any trailing part of it (``leave.md``, ``handbook/leave.md``)
- ``answerable`` (optional boolean; must agree with ``answers``), ``language`` (optional string; default
  ``zh`` when the question has CJK characters, else ``en``), ``id`` (optional string or integer, unique;
  default ``line-<n>``)

:func:`check_qa_file` reports every bad line with its number and reason; :func:`load_qa_file` refuses a
file with any bad line (naming the first). :class:`Catalog` maps gold documents to the passage ids of a
collection (a chunk's ``doc_id``, else its chunk id: what citations and relevance steps record).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from optimize.errors import DataError
from optimize.metrics import has_cjk
from optimize.sources import normalize_question, stable_hash

KNOWN_FIELDS = ("question", "answers", "answer", "gold_doc_ids", "gold_sources", "answerable", "language", "id")


@dataclass(frozen=True)
class QAItem:
    id: str
    question: str
    answers: tuple[str, ...]
    gold_doc_ids: tuple[str, ...] = ()
    gold_sources: tuple[str, ...] = ()
    language: str = "en"
    line: int = 0

    @property
    def answerable(self) -> bool:
        return bool(self.answers)

    @property
    def group(self) -> str:
        """Same question (after normalisation) → same group → same split."""
        return "q:" + stable_hash("question:" + normalize_question(self.question))[:16]

    @property
    def has_gold(self) -> bool:
        return bool(self.gold_doc_ids or self.gold_sources)

    def record(self, gold_refs: Iterable[str] = ()) -> dict[str, Any]:
        """The ``qa`` record (the shape of ``qa_en``); ``gold_refs`` (passage ids of the gold documents in
        the collection) join ``gold_doc_ids`` so citations of any gold chunk count."""
        gold = list(dict.fromkeys([*self.gold_doc_ids, *sorted(gold_refs)])) if self.answerable else []
        return {"id": self.id, "group": self.group, "source": "user", "language": self.language,
                "question": self.question, "answer": self.answers[0] if self.answers else "",
                "answers": list(self.answers), "answerable": self.answerable, "gold_doc_ids": gold,
                "gold_sources": list(self.gold_sources), "related_doc_ids": gold}


@dataclass(frozen=True)
class Problem:
    line: int
    reason: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.reason}"


@dataclass
class QACheck:
    path: Path
    items: list[QAItem] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    lines: int = 0  # non-blank lines

    @property
    def answerable(self) -> int:
        return sum(it.answerable for it in self.items)

    @property
    def with_gold(self) -> int:
        return sum(it.has_gold for it in self.items if it.answerable)

    def fatal(self) -> str | None:
        """Why nothing in the file is usable to derive labels from (None when something is)."""
        if self.lines == 0:
            return f"{self.path} is empty: expected one JSON object a line with 'question' and 'answers'"
        if not self.items:
            first = f" ({self.problems[0]})" if self.problems else ""
            return f"{self.path}: none of its {self.lines} line(s) is a usable QA record{first}"
        if not self.answerable:
            return f"{self.path}: no answerable question (every 'answers' list is empty)"
        return None


def _strings(value: Any, name: str) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise ValueError(f"'{name}' must be a list of strings, got {type(value).__name__}")
    out = []
    for i, v in enumerate(value):
        if not isinstance(v, str):
            raise ValueError(f"'{name}'[{i}] must be a string, got {type(v).__name__}")
        if not v.strip():
            raise ValueError(f"'{name}'[{i}] is blank")
        out.append(v.strip())
    return tuple(dict.fromkeys(out))


def parse_record(obj: Any, line: int) -> QAItem:
    """One QA record → :class:`QAItem`; raises ValueError with the reason."""
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
    question = obj.get("question")
    if question is None:
        raise ValueError("missing 'question'")
    if not isinstance(question, str):
        raise ValueError(f"'question' must be a string, got {type(question).__name__}")
    if not question.strip():
        raise ValueError("'question' is blank")
    if "answers" in obj:
        answers = _strings(obj["answers"], "answers")
    elif "answer" in obj:
        if not isinstance(obj["answer"], str):
            raise ValueError(f"'answer' must be a string, got {type(obj['answer']).__name__}")
        answers = (obj["answer"].strip(),) if obj["answer"].strip() else ()
    else:
        raise ValueError("missing 'answers' (a list of strings; [] for a question the documents do not answer)")
    answerable = obj.get("answerable")
    if answerable is not None:
        if not isinstance(answerable, bool):
            raise ValueError(f"'answerable' must be true or false, got {answerable!r}")
        if answerable != bool(answers):
            raise ValueError(f"'answerable' is {str(answerable).lower()} but 'answers' is "
                             f"{'empty' if not answers else 'not empty'}")
    gold_ids = _strings(obj.get("gold_doc_ids", []), "gold_doc_ids")
    gold_sources = _strings(obj.get("gold_sources", []), "gold_sources")
    language = obj.get("language")
    if language is not None and (not isinstance(language, str) or not language.strip()):
        raise ValueError(f"'language' must be a non-empty string, got {language!r}")
    raw_id = obj.get("id")
    if raw_id is not None and (isinstance(raw_id, bool) or not isinstance(raw_id, (str, int))
                               or not str(raw_id).strip()):
        raise ValueError(f"'id' must be a non-empty string or an integer, got {raw_id!r}")
    return QAItem(id=str(raw_id).strip() if raw_id is not None else f"line-{line}", question=question.strip(),
                  answers=answers, gold_doc_ids=gold_ids, gold_sources=gold_sources,
                  language=(language or ("zh" if has_cjk(question) else "en")).strip(), line=line)


def check_qa_file(path: str | Path) -> QACheck:
    """Every line of ``path`` checked: the usable items and a problem (line number, reason) per bad line."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"QA file not found: {path}")
    result = QACheck(path=path)
    seen: dict[str, int] = {}
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text (byte {exc.start})") from exc
    for n, raw in enumerate(text.split("\n"), start=1):  # not splitlines(): U+2028/NEL may sit inside a JSON string
        if not raw.strip():
            continue
        result.lines += 1
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            result.problems.append(Problem(n, f"bad JSON ({exc.msg} at column {exc.colno})"))
            continue
        try:
            item = parse_record(obj, n)
        except ValueError as exc:
            result.problems.append(Problem(n, str(exc)))
            continue
        if item.id in seen:
            result.problems.append(Problem(n, f"duplicate id {item.id!r} (first on line {seen[item.id]})"))
            continue
        seen[item.id] = n
        result.items.append(item)
    return result


def load_qa_file(path: str | Path, need_answerable: bool = False) -> list[QAItem]:
    """The items of a QA file that passes :func:`check_qa_file`; else a :class:`DataError` naming the
    first bad line (or why nothing is usable)."""
    check = check_qa_file(path)
    fatal = check.fatal()
    if fatal and (need_answerable or check.lines == 0 or not check.items):
        raise DataError(fatal)
    if check.problems:
        more = f" (and {len(check.problems) - 1} more; see `selfrag data check {path}`)" if len(check.problems) > 1 \
            else ""
        raise DataError(f"{path}: {check.problems[0]}{more}")
    return check.items


# ---------------------------------------------------------------- gold documents in a collection


def _parts(path: str) -> tuple[str, ...]:
    return tuple(p for p in Path(path.strip()).parts if p not in ("", ".", os.sep))


@dataclass
class Catalog:
    """What a collection holds, by passage id (a chunk's ``doc_id``, else its chunk id): which ids each
    ``doc_id`` and each source has."""

    refs_by_doc_id: dict[str, set[str]] = field(default_factory=dict)
    refs_by_source: dict[str, set[str]] = field(default_factory=dict)
    chunk_ids: set[str] = field(default_factory=set)

    @classmethod
    def from_chunks(cls, chunks: Iterable[tuple[str, dict[str, Any]]]) -> Catalog:
        """From ``(chunk id, metadata)`` pairs (e.g. a knowledge base's ``store.iter_all``)."""
        cat = cls()
        for cid, meta in chunks:
            ref = str(meta.get("doc_id") or cid)
            cat.chunk_ids.add(str(cid))
            if meta.get("doc_id"):
                cat.refs_by_doc_id.setdefault(str(meta["doc_id"]), set()).add(ref)
            if meta.get("source"):
                cat.refs_by_source.setdefault(str(meta["source"]), set()).add(ref)
        return cat

    def __len__(self) -> int:
        return len(self.chunk_ids)

    def sources_named(self, given: str) -> list[str]:
        """Stored sources ``given`` names: the same string, the same resolved path, or a stored path
        ending with ``given``'s path components."""
        if given in self.refs_by_source:
            return [given]
        try:
            resolved = str(Path(given).expanduser().resolve())
        except OSError:
            resolved = given
        if resolved in self.refs_by_source:
            return [resolved]
        want = _parts(given)
        if not want:
            return []
        return sorted(s for s in self.refs_by_source if _parts(s)[-len(want):] == want)

    def gold_sources(self, item: QAItem) -> list[str]:
        return sorted({s for g in item.gold_sources for s in self.sources_named(g)})

    def refs(self, doc_ids: Iterable[str] = (), sources: Iterable[str] = ()) -> set[str]:
        """Passage ids of the documents named by ``doc_ids`` and ``sources`` that the collection holds."""
        refs: set[str] = set()
        for d in doc_ids:
            refs |= self.refs_by_doc_id.get(d, set())
            if d in self.chunk_ids:
                refs.add(d)
        for s in {s for g in sources for s in self.sources_named(g)}:
            refs |= self.refs_by_source[s]
        return refs

    def gold_refs(self, item: QAItem) -> set[str]:
        """Passage ids of ``item``'s gold documents that the collection holds."""
        return self.refs(item.gold_doc_ids, item.gold_sources)

    def gold_filters(self, item: QAItem) -> list[dict[str, str]]:
        """Retrieval filters that reach each gold document of ``item`` in the collection."""
        filters = [{"doc_id": d} for d in item.gold_doc_ids if d in self.refs_by_doc_id]
        return filters + [{"source": s} for s in self.gold_sources(item)]


def with_gold_refs(examples: Iterable[Any], catalog: Catalog, collection: str) -> list[Any]:
    """``examples`` (QA ``dspy.Example``s) with the passage ids of their gold documents in the collection
    added to ``gold_doc_ids`` (so a citation of any gold chunk counts); a :class:`DataError` when some
    name gold documents and the collection holds none of them."""
    out, named, found = [], 0, 0
    for ex in examples:
        ids, sources = list(ex.get("gold_doc_ids") or []), list(ex.get("gold_sources") or [])
        if ex.get("answerable", True) and (ids or sources):
            named += 1
            refs = catalog.refs(ids, sources)
            found += bool(refs)
            ex = ex.copy(gold_doc_ids=list(dict.fromkeys([*ids, *sorted(refs)])))
        out.append(ex)
    if named and not found:
        raise DataError(f"collection {collection!r} holds none of the gold documents of the questions "
                        "(gold_doc_ids / gold_sources): evaluate on the collection they were ingested into")
    return out
