"""Soft labels: a probability per label of a judgement, read from the token log-probabilities of the call.

A judgement such as ``relevance: Literal["relevant", "irrelevant"]`` is decoded greedily, so the text
holds one label. The log-probabilities of the value's tokens (OpenAI format: per generated token its
``token``, ``logprob`` and ``top_logprobs`` alternatives) say how close the other labels came:

- the value is located in the completion (JSONAdapter's ``"field": value`` or ChatAdapter's
  ``[[ ## field ## ]]`` block); character offsets come from concatenating the token strings;
- walking the value's tokens, each alternative at a step is matched against every label still
  consistent with the decoded text so far (prefix match of the label's remaining characters, the JSON
  quotes, leading whitespace and the character that must follow the value handled). An alternative
  consistent with exactly one label is that label's mass at this step. An alternative consistent
  with several labels (a shared prefix, e.g. ``1`` for the labels 1 and 10) is followed if it is the
  chosen token, multiplying its probability into the later steps; if it is not, what would have
  followed was never observed and its mass is split evenly over those labels. Dropped: alternatives
  consistent with no label (tokens the schema grammar forbids) and whitespace/quote variants that
  hold no character of any label;
- each step's probabilities are renormalised over its label-consistent alternatives, so the result
  is the model's distribution *conditioned on answering with a label* — what a grammar-constrained
  decoder samples from; the masses are finally renormalised over the label set. Once only one label
  is consistent, its remaining tokens are forced and count as probability 1.

Consequences: a label the constrained decoder forced (no other label among the alternatives) comes
out with probability 1; a label missing from the top-k alternatives gets 0. ``top_logprobs`` should
cover the label set at its first divergent token (5 covers every judgement here but the 0..10 score,
whose rarest digits then get 0). Without log-probabilities, or when the value cannot be located in
them, the decoded label gets probability 1 with ``soft=False``.

Pure Python; nothing here imports DSPy or the runtime.
"""

from __future__ import annotations

import json
import math
import re
import typing
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Label = str | int | bool

__all__ = [
    "SoftLabel",
    "TokenStep",
    "decoded_label",
    "expected_value",
    "hard_label",
    "label_values",
    "same_label",
    "soft_label",
    "token_logprobs",
]


@dataclass(frozen=True)
class SoftLabel:
    """A judgement's label with a probability per label.

    ``label`` is the argmax of ``probs`` (ties go to ``decoded``); ``decoded`` is the label the text
    holds; ``soft`` says the probabilities were measured from log-probabilities rather than set to 1
    for the decoded label.
    """

    label: Label
    probs: dict[Label, float]
    soft: bool
    decoded: Label | None = None

    def p(self, label: Label) -> float:
        return self.probs.get(label, 0.0)


def hard_label(label: Label, labels: Sequence[Label]) -> SoftLabel:
    """Probability 1 for ``label`` (the fallback without log-probabilities)."""
    probs = {value: 0.0 for value in labels}
    probs[label] = 1.0
    return SoftLabel(label, probs, soft=False, decoded=label)


def expected_value(probs: Mapping[Any, float], values: Mapping[Any, float] | None = None) -> float:
    """E[value] under ``probs``: ``values`` maps each label to a number (default: the label itself).

    ``expected_value(usefulness.probs)`` is E[use] on the 1..5 scale; with
    ``{"fully": 1, "partially": 0.5, "no": 0}`` it is the expected support score.
    """
    total = sum(probs.values())
    if total <= 0:
        raise ValueError("expected_value needs a distribution with positive mass")
    score = 0.0
    for label, p in probs.items():
        value = label if values is None else values[label]
        score += float(value) * p
    return score / total


def label_values(annotation: Any) -> tuple[Label, ...]:
    """The label set of an output field's annotation: a ``Literal``'s values, or (True, False) for bool."""
    if annotation is bool:
        return (True, False)
    if typing.get_origin(annotation) is typing.Literal:
        return tuple(typing.get_args(annotation))
    raise ValueError(f"not a label annotation (a Literal or bool): {annotation!r}")


# ─── Token log-probabilities in OpenAI format ───────────────────────────────


@dataclass(frozen=True)
class TokenStep:
    """One generated token: its text, log-probability and the reported alternatives."""

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...]


def _get(obj: Any, key: str, default: Any = None) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(key, default)
    return getattr(obj, key, default)


