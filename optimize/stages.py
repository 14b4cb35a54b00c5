"""The two compile stages: one judgement on its labelled set, and the whole program end to end.

One judgement (:func:`compile_judgement`): the SelfRAG predictor is wrapped in a one-predictor
:class:`~optimize.judgements.JudgementModule`, the optimizer runs with the judgement's metric on the
training examples, the module is scored on the dev examples before and after, and the compiled
predictor's state (demos and instructions) is copied back into the SelfRAG program.

End to end (:func:`compile_e2e`): the whole program (SelfRAG, or a strategy program through
:mod:`optimize.compile_strategy`) is compiled on ``qa_en`` train with ``e2e_metric``
against a knowledge base holding ``corpus_documents("clapnq")`` (collection ``clapnq``, built once by
:func:`e2e_retriever`). Only *bootstrapped* traces become demos there (``max_labeled_demos = 0``: a QA
example has none of a judgement's fields). The compiled demos of the predictors no judgement stage
compiled in this run (``generate_answer``, ``rewrite_query``, ``answer_directly``, and any judgement not
compiled on its own set) are kept; a judgement compiled on its labelled set keeps that state. The
end-to-end student starts from reset predictors (DSPy's optimizers reset their student), so its traces
come from uncompiled judges. Costs (LM calls, tokens) are counted by a :class:`~optimize.usage.UsageMeter`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dspy

from optimize import sources
from optimize.dev_score import score_on_dev
from optimize.errors import CompileError
from optimize.judgements import SEED, STAGES, JudgementModule, SplitLoader, copy_predictor_state, sample_split
from optimize.metrics import e2e_metric
from optimize.optimizers import counted, make_optimizer, run_optimizer
from optimize.progress import Reporter
from optimize.usage import UsageMeter
from programs.base import RAGModule
from programs.selfrag import SelfRAG

E2E_COLLECTION = "clapnq"


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
    # "compiled"; when compiling lowered the dev score and was rolled back, what was restored (and scored
    # "before"): "uncompiled" (the stage started without demos) or "start" (with the demos it started
    # from: ``--from``)
    kept: str = "compiled"


def _score_into(report: StageReport, when: str, module: Any, devset: list[dspy.Example], metric: Callable, *,
                num_threads: int, reporter: Reporter, label: str | None = None) -> None:
    """Score ``module`` on ``devset`` into ``report.<when>`` (``before`` | ``after``), its dev errors and,
    with a ``label``, its confusion counts."""
    result = score_on_dev(module, devset, metric, num_threads=num_threads, reporter=reporter,
                          description=f"{report.name}: dev {when}", label=label)
    setattr(report, when, round(result.score, 4))
    setattr(report, f"dev_errors_{when}", result.errors)
    if label:
        setattr(report, f"confusion_{when}", result.confusion)
    reporter.log(f"{report.name}: dev {when} = {result.score:.3f} ({result.n} examples, {result.seconds:.0f} s)")


def start_name(state: dict[str, Any], declared_instructions: str | None = None) -> str:
    """What a predictor's ``state`` was before its stage compiled it: ``"start"`` with demos or with other
    instructions than its signature declares (the state of ``--from``), else ``"uncompiled"``."""
    instructions = (state.get("signature") or {}).get("instructions")
    rewritten = declared_instructions is not None and instructions is not None and instructions != declared_instructions
    return "start" if state.get("demos") or rewritten else "uncompiled"


def compile_judgement(program: SelfRAG, judgement: str, *, loader: SplitLoader, optimizer: str = "bootstrap",
                      train: int | None = 50, dev: int | None = 40, budget: int | None = None, num_threads: int = 1,
                      critic_lm: dspy.BaseLM | None = None, adapter: dspy.Adapter | None = None,
                      reflection_lm: dspy.LM | None = None, reporter: Reporter | None = None,
                      meter: UsageMeter | None = None, seed: int = SEED, keep_if_better: bool = True,
                      teacher_lm: dspy.BaseLM | None = None) -> tuple[StageReport, dict[str, Any]]:
    """Compile one judgement of ``program`` in place; returns its report and the optimizer parameters.

    ``before`` scores the predictor as the stage found it (:func:`start_name`: uncompiled, or the state of
    ``--from``). With ``keep_if_better`` (default) and a dev set, a compile that lowers the dev score is
    rolled back to that state (``report.kept`` names it): the artifact never carries a judge made worse
    by compiling, nor one that was not scored.

    The judge runs with ``critic_lm`` (default: the program's critic LM) and ``adapter`` (default: the
    program's), exactly as SelfRAG calls it; ``teacher_lm`` (if given) runs the bootstrapping teacher.
    """
    if judgement not in STAGES:
        raise CompileError(f"unknown judgement {judgement!r}: use one of {', '.join(STAGES)}")
    spec = STAGES[judgement]
    reporter = reporter or Reporter()
    meter = meter or UsageMeter()
    trainset = sample_split(spec.task, "train", train, loader, seed)
    devset = sample_split(spec.task, "dev", dev, loader, seed) if dev != 0 else []
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
        original_state = target.dump_state()  # what a rollback restores, so what "before" scores
        if devset:
            start_module = JudgementModule(spec.predictor, target.deepcopy())
            _score_into(report, "before", start_module, devset, spec.metric, label=spec.label,
                        num_threads=num_threads, reporter=reporter)
        student = JudgementModule(spec.predictor, target.deepcopy())
        student.predictor.reset()
        old_instructions = student.predictor.signature.instructions
        opt, params, compile_kwargs = make_optimizer(optimizer, counted(spec.metric, reporter), budget=budget,
                                                     num_threads=num_threads, reflection_lm=reflection_lm,
                                                     label=spec.label, seed=seed, teacher_lm=teacher_lm)
        reporter.stage(f"{judgement}: {optimizer} on {len(trainset)} train", total=len(trainset))
        compiled = run_optimizer(opt, optimizer, student, trainset, compile_kwargs)
        reporter.done()
        compiled_pred: dspy.Predict = getattr(compiled, spec.predictor)
        copy_predictor_state(compiled_pred, target)
        after_module = JudgementModule(spec.predictor, target.deepcopy())
        if devset:
            _score_into(report, "after", after_module, devset, spec.metric, label=spec.label,
                        num_threads=num_threads, reporter=reporter)
            if keep_if_better and report.before is not None and report.after < report.before:
                target.load_state(original_state)  # never ship a judge that compiling made worse on dev
                declared = getattr(type(program), "PREDICTORS", {}).get(spec.predictor)
                report.kept = start_name(original_state, getattr(declared, "instructions", None))
                reporter.log(f"{judgement}: compiling lowered dev accuracy; kept the {report.kept} predictor")
    report.demos = {spec.predictor: len(target.demos)}
    report.instructions_changed = {spec.predictor: target.signature.instructions != old_instructions}
    report.seconds = round(time.perf_counter() - start, 2)
    report.cost = UsageMeter.diff(meter.snapshot(), cost0)
    return report, params


# ---------------------------------------------------------------- end to end


def e2e_knowledge_base(knowledge_base: Callable[[str], Any], datasets_dir: Path, reporter: Reporter | None = None,
                       corpus: str = E2E_COLLECTION) -> Any:
    """The ``corpus`` collection (``clapnq``; ``cmrc-qa`` for Chinese; ``knowledge_base(name)`` opens it),
    ingesting ``corpus_documents(corpus)`` once, when the collection is empty."""
    reporter = reporter or Reporter()
    kb = knowledge_base(corpus)
    if kb.is_empty():
        try:
            docs = sources.corpus_documents(corpus, datasets_dir)
        except FileNotFoundError as exc:  # a checkout without the public datasets beside it
            raise CompileError(f"the {corpus!r} collection is empty and its corpus is missing: {exc.filename} "
                               "(set SELFRAG_DATASETS to the datasets folder)") from None
        reporter.log(f"building the {corpus!r} collection from {len(docs)} documents (once)")
        kb.add_documents(docs)
    return kb


def e2e_retriever(knowledge_base: Callable[[str], Any], datasets_dir: Path, reporter: Reporter | None = None,
                  corpus: str = E2E_COLLECTION, retriever_of: Callable[[Any], Any] | None = None) -> Any:
    """Retriever over :func:`e2e_knowledge_base`; ``retriever_of(kb)`` builds it (default: the collection's
    own retriever)."""
    kb = e2e_knowledge_base(knowledge_base, datasets_dir, reporter, corpus)
    return retriever_of(kb) if retriever_of is not None else kb.retriever()


def compile_e2e(program: RAGModule, *, loader: SplitLoader, optimizer: str = "bootstrap", train: int | None = 20,
                dev: int | None = 10, budget: int | None = None, num_threads: int = 1, keep: Sequence[str] = (),
                reflection_lm: dspy.LM | None = None, reporter: Reporter | None = None,
                meter: UsageMeter | None = None, seed: int = SEED,
                teacher_lm: dspy.BaseLM | None = None) -> tuple[StageReport, dict[str, Any]]:
    """Compile the whole ``program`` (SelfRAG or any registered program: every named predictor, a strategy
    program's retrieval steps included) on ``qa_en`` with ``e2e_metric``; predictors named in ``keep``
    keep their current state, the others take the end-to-end demos. Runs the program sequentially."""
    reporter = reporter or Reporter()
    meter = meter or UsageMeter()
    trainset = sample_split("qa_en", "train", train, loader, seed)
    devset = sample_split("qa_en", "dev", dev, loader, seed) if dev != 0 else []
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
                _score_into(report, "before", program, devset, e2e_metric, num_threads=num_threads, reporter=reporter)
            opt, params, compile_kwargs = make_optimizer(optimizer, counted(e2e_metric, reporter), budget=budget,
                                                         num_threads=num_threads, labeled=False,
                                                         reflection_lm=reflection_lm, seed=seed, teacher_lm=teacher_lm)
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
                _score_into(report, "after", program, devset, e2e_metric, num_threads=num_threads, reporter=reporter)
    finally:
        program.config = program.config.model_copy(update={"num_threads": saved_threads})
    report.demos = {n: len(p.demos) for n, p in program.named_predictors() if n not in keep}
    report.instructions_changed = {n: p.signature.instructions != old[n]
                                   for n, p in program.named_predictors() if n not in keep}
    report.seconds = round(time.perf_counter() - start, 2)
    report.cost = UsageMeter.diff(meter.snapshot(), cost0)
    return report, params
