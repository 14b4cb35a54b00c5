"""The DSPy optimizers a compile can use, what ``budget`` sets for each, and how each is run.

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
                teacher LM if given, else the generator LM, with ``max_tokens >= 2048``; the
                metric is wrapped to return ``dspy.Prediction(score, feedback)``
                (:func:`feedback_metric`, the words from :mod:`optimize.feedback`)
==============  =========================================================================

A ``teacher_lm`` (``selfrag compile --teacher``) runs the teacher program of the bootstrapping
optimizers (DSPy's ``teacher_settings=dict(lm=teacher_lm)``): its traces that pass the metric become the
student's demos, while the compiled artifact is for the student LM.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

import dspy

from optimize.errors import CompileError
from optimize.feedback import judgement_feedback
from optimize.judgements import SEED
from optimize.progress import Reporter

OPTIMIZERS = ("bootstrap", "random-search", "mipro", "gepa")
DEFAULT_BUDGET = {"bootstrap": 4, "random-search": 4, "mipro": None, "gepa": None}
BUDGET_KNOB = {
    "bootstrap": "max_bootstrapped_demos = max_labeled_demos",
    "random-search": "num_candidate_programs",
    "mipro": "num_trials",
    "gepa": "max_metric_calls",
}
MIPRO_NEEDS_OPTUNA = "mipro needs the optional dependency optuna (dspy's 'optuna' extra): pip install optuna"


def has_optuna() -> bool:
    return importlib.util.find_spec("optuna") is not None


def feedback_metric(metric: Callable, label: str | None = None) -> Callable:
    """A GEPA metric ``(gold, pred, trace, pred_name, pred_trace)`` → ``dspy.Prediction(score, feedback)``."""

    def gepa_metric(gold, pred, trace=None, pred_name=None, pred_trace=None):
        score = float(metric(gold, pred))
        return dspy.Prediction(score=score, feedback=judgement_feedback(label, gold, pred, score))

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
                   seed: int = SEED, teacher_lm: dspy.BaseLM | None = None) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """The DSPy optimizer for ``optimizer``, its constructor parameters (for the manifest) and compile kwargs.

    ``labeled=False`` (end to end) keeps raw training examples out of the demos; ``teacher_lm`` runs the
    teacher of bootstrap, random-search and mipro (GEPA takes it as ``reflection_lm`` from the caller).
    """
    if optimizer not in OPTIMIZERS:
        raise CompileError(f"unknown optimizer {optimizer!r}: use one of {', '.join(OPTIMIZERS)}")
    if budget is not None and budget < 1:
        raise CompileError(f"budget must be >= 1, got {budget}")
    budget = DEFAULT_BUDGET[optimizer] if budget is None else budget
    compile_kwargs: dict[str, Any] = {}
    teacher = {"teacher_settings": {"lm": teacher_lm}} if teacher_lm is not None and optimizer != "gepa" else {}
    if optimizer == "bootstrap":
        params = {"max_bootstrapped_demos": budget, "max_labeled_demos": budget if labeled else 0, "max_rounds": 1}
        opt = dspy.BootstrapFewShot(metric=metric, **params, **teacher)
    elif optimizer == "random-search":
        params = {"max_bootstrapped_demos": 4, "max_labeled_demos": 4 if labeled else 0,
                  "num_candidate_programs": budget, "num_threads": num_threads}
        opt = dspy.BootstrapFewShotWithRandomSearch(metric=metric, **params, **teacher)
    elif optimizer == "mipro":
        if not has_optuna():
            raise CompileError(MIPRO_NEEDS_OPTUNA)
        params = {"max_bootstrapped_demos": 4, "max_labeled_demos": 4 if labeled else 0, "num_threads": num_threads,
                  "seed": seed}
        if budget is None:
            params["auto"] = "light"
        else:
            params.update(auto=None, num_candidates=max(2, budget // 2))
            compile_kwargs["num_trials"] = budget
        if teacher_lm is not None:  # the teacher also proposes the instructions
            teacher["prompt_model"] = teacher_lm
        opt = dspy.MIPROv2(metric=metric, verbose=False, **params, **teacher)
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
    if teacher:
        params["teacher_lm"] = getattr(teacher_lm, "model", str(teacher_lm))
    return opt, params, compile_kwargs


def run_optimizer(opt: Any, optimizer: str, student: dspy.Module, trainset: list[dspy.Example],
                  compile_kwargs: dict[str, Any]) -> dspy.Module:
    """``opt.compile`` with the training examples; MIPRO and GEPA get a validation cut of them (dev stays held out)."""
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