def token_logprobs(logprobs: Any) -> list[TokenStep] | None:
    """Normalise ``{"content": [...]}``, a bare list, or objects with the same attributes (LiteLLM's
    ``ChoiceLogprobs``, lm15's ``TokenLogprob`` with ``top``) to steps; None when there are none."""
    if logprobs is None:
        return None
    content = logprobs if isinstance(logprobs, (list, tuple)) else _get(logprobs, "content")
    if not content:
        return None
    steps = []
    for item in content:
        token, logprob = _get(item, "token"), _get(item, "logprob")
        if token is None or logprob is None:
            return None
        top = _get(item, "top_logprobs")
        if top is None:
            top = _get(item, "top", ())
        alternatives = tuple((str(_get(t, "token")), float(_get(t, "logprob"))) for t in top)
        steps.append(TokenStep(str(token), float(logprob), alternatives))
    return steps


# ─── What each label looks like in the text ─────────────────────────────────

_JSON_AFTER_VALUE = set(",}] \t\r\n")
_WORD = re.compile(r"\w")


@dataclass(frozen=True)
class _Form:
    """One way a label is written: ``literal`` (opening quote + label text), then one follow character."""

    label: Label
    literal: str
    follow: str  # "quote": a closing quote | "json": what ends a JSON value | "word": a non-word character

    @property
    def label_start(self) -> int:
        """The state after the opening quote: a larger state has read a character of the label."""
        return 1 if self.follow == "quote" else 0

    def follows(self, ch: str) -> bool:
        if self.follow == "quote":
            return ch == '"'
        if self.follow == "json":
            return ch in _JSON_AFTER_VALUE
        return not _WORD.match(ch)


def _forms(labels: Sequence[Label], fmt: str) -> list[_Form]:
    forms = []
    for label in labels:
        if isinstance(label, bool):
            if fmt == "json":
                forms.append(_Form(label, json.dumps(label), "json"))
            else:
                forms += [_Form(label, word, "word") for word in (str(label), str(label).lower())]
        elif isinstance(label, (int, float)):
            forms.append(_Form(label, json.dumps(label), "json" if fmt == "json" else "word"))
        elif fmt == "json":
            forms.append(_Form(label, json.dumps(str(label), ensure_ascii=False)[:-1], "quote"))
        else:
            forms.append(_Form(label, str(label), "word"))
    return forms


# State of a form while reading text: -1 = in the leading whitespace, 0..len(literal) = characters of
# the literal matched, DONE = the follow character was seen (anything may come after).
_DONE = 1 << 30


def _advance(form: _Form, state: int, text: str) -> int | None:
    """The state after reading ``text`` from ``state``, or None when ``text`` leaves the form."""
    for ch in text:
        if state == _DONE:
            return _DONE
        if state == -1:
            if ch.isspace():
                continue
            state = 0
        if state < len(form.literal):
            if ch != form.literal[state]:
                return None
            state += 1
        elif form.follows(ch):
            state = _DONE
        else:
            return None
    return state


def _complete_at_end(form: _Form, state: int) -> bool:
    return state == _DONE or (state == len(form.literal) and form.follow != "quote")


# ─── Locating the value ─────────────────────────────────────────────────────


def same_label(a: Any, b: Label) -> bool:
    """Equal as labels: True is not 1, False is not 0."""
    return type(a) is type(b) and a == b if isinstance(b, bool) or isinstance(a, bool) else a == b


def _locate(text: str, field: str, labels: Sequence[Label]) -> tuple[str, int, Label] | None:
    """(format, offset where the value's whitespace starts, decoded label) of ``field`` in ``text``."""
    decoder = json.JSONDecoder()
    for match in re.finditer(r'"' + re.escape(field) + r'"\s*:', text):
        start = match.end()
        rest = len(text[start:]) - len(text[start:].lstrip())
        try:
            value, _ = decoder.raw_decode(text, start + rest)
        except ValueError:
            continue
        for label in labels:
            if same_label(value, label):
                return "json", start, label
    for match in re.finditer(r"\[\[ ## " + re.escape(field) + r" ## \]\]", text):
        start = match.end()
        block = text[start:].split("[[ ##", 1)[0].strip()
        for label in labels:
            forms = _forms([label], "chat")
            if any(block == f.literal for f in forms):
                return "chat", start, label
    return None


def decoded_label(text: str, field: str, labels: Sequence[Label]) -> Label | None:
    """The label ``field`` holds in a completion's text (JSON or ChatAdapter format), if any."""
    found = _locate(text, field, labels)
    return None if found is None else found[2]


# ─── The extraction ─────────────────────────────────────────────────────────


def _alternatives(step: TokenStep) -> dict[str, float]:
    probs: dict[str, float] = {}
    for token, logprob in step.top:
        if token:  # an empty string (a special token) carries no characters
            probs[token] = probs.get(token, 0.0) + math.exp(logprob)
    if step.token and step.token not in probs:
        probs[step.token] = math.exp(step.logprob)
    return probs


