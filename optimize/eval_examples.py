"""The questions an evaluation runs on, and the knowledge base they are answered from.

Examples are the dev split of ``clapnq`` / ``cmrc``, a QA file or a derived folder, taken half
answerable and half not (:func:`balanced`); the knowledge base is filled with the matching corpus
only when the documents it holds don't match (:func:`ensure_corpus`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import dspy

from optimize.derived_data import derived_loader
from optimize.errors import DataError
from optimize.metrics import field_value
from optimize.qa_format import load_qa_file
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


QA_FIELDS = ("id", "question", "answers", "answer", "answerable", "gold_doc_ids", "related_doc_ids", "language")


def _qa_record(obj: Any, where: str) -> dict[str, Any]:
    """One JSONL QA record checked and completed (``where`` names its file and line in errors)."""
    if not isinstance(obj, dict):
        raise DataError(f"{where}: a record must be a JSON object, got {type(obj).__name__}")
    question = obj.get("question")
    if not isinstance(question, str) or not question.strip():
        raise DataError(f"{where}: the record has no question (a non-empty string)")
    record = {k: obj[k] for k in QA_FIELDS if k in obj}
    if "answers" in record and not (isinstance(record["answers"], list)
                                    and all(isinstance(a, str) for a in record["answers"])):
        raise DataError(f"{where}: 'answers' must be a list of strings")
    if "answer" in record and not isinstance(record["answer"], str):
        raise DataError(f"{where}: 'answer' must be a string")
    for key in ("gold_doc_ids", "related_doc_ids"):
        if key in record and not (isinstance(record[key], list) and all(isinstance(x, (str, int)) for x in record[key])):
            raise DataError(f"{where}: {key!r} must be a list of document ids")
    if "answerable" in record and not isinstance(record["answerable"], bool):
        raise DataError(f"{where}: 'answerable' must be true or false")
    if "id" in record and not isinstance(record["id"], (str, int)):
        raise DataError(f"{where}: 'id' must be a string or a number")
    return record


def read_qa_records(path: Path) -> list[dict[str, Any]]:
    """The QA records of a JSONL file; DataError naming the line for anything that is not one."""
    records = []
    try:
        with open(path, encoding="utf-8") as fh:
            lines = list(fh)
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise DataError(f"{path}: cannot be read: {exc.strerror or exc}") from None
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path} line {lineno}"
        try:
            obj = json.loads(line)
        except (json.JSONDecodeError, RecursionError) as exc:
            raise DataError(f"{where}: not valid JSON: {exc}") from None
        record = _qa_record(obj, where)
        record.setdefault("id", f"{path.stem}:{lineno}")
        record["id"] = str(record["id"])
        record.setdefault("answers", [record["answer"]] if record.get("answer") else [])
        record.setdefault("answerable", bool(record["answers"]))
        record.setdefault("gold_doc_ids", [])
        records.append(record)
    return records


def load_examples(dataset: str, splits_dir: Path, limit: int | None = None) -> list[dspy.Example]:
    """Dev examples of ``clapnq`` / ``cmrc`` (the derived splits in ``splits_dir``), of a QA file
    (:mod:`optimize.qa_format`, refused with its first bad line) or of a derived data folder (its ``qa``
    dev split), balanced by :func:`balanced`. DataError for a dataset without examples."""
    if dataset in DATASET_TASKS:
        examples = load_split(DATASET_TASKS[dataset][0], "dev", splits_dir)
    elif Path(dataset).is_dir():  # a derived data folder (selfrag data derive): its qa dev questions
        examples = derived_loader(dataset)("qa", "dev")
    else:
        path = Path(dataset)
        if not path.is_file():
            raise DataError(f"dataset {dataset!r} is neither clapnq, cmrc, a QA file nor a derived data folder")
        examples = [to_example(item.record(), "qa_en") for item in load_qa_file(path)]  # optimize.qa_format
    if not examples:
        raise DataError(f"dataset {dataset!r} has no examples")
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
