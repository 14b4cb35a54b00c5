"""The four SelfRAG judgements an optimizer compiles on their own labelled sets, and their examples.

Judgements (``JUDGEMENTS``): name → SelfRAG predictor, labelled task, metric::

    retrieve   → decide_retrieval  / retrieve   / retrieve_accuracy
    relevance  → grade_relevance   / relevance  / relevance_accuracy
    support    → judge_support     / support    / support_accuracy
    usefulness → judge_usefulness  / usefulness / usefulness_accuracy

With a derived data folder (``selfrag compile --data DIR``) the answer signature is a stage too
(``ANSWER``: ``generate_answer`` / ``answer`` / ``answer_quality``, label ``answerable``): ``"all"`` then
includes it (``parse_judgements(..., with_answer=True)``).

A judgement is compiled as a one-predictor :class:`JudgementModule` around a copy of the SelfRAG
predictor; :func:`copy_predictor_state` puts the result back. The labelled examples are shown to the
judge the way the program shows them at run time: a relevance passage becomes ``[1] (title) «text»``
and support passages ``[n] «text»`` (:func:`runtime_view`), each cut to the window around the question's
terms that the program shows (``passage_chars``, 900 by default), so compiled demos look like the prompts
they will sit in — and cost what those passages cost (an unwindowed 1,600-character demo passage made
every support call ~280 prompt tokens longer, with the same dev accuracy once windowed).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import dspy

from optimize.errors import CompileError
from optimize.metrics import (
    answer_quality,
    relevance_accuracy,
    retrieve_accuracy,
    support_accuracy,
    usefulness_accuracy,
)
from programs.passages import quote_safe
from programs.passages import format_passages, passage_window
from programs.settings import ProgramSettings

RUNTIME_CHARS = ProgramSettings().passage_chars  # the window a judge reads at run time
from programs.types import Passage

SEED = 0  # sampling of the examples and the optimizers' own seeds

SplitLoader = Callable[[str, str], list]  # (task, split) → examples, e.g. optimize.splits.load_split


@dataclass(frozen=True)
class Judgement:
    name: str
    predictor: str  # attribute of SelfRAG
    task: str  # labelled task of optimize.splits
    metric: Callable[..., Any]
    label: str  # the output field the metric checks


JUDGEMENTS: dict[str, Judgement] = {
    "retrieve": Judgement("retrieve", "decide_retrieval", "retrieve", retrieve_accuracy, "decision"),
    "relevance": Judgement("relevance", "grade_relevance", "relevance", relevance_accuracy, "relevance"),
    "support": Judgement("support", "judge_support", "support", support_accuracy, "support"),
    "usefulness": Judgement("usefulness", "judge_usefulness", "usefulness", usefulness_accuracy, "usefulness"),
}
ANSWER = Judgement("answer", "generate_answer", "answer", answer_quality, "answerable")
STAGES: dict[str, Judgement] = {**JUDGEMENTS, "answer": ANSWER}  # what compile_judgement can compile


def parse_judgements(value: str | Sequence[str], with_answer: bool = False) -> list[str]:
    """``"all"``, one name, a comma list, or a sequence of names → validated list of judgement names
    (``answer`` only ``with_answer``: it needs a derived data folder)."""
    known = STAGES if with_answer else JUDGEMENTS
    items = [value] if isinstance(value, str) else list(value)
    names: list[str] = []
    for item in items:
        for part in str(item).split(","):
            part = part.strip().lower()
            if not part:
                continue
            if part == "all":
                names.extend(n for n in known if n not in names)
            elif part in known:
                if part not in names:
                    names.append(part)
            elif part in STAGES:
                raise CompileError(f"the {part!r} stage needs a derived data folder: compile with --data DIR")
            else:
                raise CompileError(f"unknown judgement {part!r}: use one of {', '.join(known)} or all")
    if not names:
        raise CompileError("no judgement given")
    return names


# ---------------------------------------------------------------- the one-predictor module


class JudgementModule(dspy.Module):
    """A one-predictor module around a copy of a SelfRAG judgement, for the optimizers."""

    def __init__(self, name: str, predictor: dspy.Predict):
        super().__init__()
        self._name = name
        setattr(self, name, predictor)

    @property
    def predictor(self) -> dspy.Predict:
        return getattr(self, self._name)

    def forward(self, **inputs: Any) -> dspy.Prediction:
        return self.predictor(**inputs)


def _clean_demo(demo: Any, predictor: dspy.Predict) -> dspy.Example:
    """Only the signature's fields (and DSPy's ``augmented`` flag) go into the artifact."""
    keep = set(predictor.signature.fields) | {"augmented"}
    data = demo.toDict() if hasattr(demo, "toDict") else dict(demo)
    return dspy.Example(**{k: v for k, v in data.items() if k in keep})


def copy_predictor_state(source: dspy.Predict, target: dspy.Predict) -> None:
    """Demos (signature fields only) and instructions of ``source`` into ``target``."""
    source.demos = [_clean_demo(d, source) for d in source.demos]
    target.load_state(source.dump_state())


# ---------------------------------------------------------------- examples as the program shows them

_NUMBERED = re.compile(r"^\[(\d+)\]\s*", re.M)
_FORMATTED = re.compile(r"^\[\d+\](?: \([^\n]*?\))? «")  # already "[1] (title) «text»"


def runtime_view(example: dspy.Example, task: str, max_chars: int = RUNTIME_CHARS) -> dspy.Example:
    """The example with its passage(s) formatted as SelfRAG formats them at run time: numbered, quoted,
    each the ``max_chars`` window around the question's terms (``program.passage_chars``/``grade_chars``)."""
    question = str(example.get("question") or "")
    if task == "relevance" and not _FORMATTED.match(str(example.passage)):
        p = Passage(id="p", text=str(example.passage), metadata={"title": str(example.get("title") or "")})
        return example.copy(passage=format_passages([p], max_chars=max_chars, query=question))
    if task in ("support", "answer") and not _FORMATTED.match(str(example.passages)):
        parts = _NUMBERED.split(str(example.passages))
        if len(parts) >= 3 and not parts[0].strip():
            blocks = [f"[{parts[i]}] «{quote_safe(passage_window(parts[i + 1].strip(), question, max_chars))}»"
                      for i in range(1, len(parts) - 1, 2)]
            return example.copy(passages="\n".join(blocks))
    return example


def sample_split(task: str, split: str, n: int | None, loader: SplitLoader, seed: int = SEED) -> list[dspy.Example]:
    """``n`` examples of ``task``/``split`` from ``loader`` (all when None), a seeded sample in file
    order, shown as the program shows them."""
    return [runtime_view(ex, task) for ex in seeded_sample(task, split, n, loader, seed)]


def seeded_sample(task: str, split: str, n: int | None, loader: SplitLoader, seed: int = SEED) -> list[dspy.Example]:
    """``n`` examples of ``task``/``split`` from ``loader`` as they are stored (all when None), a seeded sample
    in file order; CompileError when the split has none."""
    examples = list(loader(task, split))
    if not examples:
        raise CompileError(f"no {split} examples for task {task!r}")
    if n is not None and n < len(examples):
        chosen = set(random.Random(f"{seed}:{task}:{split}").sample(range(len(examples)), n))
        examples = [ex for i, ex in enumerate(examples) if i in chosen]
    return examples