def _measure(
    steps: list[TokenStep], value_start: int, forms: list[_Form], decoded: Label
) -> dict[Label, float] | None:
    """Mass per label from the steps (see the module docstring), or None if the text disagrees."""
    mass: dict[Label, float] = {}
    states = {form: -1 for form in forms}  # the live forms and their state at the current token start
    prefix = 1.0
    pos = 0
    for step in steps:
        end = pos + len(step.token)
        if end <= value_start:  # wholly before the value: the key, the colon
            pos = end
            continue
        lead = "" if pos >= value_start else step.token[: value_start - pos]

        def classify(token: str) -> tuple[frozenset, bool]:
            """The labels ``token`` is consistent with, and whether it holds any label character."""
            if not token.startswith(lead) and not lead.startswith(token):
                return frozenset(), False
            rest = token[len(lead) :]
            labels, informative = set(), False
            for form, state in states.items():
                after = _advance(form, state, rest)
                if after is not None:
                    labels.add(form.label)
                    informative = informative or after > form.label_start
            return frozenset(labels), informative

        alternatives = _alternatives(step)
        kinds = {token: classify(token) for token in alternatives}
        if not kinds.get(step.token, (frozenset(), False))[0]:
            return None  # the decoded text is not one of the labels' forms
        # Counted: the chosen token, and every alternative that names one label or a few (a shared
        # prefix); dropped: illegal tokens, and whitespace/quote variants that say nothing of the label.
        counted = {
            token: labels
            for token, (labels, informative) in kinds.items()
            if token == step.token or len(labels) == 1 or (labels and informative)
        }
        z = sum(alternatives[token] for token in counted)
        if z <= 0:
            return None
        for token, labels in counted.items():
            if token != step.token:  # a shared prefix not taken: split evenly over its labels
                for label in labels:
                    mass[label] = mass.get(label, 0.0) + prefix * alternatives[token] / z / len(labels)
        rest = step.token[len(lead) :]
        advanced = {form: _advance(form, state, rest) for form, state in states.items()}
        states = {form: after for form, after in advanced.items() if after is not None}
        p_chosen = prefix * alternatives[step.token] / z
        if len({form.label for form in states}) == 1:
            mass[decoded] = mass.get(decoded, 0.0) + p_chosen
            return mass
        prefix = p_chosen
        pos = end
    # The text ended with several labels still live (e.g. "1" when 10 is a label too): the complete one.
    done = {form.label for form, state in states.items() if _complete_at_end(form, state)}
    if done != {decoded}:
        return None
    mass[decoded] = mass.get(decoded, 0.0) + prefix
    return mass


def soft_label(
    field: str,
    labels: Iterable[Label],
    logprobs: Any = None,
    *,
    text: str | None = None,
    decoded: Label | None = None,
) -> SoftLabel:
    """The probability of each label of ``field`` in one completion.

    ``logprobs`` is the call's token log-probabilities in OpenAI format (``pred.logprobs`` of a
    ``dspy.Predict`` whose LM was built with ``logprobs=True, top_logprobs=K``), or None. The
    completion text is the concatenation of the token strings; ``text`` is only needed to read the
    decoded label when there are no log-probabilities and ``decoded`` is not given. Raises
    ValueError when no label can be found at all.
    """
    labels = tuple(labels)
    if not labels:
        raise ValueError("soft_label needs at least one label")
    steps = token_logprobs(logprobs)
    found = None
    if steps:
        joined = "".join(step.token for step in steps)
        found = _locate(joined, field, labels)
    if decoded is None:
        if found is not None:
            decoded = found[2]
        elif text is not None:
            decoded = decoded_label(text, field, labels)
        if decoded is None:
            raise ValueError(f"no label of {field!r} (one of {list(labels)}) found in the completion")
    elif not any(same_label(decoded, label) for label in labels):
        raise ValueError(f"decoded value {decoded!r} of {field!r} is not one of {list(labels)}")
    if found is None or not same_label(found[2], decoded):
        return hard_label(decoded, labels)
    fmt, value_start, _ = found
    mass = _measure(steps, value_start, _forms(labels, fmt), decoded)
    if not mass or sum(mass.values()) <= 0:
        return hard_label(decoded, labels)
    total = sum(mass.values())
    probs = {label: mass.get(label, 0.0) / total for label in labels}
    best = max(labels, key=lambda label: (probs[label], same_label(label, decoded)))
    return SoftLabel(best, probs, soft=True, decoded=decoded)
