"""The questions an evaluation runs on, and the knowledge base they are answered from.

Examples are the dev split of ``clapnq`` / ``cmrc``, a QA file or a derived folder, taken half
answerable and half not (a third unanswerable for ``cmrc``: :func:`balanced`); the knowledge base is
filled with the matching corpus
only when the documents it holds don't match (:func:`ensure_corpus`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

import dspy

from optimize.derived_data import derived_loader
from optimize.errors import DataError
from optimize.metrics import field_value
from optimize.qa_format import load_qa_file
from optimize.splits import load_split, to_example

DATASET_TASKS = {"clapnq": ("qa_en", "clapnq"), "cmrc": ("qa_zh", "cmrc-qa")}  # dataset → (split task, corpus)
# Share of unanswerable questions a --limit takes: half for ClapNQ, a third for CMRC (as its split holds).
UNANSWERABLE_SHARE = {"cmrc": 1 / 3}


def example_id(example: Any) -> str:
    return str(field_value(example, "id") or field_value(example, "question"))


def balanced(examples: Sequence[Any], limit: int | None, unanswerable: float = 0.5) -> list[Any]:
    """The first ``limit`` examples, answerable and unanswerable interleaved so that after n picks
    ``floor(n · unanswerable)`` are unanswerable (half: alternating) while both kinds last, in file order
    within each kind; all examples (file order) when ``limit`` is None."""
    if limit is None or limit >= len(examples):
        return list(examples)
    return _interleaved(examples, limit, unanswerable)


def balanced_after(examples: Sequence[Any], skip: int, limit: int, unanswerable: float = 0.5) -> list[Any]:
    """The ``limit`` examples that follow the first ``skip`` of :func:`balanced`'s order (fewer at the end):
    ``balanced(examples, skip)`` + this = the interleaved order of ``skip + limit`` examples, so rows recorded
    on the first ``skip`` questions and on these never overlap — the whole split included."""
    if skip <= 0:
        return balanced(examples, limit, unanswerable)
    return _interleaved(examples, min(skip + limit, len(examples)), unanswerable)[skip:]


def _interleaved(examples: Sequence[Any], limit: int, unanswerable: float) -> list[Any]:
    yes = [e for e in examples if field_value(e, "answerable", True)]
    no = [e for e in examples if not field_value(e, "answerable", True)]
    out: list[Any] = []
    n_no = 0
    while len(out) < limit and (yes or no):
        want_no = math.floor((len(out) + 1) * unanswerable + 1e-9) > n_no
        pool = no if (want_no and no) or not yes else yes
        n_no += pool is no
        out.append(pool.pop(0))
    return out


def unanswerable_share(dataset: str) -> float:
    """The share of unanswerable questions ``--limit`` takes from ``dataset``."""
    return UNANSWERABLE_SHARE.get(dataset, 0.5)


QA_FIELDS = ("id", "question", "answers", "answer", "answerable", "gold_doc_ids", "related_doc_ids", "language")


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
    return balanced(examples, limit, unanswerable_share(dataset))


def corpus_name(dataset: str, examples: Sequence[Any] = ()) -> str:
    """The corpus a dataset's questions are answered from: clapnq (+ XQuAD distractors), or for Chinese
    questions cmrc-qa — what ``--dataset cmrc`` answers from: without the held-out paragraphs, so qa_zh's
    unanswerable questions stay unanswerable from a QA file or a derived folder too."""
    if dataset in DATASET_TASKS:
        return DATASET_TASKS[dataset][1]
    langs = {field_value(e, "language") for e in examples}
    return DATASET_TASKS["cmrc" if "zh" in langs else "clapnq"][1]


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
