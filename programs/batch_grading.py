"""Reading a batched relevance output (:class:`signatures.relevance_batch.GradeRelevanceBatch`).

One call grades every passage; its output is trusted only passage by passage. A verdict whose number
is missing, repeated or out of range, or whose label is not a relevance label, leaves that passage
ungraded (``None``) and marks the batch malformed, so the caller grades exactly those passages again
with per-passage calls and records the fallback.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

RELEVANCE_LABELS = frozenset({"relevant", "irrelevant"})


@dataclass(frozen=True)
class BatchVerdicts:
    """Per-passage labels of one batch, in passage order (index 0 is passage [1])."""

    labels: list[str | None]
    malformed: bool
    problems: list[str] = field(default_factory=list)  # one short line per defect, for the trace
    # The passage (0-based) each verdict of the output names, in the output's order; None for a verdict
    # that gave no passage a label. The model may list its verdicts in any order: the n-th verdict's
    # token log-probabilities belong to passage order[n], not to passage n.
    order: list[int | None] = field(default_factory=list)

    @property
    def missing(self) -> list[int]:
        """0-based indices of the passages the batch did not grade: re-grade these one by one."""
        return [i for i, label in enumerate(self.labels) if label is None]


def _fields(verdict: Any) -> tuple[Any, Any]:
    if isinstance(verdict, Mapping):
        return verdict.get("number"), verdict.get("relevance")
    return getattr(verdict, "number", None), getattr(verdict, "relevance", None)


def _as_number(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("[").rstrip("]").isdigit():
        return int(value.strip().lstrip("[").rstrip("]"))
    return None


def parse_batch_verdicts(verdicts: Iterable[Any] | None, n_passages: int) -> BatchVerdicts:
    """Validate a batch output against the ``n_passages`` passages it was asked about.

    ``verdicts`` holds :class:`~signatures.relevance_batch.PassageVerdict` objects or dicts with
    ``number`` (1-based) and ``relevance``; ``None`` (the call failed) leaves every passage ungraded.
    A passage gets a label only when exactly one verdict names it and that verdict's label is
    ``relevant`` or ``irrelevant``; everything else is a problem and makes the batch malformed.
    """
    if n_passages < 0:
        raise ValueError(f"n_passages must be >= 0, got {n_passages}")
    if verdicts is None:
        problems = ["no output"] if n_passages else []
        return BatchVerdicts([None] * n_passages, malformed=n_passages > 0, problems=problems)
    items = list(verdicts)
    problems: list[str] = []
    numbers = [_as_number(_fields(v)[0]) for v in items]
    counts = Counter(n for n in numbers if n is not None)
    labels: list[str | None] = [None] * n_passages
    order: list[int | None] = []
    for verdict, number in zip(items, numbers):
        raw_number, label = _fields(verdict)
        order.append(None)
        if number is None:
            problems.append(f"verdict without a passage number: {raw_number!r}")
        elif not 1 <= number <= n_passages:
            problems.append(f"passage [{number}] out of range 1..{n_passages}")
        elif counts[number] > 1:
            if f"passage [{number}] graded {counts[number]} times" not in problems:
                problems.append(f"passage [{number}] graded {counts[number]} times")
        elif label not in RELEVANCE_LABELS:
            problems.append(f"passage [{number}] has label {label!r}")
        else:
            labels[number - 1] = label
            order[-1] = number - 1
    for i, label in enumerate(labels, start=1):
        if label is None and counts[i] == 0:
            problems.append(f"passage [{i}] not graded")
    return BatchVerdicts(labels, malformed=bool(problems), problems=problems, order=order)
