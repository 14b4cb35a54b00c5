"""Compile SelfRAG: each judgement on its own labelled set, then (optionally) the whole program end to end.

One judgement at a time (:func:`compile_judgement`): the SelfRAG predictor is wrapped in a one-predictor
:class:`JudgementModule`, the optimizer runs with the judgement's metric on the training examples, the
module is scored on the dev examples before and after, and the compiled predictor's state (demos and
instructions) is copied back into the SelfRAG program. :func:`compile_program` runs the requested
judgements (and the end-to-end stage when asked), writes ``<out_dir>/<name>.json`` through
:func:`programs.artifacts.save_artifact` and ``<out_dir>/<name>.manifest.json`` (the manifest alone).

Judgements (``JUDGEMENTS``): name → SelfRAG predictor, labelled task, metric::

    retrieve   → decide_retrieval  / retrieve   / retrieve_accuracy
    relevance  → grade_relevance   / relevance  / relevance_accuracy
    support    → judge_support     / support    / support_accuracy
    usefulness → judge_usefulness  / usefulness / usefulness_accuracy

The labelled examples are shown to the judge the way the program shows them at run time: a relevance
passage becomes ``[1] (title) «text»`` and support passages ``[n] «text»`` (:func:`runtime_view`),
so compiled demos look like the prompts they will sit in.

Optimizers and what ``budget`` sets (``None`` = the default in brackets):

==============  =========================================================================
bootstrap       BootstrapFewShot: max demos per predictor [4] (``max_bootstrapped_demos`` =
                ``max_labeled_demos`` = budget; the teacher's labelled demos and the final demos
                both stay within ``budget``)
random-search   BootstrapFewShotWithRandomSearch: ``num_candidate_programs`` [4] (4 demos max,
                candidates scored on the training examples; dev stays held out)
mipro           MIPROv2: ``num_trials`` [None → ``auto="light"``]; with a budget, ``auto=None``,
                ``num_candidates = max(2, budget // 2)``, 4 demos max; needs ``optuna``
                (``pip install 'dspy[optuna]'``), refused with a clear error without it
gepa            dspy.GEPA: ``max_metric_calls`` [None → ``auto="light"``]; reflection LM = the
                generator LM with ``max_tokens >= 2048``; the metric is wrapped to return
                ``dspy.Prediction(score, feedback)``
==============  =========================================================================

End to end (``e2e=True``): the whole SelfRAG is compiled on ``qa_en`` train with ``e2e_metric``
against a knowledge base holding ``corpus_documents("clapnq")`` (collection ``clapnq``, built once).
Only *bootstrapped* traces become demos there (``max_labeled_demos = 0``: a QA example has none of a
judgement's fields). The compiled demos of the predictors no judgement stage compiled in this run
(``generate_answer``, ``rewrite_query``, ``answer_directly``, and any judgement not compiled on its
own set) are kept; a judgement compiled on its labelled set keeps that state. The end-to-end
student starts from reset predictors (DSPy's optimizers reset their student), so its traces come from
uncompiled judges. Costs (LM calls, tokens) are counted by :class:`UsageMeter`, a DSPy callback.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import random
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import dspy  # noqa: E402
from dspy.utils.callback import BaseCallback  # noqa: E402

from optimize import datasets  # noqa: E402
from optimize.metrics import (  # noqa: E402
    e2e_metric,
    relevance_accuracy,
    retrieve_accuracy,
    support_accuracy,
    usefulness_accuracy,
    usefulness_side,
)
from programs.artifacts import PROGRAM_VERSION, save_artifact, signature_hash  # noqa: E402
from programs.base import quote_safe  # noqa: E402
from programs.selfrag import SelfRAG, format_passages  # noqa: E402
from programs.types import Passage  # noqa: E402

logger = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS_DIR = ROOT / "artifacts"
E2E_COLLECTION = "clapnq"
SEED = 0


# ---------------------------------------------------------------- judgements and optimizers


@dataclass(frozen=True)
class Judgement:
    name: str
    predictor: str  # attribute of SelfRAG
    task: str  # optimize.datasets task
    metric: Callable[..., Any]
    label: str  # the output field the metric checks


JUDGEMENTS: dict[str, Judgement] = {
    "retrieve": Judgement("retrieve", "decide_retrieval", "retrieve", retrieve_accuracy, "decision"),
    "relevance": Judgement("relevance", "grade_relevance", "relevance", relevance_accuracy, "relevance"),
    "support": Judgement("support", "judge_support", "support", support_accuracy, "support"),
    "usefulness": Judgement("usefulness", "judge_usefulness", "usefulness", usefulness_accuracy, "usefulness"),
}
OPTIMIZERS = ("bootstrap", "random-search", "mipro", "gepa")
DEFAULT_BUDGET = {"bootstrap": 4, "random-search": 4, "mipro": None, "gepa": None}
BUDGET_KNOB = {
    "bootstrap": "max_bootstrapped_demos = max_labeled_demos",
    "random-search": "num_candidate_programs",
    "mipro": "num_trials",
    "gepa": "max_metric_calls",
}


class CompileError(ValueError):
    """Bad compile request (unknown judgement or optimizer, sizes out of range, no data)."""


def parse_judgements(value: str | Sequence[str]) -> list[str]:
    """``"all"``, one name, a comma list, or a sequence of names → validated list of judgement names."""
    items = [value] if isinstance(value, str) else list(value)
    names: list[str] = []
    for item in items:
        for part in str(item).split(","):
            part = part.strip().lower()
            if not part:
                continue
            if part == "all":
                names.extend(n for n in JUDGEMENTS if n not in names)
            elif part in JUDGEMENTS:
                if part not in names:
                    names.append(part)
            else:
                raise CompileError(f"unknown judgement {part!r}: use one of {', '.join(JUDGEMENTS)} or all")
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


def runtime_view(example: dspy.Example, task: str) -> dspy.Example:
    """The example with its passage(s) formatted as SelfRAG formats them at run time."""
    if task == "relevance" and not _FORMATTED.match(str(example.passage)):
        p = Passage(id="p", text=str(example.passage), metadata={"title": str(example.get("title") or "")})
        return example.copy(passage=format_passages([p], max_chars=10**6))
    if task == "support" and not _FORMATTED.match(str(example.passages)):
        parts = _NUMBERED.split(str(example.passages))
        if len(parts) >= 3 and not parts[0].strip():
            blocks = [f"[{parts[i]}] «{quote_safe(parts[i + 1].strip())}»" for i in range(1, len(parts) - 1, 2)]
            return example.copy(passages="\n".join(blocks))
    return example


def sample_split(task: str, split: str, n: int | None, seed: int = SEED,
                 loader: Callable[[str, str], list] | None = None) -> list[dspy.Example]:
    """``n`` examples of ``task``/``split`` (all when None), a seeded sample in file order."""
    examples = (loader or datasets.load_split)(task, split)
    if not examples:
        raise CompileError(f"no {split} examples for task {task!r}")
    if n is not None and n < len(examples):
        chosen = set(random.Random(f"{seed}:{task}:{split}").sample(range(len(examples)), n))
        examples = [ex for i, ex in enumerate(examples) if i in chosen]
    return [runtime_view(ex, task) for ex in examples]


def dataset_hash(manifest_path: Path | None = None) -> str | None:
    path = manifest_path or (datasets.SPLITS_DIR / "manifest.json")
    try:
        return json.loads(Path(path).read_text(encoding="utf-8")).get("dataset_hash")
    except (OSError, json.JSONDecodeError):
        return None


# ---------------------------------------------------------------- cost meter


class UsageMeter(BaseCallback):
    """Counts LM calls and tokens of every LM (copies included) while it is in ``dspy.settings.callbacks``.

    Tokens are read from each LM's history: every new history entry (by uuid) is counted once.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: set[str] = set()
        self.calls = 0
        self.errors = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.cached_prompt_tokens = 0
        self.models: set[str] = set()
        self._pending: dict[str, Any] = {}

    def on_lm_start(self, call_id: str, instance: Any, inputs: dict[str, Any]) -> None:
        with self._lock:
            self.calls += 1
            self._pending[call_id] = instance
            model = getattr(instance, "model", None)
            if model:
                self.models.add(str(model))

    def on_lm_end(self, call_id: str, outputs: Any, exception: BaseException | None = None) -> None:
        with self._lock:
            instance = self._pending.pop(call_id, None)
            if exception is not None:
                self.errors += 1
            for entry in reversed(list(getattr(instance, "history", None) or [])):
                uid = entry.get("uuid")
                if uid in self._seen:
                    break
                self._seen.add(uid)
                usage = entry.get("usage") or {}
                self.prompt_tokens += int(usage.get("prompt_tokens") or 0)
                self.completion_tokens += int(usage.get("completion_tokens") or 0)
                details = usage.get("prompt_tokens_details") or {}
                cached = details.get("cached_tokens") if isinstance(details, dict) else None
                self.cached_prompt_tokens += int(cached or usage.get("cache_read_tokens") or 0)

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return {"lm_calls": self.calls, "lm_errors": self.errors, "prompt_tokens": self.prompt_tokens,
                    "completion_tokens": self.completion_tokens, "cached_prompt_tokens": self.cached_prompt_tokens}

    @staticmethod
    def diff(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
        return {k: after[k] - before.get(k, 0) for k in after}


# ---------------------------------------------------------------- progress


class Reporter:
    """Progress hooks for a front end (the CLI draws them with rich). The default does nothing."""

    def stage(self, description: str, total: int | None = None) -> None:  # a new bar
        pass

    def advance(self, n: int = 1) -> None:
        pass

    def done(self) -> None:  # the current bar is finished
        pass

    def log(self, message: str) -> None:
        logger.info(message)


# ---------------------------------------------------------------- evaluation


@dataclass
class EvalResult:
    score: float  # mean metric in [0, 1]
    n: int
    errors: int
    seconds: float
    confusion: dict[str, int] = field(default_factory=dict)  # "gold->predicted": count, when a label is given


def evaluate(module: dspy.Module, devset: list[dspy.Example], metric: Callable, *, num_threads: int = 1,
             reporter: Reporter | None = None, description: str = "evaluate", label: str | None = None) -> EvalResult:
    """Mean ``metric`` of ``module`` over ``devset``; a failed prediction scores 0 and is counted.

    With ``label`` (an output field), also counts ``gold->predicted`` pairs (``error`` for a failure)."""
    reporter = reporter or Reporter()
    reporter.stage(description, total=len(devset))
    errors = 0
    confusion: Counter[str] = Counter()
    lock = threading.Lock()
    start = time.perf_counter()

    def one(example: dspy.Example) -> float:
        nonlocal errors
        got = "error"
        try:
            pred = module(**example.inputs())
            got = str(getattr(pred, label, None)) if label else got
            score = float(metric(example, pred))
        except Exception as exc:  # noqa: BLE001 - one failed example scores 0, the evaluation goes on
            logger.warning("evaluation of %s failed: %s: %s", example.get("id"), type(exc).__name__, exc)
            with lock:
                errors += 1
            score = 0.0
        if label:
            with lock:
                confusion[f"{example.get(label)}->{got}"] += 1
        reporter.advance()
        return score

    if num_threads <= 1:
        scores = [one(ex) for ex in devset]
    else:
        from dspy.utils.parallelizer import ParallelExecutor

        executor = ParallelExecutor(num_threads=num_threads, disable_progress_bar=True, max_errors=len(devset) + 1)
        scores = [0.0 if s is None else s for s in executor.execute(one, devset)]
    reporter.done()
    n = len(devset)
    return EvalResult(score=sum(scores) / n if n else 0.0, n=n, errors=errors,
                      seconds=round(time.perf_counter() - start, 2), confusion=dict(sorted(confusion.items())))


# ---------------------------------------------------------------- optimizers


def feedback_metric(metric: Callable, label: str | None = None) -> Callable:
    """A GEPA metric ``(gold, pred, trace, pred_name, pred_trace)`` → ``dspy.Prediction(score, feedback)``."""

    def gepa_metric(gold, pred, trace=None, pred_name=None, pred_trace=None):
        score = float(metric(gold, pred))
        if label is None:
            feedback = f"Score {score:.2f}." + ("" if score >= 1 else
                                                f" Expected answer: {gold.get('answer') or '(abstain)'}.")
        else:
            want, got = gold.get(label), getattr(pred, label, None) if pred is not None else None
            if score >= 1:
                feedback = f"Correct: {label} = {got!r}."
            else:
                feedback = f"Wrong: {label} should be {want!r}, the judge said {got!r}."
                if label == "usefulness":
                    feedback += (f" Only the side of 3 counts (useful 4-5 vs not useful 1-2); expected side: "
                                 f"{usefulness_side(want)}.")
        return dspy.Prediction(score=score, feedback=feedback)

    return gepa_metric


def counted(metric: Callable, reporter: Reporter) -> Callable:
    """``metric`` that advances the progress display on every call (a call is one training rollout)."""

    def wrapped(example, pred, trace=None, *args, **kwargs):
        try:
            return metric(example, pred, trace, *args, **kwargs)
        finally:
            reporter.advance()

    wrapped.__name__ = getattr(metric, "__name__", "metric")
    return wrapped


def make_optimizer(optimizer: str, metric: Callable, *, budget: int | None, num_threads: int,
                   labeled: bool = True, reflection_lm: dspy.LM | None = None, label: str | None = None,
                   seed: int = SEED) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """The DSPy optimizer for ``optimizer``, its constructor parameters (for the manifest) and compile kwargs.

    ``labeled=False`` (end to end) keeps raw training examples out of the demos.
    """
    if optimizer not in OPTIMIZERS:
        raise CompileError(f"unknown optimizer {optimizer!r}: use one of {', '.join(OPTIMIZERS)}")
    if budget is not None and budget < 1:
        raise CompileError(f"budget must be >= 1, got {budget}")
    budget = DEFAULT_BUDGET[optimizer] if budget is None else budget
    compile_kwargs: dict[str, Any] = {}
    if optimizer == "bootstrap":
        params = {"max_bootstrapped_demos": budget, "max_labeled_demos": budget if labeled else 0, "max_rounds": 1}
        opt = dspy.BootstrapFewShot(metric=metric, **params)
    elif optimizer == "random-search":
        params = {"max_bootstrapped_demos": 4, "max_labeled_demos": 4 if labeled else 0,
                  "num_candidate_programs": budget, "num_threads": num_threads}
        opt = dspy.BootstrapFewShotWithRandomSearch(metric=metric, **params)
    elif optimizer == "mipro":
        if importlib.util.find_spec("optuna") is None:
            raise CompileError("mipro needs the optional dependency optuna (dspy's 'optuna' extra): pip install optuna")
        params = {"max_bootstrapped_demos": 4, "max_labeled_demos": 4 if labeled else 0, "num_threads": num_threads,
                  "seed": seed}
        if budget is None:
            params["auto"] = "light"
        else:
            params.update(auto=None, num_candidates=max(2, budget // 2))
            compile_kwargs["num_trials"] = budget
        opt = dspy.MIPROv2(metric=metric, verbose=False, **params)
    else:  # gepa
        if reflection_lm is None:
            raise CompileError("gepa needs a reflection LM")
        params = {"num_threads": num_threads, "seed": seed, "reflection_minibatch_size": 3}
        if budget is None:
            params["auto"] = "light"
        else:
            params["max_metric_calls"] = budget
        opt = dspy.GEPA(metric=feedback_metric(metric, label), reflection_lm=reflection_lm, **params)
        params["reflection_lm"] = getattr(reflection_lm, "model", str(reflection_lm))
    return opt, params, compile_kwargs


def run_optimizer(opt: Any, optimizer: str, student: dspy.Module, trainset: list[dspy.Example],
                  compile_kwargs: dict[str, Any]) -> dspy.Module:
    if optimizer == "mipro":
        valset = compile_kwargs.pop("valset", None)
        if valset is None and len(trainset) >= 4:  # MIPRO's own split (it wants a validation set)
            cut = max(1, len(trainset) // 5)
            trainset, valset = trainset[cut:], trainset[:cut]
        if valset:
            compile_kwargs.setdefault("minibatch_size", max(1, min(35, len(valset))))
            compile_kwargs.setdefault("minibatch", len(valset) > compile_kwargs["minibatch_size"])
        return opt.compile(student, trainset=trainset, valset=valset, **compile_kwargs)
    if optimizer == "gepa":
        cut = max(1, len(trainset) // 3) if len(trainset) >= 3 else 0
        return opt.compile(student, trainset=trainset[cut:] or trainset, valset=trainset[:cut] or trainset)
    return opt.compile(student, trainset=trainset, **compile_kwargs)


# ---------------------------------------------------------------- one judgement


@dataclass
class StageReport:
    """What one compile stage did; goes into the manifest."""

    name: str
    predictor: str | list[str]
    task: str
    metric: str
    train: int
    dev: int
    before: float | None = None
    after: float | None = None
    dev_errors_before: int = 0
    dev_errors_after: int = 0
    confusion_before: dict[str, int] = field(default_factory=dict)  # "gold->predicted" on dev
    confusion_after: dict[str, int] = field(default_factory=dict)
    demos: dict[str, int] = field(default_factory=dict)
    instructions_changed: dict[str, bool] = field(default_factory=dict)
    seconds: float = 0.0
    cost: dict[str, int] = field(default_factory=dict)
    skipped: str | None = None
    kept: str = "compiled"  # "uncompiled" when compiling lowered the dev score and was rolled back


def compile_judgement(program: SelfRAG, judgement: str, *, optimizer: str = "bootstrap", train: int | None = 50,
                      dev: int | None = 40, budget: int | None = None, num_threads: int = 1,
                      critic_lm: dspy.BaseLM | None = None, adapter: dspy.Adapter | None = None,
                      reflection_lm: dspy.LM | None = None, reporter: Reporter | None = None,
                      meter: UsageMeter | None = None, loader: Callable | None = None,
                      seed: int = SEED, keep_if_better: bool = True) -> tuple[StageReport, dict[str, Any]]:
    """Compile one judgement of ``program`` in place; returns its report and the optimizer parameters.

    With ``keep_if_better`` (default) and a dev set, a compile that lowers the dev score is rolled back
    (``report.kept == "uncompiled"``): the artifact never carries a judge made worse by compiling.

    The judge runs with ``critic_lm`` (default: the program's critic LM) and ``adapter`` (default: the
    program's), exactly as SelfRAG calls it.
    """
    if judgement not in JUDGEMENTS:
        raise CompileError(f"unknown judgement {judgement!r}: use one of {', '.join(JUDGEMENTS)}")
    spec = JUDGEMENTS[judgement]
    reporter = reporter or Reporter()
    meter = meter or UsageMeter()
    trainset = sample_split(spec.task, "train", train, seed, loader)
    devset = sample_split(spec.task, "dev", dev, seed, loader) if dev != 0 else []
    target: dspy.Predict = getattr(program, spec.predictor)
    lm = critic_lm or program.critic_lm
    adapter = adapter or program.adapter
    report = StageReport(name=judgement, predictor=spec.predictor, task=spec.task, metric=spec.metric.__name__,
                         train=len(trainset), dev=len(devset))
    start, cost0 = time.perf_counter(), meter.snapshot()

    context: dict[str, Any] = {"callbacks": [*dspy.settings.get("callbacks", []), meter]}
    if lm is not None:
        context["lm"] = lm
    if adapter is not None:
        context["adapter"] = adapter
    with dspy.context(**context):
        original_state = target.dump_state()
        student = JudgementModule(spec.predictor, target.deepcopy())
        student.predictor.reset()
        old_instructions = student.predictor.signature.instructions
        if devset:
            before = evaluate(student, devset, spec.metric, num_threads=num_threads, reporter=reporter,
                              description=f"{judgement}: dev before", label=spec.label)
            report.before, report.dev_errors_before = round(before.score, 4), before.errors
            report.confusion_before = before.confusion
            reporter.log(f"{judgement}: dev before = {before.score:.3f} ({before.n} examples, {before.seconds:.0f} s)")
        opt, params, compile_kwargs = make_optimizer(optimizer, counted(spec.metric, reporter), budget=budget,
                                                     num_threads=num_threads, reflection_lm=reflection_lm,
                                                     label=spec.label, seed=seed)
        reporter.stage(f"{judgement}: {optimizer} on {len(trainset)} train", total=len(trainset))
        compiled = run_optimizer(opt, optimizer, student, trainset, compile_kwargs)
        reporter.done()
        compiled_pred: dspy.Predict = getattr(compiled, spec.predictor)
        copy_predictor_state(compiled_pred, target)
        after_module = JudgementModule(spec.predictor, target.deepcopy())
        if devset:
            after = evaluate(after_module, devset, spec.metric, num_threads=num_threads, reporter=reporter,
                             description=f"{judgement}: dev after", label=spec.label)
            report.after, report.dev_errors_after = round(after.score, 4), after.errors
            report.confusion_after = after.confusion
            reporter.log(f"{judgement}: dev after = {after.score:.3f} ({after.n} examples, {after.seconds:.0f} s)")
            if keep_if_better and report.before is not None and report.after < report.before:
                target.load_state(original_state)  # never ship a judge that compiling made worse on dev
                report.kept = "uncompiled"
                reporter.log(f"{judgement}: compiling lowered dev accuracy; kept the uncompiled predictor")
    report.demos = {spec.predictor: len(target.demos)}
    report.instructions_changed = {spec.predictor: target.signature.instructions != old_instructions}
    report.seconds = round(time.perf_counter() - start, 2)
    report.cost = UsageMeter.diff(meter.snapshot(), cost0)
    return report, params


# ---------------------------------------------------------------- end to end


def e2e_retriever(settings: Any, reporter: Reporter | None = None) -> Any:
    """Retriever over the ``clapnq`` collection, ingesting ``corpus_documents("clapnq")`` once."""
    from selfrag import wiring

    reporter = reporter or Reporter()
    kb = wiring.build_knowledge_base(settings, collection=E2E_COLLECTION)
    if kb.is_empty():
        docs = datasets.corpus_documents("clapnq")
        reporter.log(f"building the {E2E_COLLECTION!r} collection from {len(docs)} documents (once)")
        kb.add_documents(docs)
    return kb.retriever()


def compile_e2e(program: SelfRAG, *, optimizer: str = "bootstrap", train: int | None = 20, dev: int | None = 10,
                budget: int | None = None, num_threads: int = 1, keep: Sequence[str] = (),
                reflection_lm: dspy.LM | None = None, reporter: Reporter | None = None,
                meter: UsageMeter | None = None, loader: Callable | None = None,
                seed: int = SEED) -> tuple[StageReport, dict[str, Any]]:
    """Compile the whole ``program`` on ``qa_en`` with ``e2e_metric``; predictors named in ``keep`` keep
    their current state, the others take the end-to-end demos. Runs the program sequentially."""
    reporter = reporter or Reporter()
    meter = meter or UsageMeter()
    trainset = sample_split("qa_en", "train", train, seed, loader)
    devset = sample_split("qa_en", "dev", dev, seed, loader) if dev != 0 else []
    names = [n for n, _ in program.named_predictors()]
    report = StageReport(name="e2e", predictor=names, task="qa_en", metric=e2e_metric.__name__,
                         train=len(trainset), dev=len(devset))
    start, cost0 = time.perf_counter(), meter.snapshot()
    saved_threads = program.config.num_threads
    program.config = program.config.model_copy(update={"num_threads": 1})  # traces are per thread
    old = {n: p.signature.instructions for n, p in program.named_predictors()}
    try:
        with dspy.context(callbacks=[*dspy.settings.get("callbacks", []), meter]):
            if devset:
                before = evaluate(program, devset, e2e_metric, num_threads=num_threads, reporter=reporter,
                                  description="e2e: dev before")
                report.before, report.dev_errors_before = round(before.score, 4), before.errors
                reporter.log(f"e2e: dev before = {before.score:.3f} ({before.n} questions)")
            opt, params, compile_kwargs = make_optimizer(optimizer, counted(e2e_metric, reporter), budget=budget,
                                                         num_threads=num_threads, labeled=False,
                                                         reflection_lm=reflection_lm, seed=seed)
            reporter.stage(f"e2e: {optimizer} on {len(trainset)} questions", total=len(trainset))
            student = program.deepcopy()
            for _, p in student.named_predictors():
                p.reset()
            compiled = run_optimizer(opt, optimizer, student, trainset, compile_kwargs)
            reporter.done()
            compiled_preds = dict(compiled.named_predictors())
            for name, target in program.named_predictors():
                if name not in keep:
                    copy_predictor_state(compiled_preds[name], target)
            if devset:
                after = evaluate(program, devset, e2e_metric, num_threads=num_threads, reporter=reporter,
                                 description="e2e: dev after")
                report.after, report.dev_errors_after = round(after.score, 4), after.errors
                reporter.log(f"e2e: dev after = {after.score:.3f} ({after.n} questions)")
    finally:
        program.config = program.config.model_copy(update={"num_threads": saved_threads})
    report.demos = {n: len(p.demos) for n, p in program.named_predictors() if n not in keep}
    report.instructions_changed = {n: p.signature.instructions != old[n]
                                   for n, p in program.named_predictors() if n not in keep}
    report.seconds = round(time.perf_counter() - start, 2)
    report.cost = UsageMeter.diff(meter.snapshot(), cost0)
    return report, params


# ---------------------------------------------------------------- the whole compile


@dataclass
class CompileResult:
    program: SelfRAG
    manifest: dict[str, Any]
    artifact: Path
    manifest_path: Path
    stages: list[StageReport]


class _NullRetriever:
    """The per-judgement compile never retrieves; the artifact is loaded over a real retriever later."""

    def retrieve(self, query: str, k: int = 5, filters: dict[str, Any] | None = None) -> list:
        return []


def _model_id(lm: Any) -> str | None:
    return None if lm is None else str(getattr(lm, "model", lm))


def compile_program(settings: Any, *, optimizer: str = "bootstrap", judgements: str | Sequence[str] = "all",
                    train: int | None = 50, dev: int | None = 40, budget: int | None = None, e2e: bool = False,
                    e2e_train: int | None = None, e2e_dev: int | None = None, name: str | None = None,
                    out_dir: Path | str | None = None, num_threads: int = 1, lms: tuple | None = None,
                    retriever: Any = None, reporter: Reporter | None = None, loader: Callable | None = None,
                    seed: int = SEED) -> CompileResult:
    """Compile SelfRAG's judgements (and end to end with ``e2e``) and write the artifact and its manifest.

    Args:
        settings: resolved :class:`selfrag.settings.Settings` (LMs, program bounds, knowledge base).
        optimizer: ``bootstrap`` | ``random-search`` | ``mipro`` | ``gepa``.
        judgements: ``"all"``, a name, a comma list or a list of names (``retrieve``, ``relevance``,
            ``support``, ``usefulness``); ``"none"`` or ``[]`` with ``e2e`` compiles end to end only.
        train / dev: examples per judgement (None = all of the split; ``dev=0`` skips the scores).
        budget: the optimizer's budget knob (see the module docstring); None = its default.
        e2e: also compile the whole program on ``qa_en`` (``e2e_train``/``e2e_dev`` default to
            ``min(train, 20)``/``min(dev, 10)``).
        name: artifact name (``<out_dir>/<name>.json``); default ``compiled-<optimizer>``.
        lms: ``(generator, critic, adapter)``; None = :func:`selfrag.wiring.build_lms` (the test seam).
        retriever: retriever for the end-to-end stage; None = the ``clapnq`` collection.
    """
    from selfrag import wiring

    if optimizer not in OPTIMIZERS:
        raise CompileError(f"unknown optimizer {optimizer!r}: use one of {', '.join(OPTIMIZERS)}")
    for label, value in (("train", train), ("dev", dev), ("e2e_train", e2e_train), ("e2e_dev", e2e_dev)):
        if value is not None and value < (1 if label.endswith("train") else 0):
            raise CompileError(f"--{label.replace('_', '-')} must be >= {1 if label.endswith('train') else 0}, "
                               f"got {value}")
    if budget is not None and budget < 1:
        raise CompileError(f"--budget must be >= 1, got {budget}")
    if optimizer == "mipro" and importlib.util.find_spec("optuna") is None:  # refuse before any LM call
        raise CompileError("mipro needs the optional dependency optuna (dspy's 'optuna' extra): pip install optuna")
    if isinstance(judgements, str) and judgements.strip().lower() == "none":
        names: list[str] = []
    else:
        names = parse_judgements(judgements) if judgements else []
    if not names and not e2e:
        raise CompileError("nothing to compile: give a judgement or --e2e")
    name = name or f"compiled-{optimizer}"
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name) or name.endswith(".json"):
        raise CompileError(f"invalid artifact name {name!r}: letters, digits, '.', '_' and '-' only, no extension")
    out_dir = Path(out_dir) if out_dir is not None else ARTIFACTS_DIR
    reporter = reporter or Reporter()

    from selfrag.paths import offline_environment

    offline_environment()
    generator, critic, adapter = lms if lms is not None else wiring.build_lms(settings)
    critic_lm = critic or generator
    reflection_lm = None
    if optimizer == "gepa":
        reflection_lm = generator.copy(max_tokens=max(2048, int(generator.kwargs.get("max_tokens") or 0)))

    program = SelfRAG(retriever if retriever is not None else _NullRetriever(), config=settings.program,
                      generator_lm=generator, critic_lm=critic, adapter=adapter)
    meter = UsageMeter()
    stages: list[StageReport] = []
    params: dict[str, Any] = {}
    start = time.perf_counter()
    for judgement in names:
        report, params = compile_judgement(program, judgement, optimizer=optimizer, train=train, dev=dev,
                                           budget=budget, num_threads=num_threads, critic_lm=critic_lm,
                                           adapter=adapter, reflection_lm=reflection_lm, reporter=reporter,
                                           meter=meter, loader=loader, seed=seed)
        stages.append(report)
    if e2e:
        if retriever is None:
            program.retriever = e2e_retriever(settings, reporter)
        keep = [JUDGEMENTS[n].predictor for n in names]
        with dspy.context(lm=generator, adapter=adapter):
            report, e2e_params = compile_e2e(
                program, optimizer=optimizer, train=e2e_train if e2e_train is not None else min(train or 20, 20),
                dev=e2e_dev if e2e_dev is not None else min(dev if dev is not None else 10, 10), budget=budget,
                num_threads=num_threads, keep=keep, reflection_lm=reflection_lm, reporter=reporter, meter=meter,
                loader=loader, seed=seed)
        stages.append(report)
        params = params or e2e_params
    seconds = round(time.perf_counter() - start, 2)

    manifest = build_manifest(program, settings, optimizer=optimizer, budget=budget, params=params, stages=stages,
                              meter=meter, seconds=seconds, generator=generator, critic=critic,
                              reflection=reflection_lm, name=name, seed=seed)
    artifact = save_artifact(program, out_dir / f"{name}.json", manifest)
    manifest_path = out_dir / f"{name}.manifest.json"
    manifest_path.write_text(json.dumps(manifest, ensure_ascii=False, indent=2, default=str) + "\n", encoding="utf-8")
    return CompileResult(program=program, manifest=manifest, artifact=artifact, manifest_path=manifest_path,
                         stages=stages)


def build_manifest(program: SelfRAG, settings: Any, *, optimizer: str, budget: int | None, params: dict[str, Any],
                   stages: list[StageReport], meter: UsageMeter, seconds: float, generator: Any, critic: Any,
                   reflection: Any, name: str, seed: int) -> dict[str, Any]:
    cost = meter.snapshot()
    return {
        "name": name,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "dspy_version": dspy.__version__,
        "program": type(program).__name__,
        "program_version": PROGRAM_VERSION,
        "signature_hash": signature_hash(program),
        "lm": {
            "profile": settings.lm.profile,
            "generator": _model_id(generator),
            "critic": _model_id(critic or generator),
            "reflection": _model_id(reflection),
            "adapter": type(program.adapter).__name__ if program.adapter is not None else None,
            "temperature": settings.lm.temperature,
            "threads": settings.lm.threads,
        },
        "dataset_hash": dataset_hash(),
        "optimizer": {"name": optimizer, "budget": budget, "budget_knob": BUDGET_KNOB[optimizer], "params": params,
                      "seed": seed},
        "scores": {s.name: {"metric": s.metric, "dev": s.dev, "before": s.before, "after": s.after} for s in stages},
        "stages": [asdict(s) for s in stages],
        "cost": {**cost, "seconds": seconds},
    }


def summary_rows(manifest: dict[str, Any]) -> list[tuple[str, str, str, str, str, str, str]]:
    """(stage, metric, train/dev, before, after, change, demos) for a table."""
    rows = []
    for s in manifest.get("stages", []):
        before, after = s.get("before"), s.get("after")
        change = "" if before is None or after is None else f"{after - before:+.3f}"
        rows.append((s["name"], s["metric"], f"{s['train']}/{s['dev']}",
                     "" if before is None else f"{before:.3f}", "" if after is None else f"{after:.3f}", change,
                     str(sum(s.get("demos", {}).values()))))
    return rows
