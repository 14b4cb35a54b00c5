"""The questions an evaluation runs on, and the knowledge base they are answered from.

Examples are the dev split of ``clapnq`` / ``cmrc`` or a JSONL file of QA records, taken half
answerable and half not (:func:`balanced`); the knowledge base is filled with the matching corpus
only when the documents it holds don't match (:func:`ensure_corpus`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

import dspy

from optimize.errors import DataError
from optimize.metrics import field_value
from optimize.splits import load_split, to_example

DATASET_TASKS = {"clapnq": ("qa_en", "clapnq"), "cmrc": ("qa_zh", "cmrc")}  # dataset → (split task, corpus)


def example_id(example: Any) -> str:
    return str(field_value(example, "id") or field_value(example, "question"))


def balanced(examples: Sequence[Any], limit: int | None) -> list[Any]:
    """The first ``limit`` examples alternating answerable / unanswerable (half each while both last),
    in file order within each kind; all examples (file order) when ``limit`` is None."""
    if limit is None or limit >= len(examples):
        return list(examples)
    yes = [e for e in examples if field_value(e, "answerable", True)]
    no = [e for e in examples if not field_value(e, "answerable", True)]
    out: list[Any] = []
    while len(out) < limit and (yes or no):
        for pool in (yes, no):
            if pool and len(out) < limit:
                out.append(pool.pop(0))
    return out


def load_examples(dataset: str, splits_dir: Path, limit: int | None = None) -> list[dspy.Example]:
    """Dev examples of ``clapnq`` / ``cmrc`` (the derived splits in ``splits_dir``), or of a JSONL file
    of QA records (``id``, ``question``, ``answers``, ``answerable``, ``gold_doc_ids``), balanced by
    :func:`balanced`."""
    if dataset in DATASET_TASKS:
        examples = load_split(DATASET_TASKS[dataset][0], "dev", splits_dir)
    else:
        path = Path(dataset)
        if not path.is_file():
            raise DataError(f"dataset {dataset!r} is neither clapnq, cmrc nor a JSONL file")
        with open(path, encoding="utf-8") as fh:
            try:
                records = [json.loads(line) for line in fh if line.strip()]
            except json.JSONDecodeError as exc:
                raise DataError(f"{path}: not JSON lines: {exc}") from exc
        for n, r in enumerate(records):
            if "question" not in r:
                raise DataError(f"{path}: record {n + 1} has no question")
            r.setdefault("id", f"{path.stem}:{n + 1}")
            r.setdefault("answers", [r["answer"]] if r.get("answer") else [])
            r.setdefault("answerable", bool(r["answers"]))
            r.setdefault("gold_doc_ids", [])
        examples = [to_example(r, "qa_en") for r in records]
    return balanced(examples, limit)


def corpus_name(dataset: str, examples: Sequence[Any] = ()) -> str:
    """The corpus a dataset's questions are answered from: clapnq (+ XQuAD distractors) or cmrc."""
    if dataset in DATASET_TASKS:
        return DATASET_TASKS[dataset][1]
    langs = {field_value(e, "language") for e in examples}
    return "cmrc" if "zh" in langs else "clapnq"


def ensure_corpus(kb: Any, documents: Sequence[tuple[str, dict]], progress: bool = False) -> int:
    """Fill ``kb`` with ``documents`` (``(text, {"doc_id", ...})``) only when the documents it holds
    don't match: returns how many were (re)added — 0 when the collection is already complete."""
    wanted = {str(meta["doc_id"]) for _, meta in documents}
    present = {str(meta.get("doc_id")) for _, _, meta in kb.store.iter_all(include_sources_only=True)} \
        if not kb.is_empty() else set()
    if wanted <= present:
        return 0
    missing = [(t, m) for t, m in documents if str(m["doc_id"]) not in present]
    kb.add_documents(missing, progress=progress)
    return len(missing)
