"""From a judgement's prediction to a probability per label, recorded on its trace step.

A prediction made by an LM built with ``logprobs=True`` carries the call's token log-probabilities as
``pred.logprobs`` (OpenAI format); :func:`programs.soft_labels.soft_label` turns the label tokens'
log-probabilities into a distribution over the field's labels. Without log-probabilities the decoded
label gets probability 1 and the step is marked ``soft=False``. A batched judgement (a list of
per-passage verdicts in one output) is read item by item: the n-th occurrence of the label field in
the completion is the n-th verdict's label.
"""

from __future__ import annotations

import json
from typing import Any

from programs.soft_labels import (Label, SoftLabel, hard_label, label_values, same_label, soft_label,
                                  token_logprobs)
from programs.types import TraceStep


def field_labels(predictor: Any, field: str) -> tuple[Label, ...]:
    """The label set of ``field`` in ``predictor``'s signature (a Literal's values, or True/False)."""
    return label_values(predictor.signature.output_fields[field].annotation)


def soft_of(pred: Any, field: str, labels: tuple[Label, ...]) -> SoftLabel | None:
    """The soft label of ``field`` in ``pred``; None when the prediction failed or holds no label."""
    if pred is None:
        return None
    decoded = getattr(pred, field, None)
    if decoded is None:
        return None
    try:
        return soft_label(field, labels, getattr(pred, "logprobs", None), decoded=decoded)
    except ValueError:
        return None


def soft_items(pred: Any, field: str, labels: tuple[Label, ...], decoded: list[Label | None]) -> list[SoftLabel | None]:
    """Soft labels of each item of a batched output, in order: the i-th ``"field"`` key of the
    completion belongs to the i-th item (``decoded[i]`` is that item's parsed label, None if unusable).
    Items whose tokens cannot be located fall back to probability 1 for their decoded label."""
    out: list[SoftLabel | None] = [None if d is None else hard_label(d, labels) for d in decoded]
    raw = getattr(pred, "logprobs", None) if pred is not None else None
    steps = token_logprobs(raw)
    if not steps:
        return out
    content = list(raw if isinstance(raw, (list, tuple)) else (raw.get("content") if isinstance(raw, dict)
                                                                else getattr(raw, "content", [])))
    offsets, pos = [], 0
    for step in steps:
        offsets.append(pos)
        pos += len(step.token)
    text = "".join(step.token for step in steps)
    key = f'"{field}"'
    start = 0
    for i, label in enumerate(decoded):
        at = text.find(key, start)
        if at < 0:
            break
        start = at + len(key)
        if label is None:
            continue
        first = max(j for j, off in enumerate(offsets) if off <= at)
        try:
            out[i] = soft_label(field, labels, content[first:], decoded=label)
        except ValueError:
            pass
    return out


def soft_verdicts(pred: Any, field: str, labels: tuple[Label, ...], parsed: Any) -> list[SoftLabel | None]:
    """Soft labels of a parsed batch (:class:`programs.batch_grading.BatchVerdicts`) in passage order.

    The completion's verdicts are read in the order the model wrote them (:func:`soft_items`) and each is
    given to the passage its number names (``parsed.order``), so a batch listing [2] before [1] does
    not swap the two passages' probabilities."""
    written = soft_items(pred, field, labels, [None if i is None else parsed.labels[i] for i in parsed.order])
    out: list[SoftLabel | None] = [None] * len(parsed.labels)
    for i, soft in zip(parsed.order, written):
        if i is not None:
            out[i] = soft
    return out


def record_soft(step: TraceStep, soft: SoftLabel | None, *, is_output: bool = True) -> None:
    """Put a judgement's probabilities on its trace step (labels as strings, 4 decimals).

    The hard label is the argmax: when the step's ``output`` is this label (``is_output``, the default)
    and the text held another one, ``output`` becomes the argmax and ``decoded`` keeps the text's, so the
    trace shows the label the program routes on. ``is_output=False`` for a label read beside another
    output (the drafter's ``answerable`` beside its answer)."""
    if soft is None:
        return
    step.probs = {str(k).lower() if isinstance(k, bool) else str(k): round(v, 4) for k, v in soft.probs.items()}
    step.soft = soft.soft
    if is_output and soft.decoded is not None and not same_label(soft.label, soft.decoded):
        step.output, step.decoded = soft.label, soft.decoded


def p_of(soft: SoftLabel | None, label: Label, default: float) -> float:
    """P(label) of a soft label; ``default`` when the judgement failed."""
    return default if soft is None else soft.p(label)


def text_logprob(pred: Any, field: str) -> dict[str, float] | None:
    """How sure the model was of a free-text output: the mean and the minimum log-probability of the
    tokens of ``field``'s JSON string value in the completion, and their count (``n``). None without
    log-probabilities, or when the value cannot be located (no ``"field": "..."`` in the tokens).

    A token that straddles the value's boundary (e.g. ``":"`` + opening quote + first word) counts."""
    steps = token_logprobs(getattr(pred, "logprobs", None)) if pred is not None else None
    if not steps:
        return None
    text = "".join(step.token for step in steps)
    key = text.find(f'"{field}"')
    if key < 0:
        return None
    colon = text.find(":", key + len(field) + 2)
    quote = text.find('"', colon + 1) if colon >= 0 else -1
    if quote < 0 or text[colon + 1 : quote].strip():
        return None  # not a string value
    try:
        _, end = json.JSONDecoder().raw_decode(text, quote)
    except ValueError:
        return None
    start, end = quote + 1, end - 1  # the characters between the quotes
    picked, pos = [], 0
    for step in steps:
        nxt = pos + len(step.token)
        if nxt > start and pos < end:
            picked.append(step.logprob)
        pos = nxt
    if not picked:
        return None
    return {"mean": round(sum(picked) / len(picked), 4), "min": round(min(picked), 4), "n": float(len(picked))}
