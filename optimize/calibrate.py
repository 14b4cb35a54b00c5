"""The calibrate stage of ``selfrag compile``: fit SelfRAG's decision thresholds on labelled data.

Each threshold is chosen on the soft scores the program's own judgements give (their label
probabilities, read from token log-probabilities):

1. **retrieve** (Self-RAG's δ) on the ``retrieve`` split: the judge's P(retrieve) on the questions no
   cheap rule decides, for accuracy. Reported: accuracy with the default 0.5 and with δ (rules
   included), the share of no-retrieval questions that really skip retrieval, ECE, a reliability PNG.
2. **relevance** on the ``relevance`` split, grouped by question and graded the way the program grades
   (batched or per passage): P(relevant) for accuracy; same report.
3. **similarity** on ``qa_en`` (no LM call): the best dense similarity of each question's first-round
   passages; below the fitted threshold a knowledge-base round finds nothing (no grading or check call).
   Fitted for the most abstention on unanswerable questions at false abstention ≤
   ``similarity_false_abstention`` (default 0.04), and bound to the retriever's embedder (cosines are on
   an embedder's own scale). Off (size 0) by default here; ``selfrag compile --calibrate`` runs it on 200.
4. **stated** (the answer check) on ``qa_en``: per question, retrieve and grade as in a first round, then
   the check's P(the passages state the answer); positive = the question is answerable. Same objective as
   the answer stage (default: false abstention ≤ 0.1), counting a question the similarity gate stops as
   P = 0 (abstained), so the objective holds for the gate and the check together; such questions are still
   checked so that the report's ``rows`` hold both signals per question. With the gate on (the similarity
   stage fitted it, or the artifact it is compiled from has it) the gate and the check are then **fitted
   together** (:func:`fit_gate_and_check`): the check's score becomes (1 − w)·P(stated) + w·top similarity,
   w from a logistic regression of "answerable" on both, and the pair (similarity, stated) best for the
   objective over every distinct decision of both on these questions (a question the check did not
   decide — its call failed — counts as answered unless gated: the program drafts) replaces the
   similarity stage's threshold (``bench/bench_gate_check.py`` compares the rules). Skipped (size 0) for a
   program without the check.
   The same scores fit ``verified``: the lowest P(stated) above which ≥ 90% (``verified_precision``) of
   the questions are answerable; above it the checked draft skips the support judge.
5. **answer** on ``qa_en``: the program runs end to end with the answer threshold at 0 (it answers
   whenever it has a candidate) and records the chosen candidate's confidence; an answer "should be
   given" when the question is answerable and at least half of the answer's tokens are in a gold answer
   (token precision ≥ 0.5: ClapNQ's gold answers are long sentences, so a right short answer has a low
   F1 but a high precision). The threshold is chosen
   for an objective: accuracy, or accuracy subject to a false-abstention ceiling
   (``("max_false_abstention", 0.1)``), held by the rate's upper confidence bound
   (``("max_false_abstention", 0.1, 0.8)``, the default: a margin that shrinks as the calibration set
   grows; :func:`~optimize.calibration.rate_upper_bound`). A coverage–accuracy PNG goes with it.

The fitted :class:`~programs.thresholds.Thresholds` are set on the program (``compiled_thresholds``)
and saved with it in the artifact; each stage's dev curve, accuracies and ECE go in the manifest, with the
split its questions came from (``split``; a stated stage fitted on recorded rows: ``row_splits``, how many
on each split, and ``rows_from``, the manifests); the section's ``split`` joins them (``train+dev``).

When the program starts from thresholds whose gate is bound to another embedder than its retriever's (an
English artifact recalibrated over a Chinese collection, or over a re-scoring embedder), that gate stays:
the embedder-bound thresholds this run fits (gate, w, stated, verified) are stored for the retriever's
embedder — under ``embedder@language`` when ``language`` is given (``selfrag compile --language``) — in
``by_embedder`` (:func:`~programs.thresholds.with_embedder_set`), their stage reports as ``similarity@KEY`` and
``stated@KEY``; the others (retrieve, relevance, answer) are replaced as usual.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from optimize import metrics as M
from optimize.eval_examples import balanced
from optimize.calibration import ece, fit_threshold, plot_coverage_accuracy, reliability_diagram
from optimize.calibration import coverage_accuracy_curve, evaluate_threshold, fit_min_precision
from optimize.gate_check import StatedRows, cross_validate_gate_and_check, fit_gate_and_check, row_value
from programs.retriever_calls import retriever_embedder
from programs.thresholds import Thresholds, embedder_key, stated_score, thresholds_for, too_dissimilar
from programs.thresholds import with_embedder_set
from programs.types import Passage, Usage

SplitLoader = Callable[[str, str], Sequence[Any]]
# false abstention ≤ 0.1 held by its upper confidence bound at 0.8, not the calibration sample's rate: fitted
# at the rate itself, the ungraded refit reached 0.10 on train and 0.15 on ClapNQ dev (docs/measurements.md)
DEFAULT_ANSWER_OBJECTIVE: tuple[str, float, float] = ("max_false_abstention", 0.1, 0.8)
DEFAULT_VERIFIED_PRECISION = 0.9
DEFAULT_SIMILARITY_FALSE_ABSTENTION = 0.04  # the gate's share of the answer objective's false-abstention budget


def _fit(name: str, probs: list[float], labels: list[bool], objective: Any, out_dir: Path | None,
         default: float) -> tuple[float, dict[str, Any]]:
    """Fit one threshold (keeping ``default`` when the data cannot decide) and describe it."""
    report: dict[str, Any] = {"n": len(probs), "positives": sum(labels), "default": default}
    if len(probs) < 4 or len(set(labels)) < 2:
        report["kept_default"] = "too few examples or only one class"
        return default, report
    fit = fit_threshold(probs, labels, objective)
    before = evaluate_threshold(probs, labels, default)
    report.update(threshold=fit.threshold, objective=fit.objective, ece=round(ece(probs, labels), 4),
                  accuracy_default=round(before.accuracy, 4), accuracy_fitted=round(fit.point.accuracy, 4),
                  curve=[pt.model_dump() for pt in fit.curve])
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        report["reliability_png"] = str(reliability_diagram(probs, labels, out_dir / f"reliability-{name}.png",
                                                            title=f"{name}: P(positive) vs observed"))
    return fit.threshold, report


def calibrate_retrieve(program: Any, examples: Sequence[Any], out_dir: Path | None) -> tuple[float, dict, Usage]:
    usage, probs, labels = Usage(), [], []
    rule_right = rule_n = skipped_no = n_no = 0
    rows = []
    for ex in examples:
        want = M.field_value(ex, "decision") != "no"
        rule, p, tracer = program.retrieve_probability(str(M.field_value(ex, "question")))
        usage = usage.add(tracer.usage)
        if rule is not None:
            rule_n += 1
            rule_right += int((rule == "yes") == want)
        elif p is not None:
            probs.append(p)
            labels.append(want)
        rows.append((want, rule, p))
    threshold, report = _fit("retrieve", probs, labels, "accuracy", out_dir, Thresholds().retrieve)

    def accuracy(th: float) -> float:
        right = 0
        for want, rule, p in rows:
            go = (rule == "yes") if rule is not None else (p is None or p >= th)
            right += int(go == want)
        return right / len(rows) if rows else 0.0

    for want, rule, p in rows:
        if not want:
            n_no += 1
            skipped_no += int(rule == "no" or (rule is None and p is not None and p < threshold))
    report.update(rules_decided=rule_n, rules_accuracy=round(rule_right / rule_n, 4) if rule_n else None,
                  accuracy_with_rules_default=round(accuracy(Thresholds().retrieve), 4),
                  accuracy_with_rules_fitted=round(accuracy(threshold), 4),
                  no_retrieval_skip_rate=round(skipped_no / n_no, 4) if n_no else None)
    return threshold, report, usage


def calibrate_relevance(program: Any, examples: Sequence[Any], max_questions: int | None,
                        out_dir: Path | None) -> tuple[float, dict, Usage]:
    groups: dict[str, list[Any]] = {}
    for ex in examples:
        groups.setdefault(str(M.field_value(ex, "question")), []).append(ex)
    usage, probs, labels = Usage(), [], []
    for question, items in list(groups.items())[:max_questions]:
        passages = [Passage(id=str(M.field_value(ex, "id") or i), text=str(M.field_value(ex, "passage")))
                    for i, ex in enumerate(items)]
        scores, tracer = program.relevance_probabilities(question, passages)
        usage = usage.add(tracer.usage)
        for ex, p in zip(items, scores):
            if p is not None:
                probs.append(p)
                labels.append(M.field_value(ex, "relevance") == "relevant")
    threshold, report = _fit("relevance", probs, labels, "accuracy", out_dir, Thresholds().relevance)
    return threshold, report, usage


def _p_answerable(result: Any) -> float | None:
    """The drafter's P(answerable) on the last draft of a result (its generate_answer step), if read."""
    for step in reversed(result.trace):
        if step.step == "generate_answer" and step.probs and "true" in step.probs:
            return step.probs["true"]
    return None


def calibrate_answer(program: Any, examples: Sequence[Any], objective: Any,
                     out_dir: Path | None) -> tuple[float, dict, Usage]:
    """Run the program end to end at answer threshold 0; fit the threshold on the chosen candidates."""
    saved = program.config
    program.config = saved.model_copy(update={"answer_threshold": 0.0})
    usage, probs, labels, answered, rows = Usage(), [], [], 0, []
    try:
        for ex in examples:
            result = program(question=str(M.field_value(ex, "question"))).result
            usage = usage.add(result.usage)
            if result.confidence is None or result.abstained:
                continue  # abstained before any candidate (nothing relevant...): no threshold decides it
            answered += 1
            good = M.is_right_answer(result.answer, M.gold_answers(ex), bool(M.field_value(ex, "answerable", True)))
            probs.append(result.confidence)
            labels.append(good)
            rows.append({"confidence": round(result.confidence, 4), "p_answerable": _p_answerable(result),
                         "answerable": bool(M.field_value(ex, "answerable", True)), "right": good})
    finally:
        program.config = saved
    threshold, report = _fit("answer", probs, labels, objective, out_dir, Thresholds().answer)
    report["questions"], report["reached_a_candidate"] = len(examples), answered
    report["rows"] = rows  # per answered question: what a different confidence signal would have decided
    if out_dir is not None and probs:
        curve = coverage_accuracy_curve(probs, labels)
        report["coverage_png"] = str(plot_coverage_accuracy({"selfrag": curve}, out_dir / "coverage-answer.png"))
    return threshold, report, usage


def _stated_scores(rows: list[dict[str, Any]], gate: float, weight: float = 0.0
                   ) -> tuple[list[float], list[float], list[bool], int, int]:
    """Per checked question: P(stated), the check's score (its value — less its prior in rows recorded with
    it, :func:`~optimize.gate_check.row_value` — mixed with the top similarity by ``weight``,
    :func:`~programs.thresholds.stated_score`) and the label; a question the gate ``gate``
    stops counts as 0 for both (the gate abstains on it whatever the check says, so the objective holds
    for the gate and the check together). With how many were not checked (nothing relevant, a failed
    check) and how many the gate stops."""
    probs, scores, labels, not_checked, gated = [], [], [], 0, 0
    for row in rows:
        p, value, top = row["p_stated"], row_value(row), row["top_similarity"]
        score = None if value is None else stated_score(value, top, weight)
        if too_dissimilar(top, gate):
            gated, p, score = gated + 1, 0.0, 0.0
        if score is None:
            not_checked += 1  # nothing relevant (or the check failed): the check does not decide this question
            continue
        probs.append(p)
        scores.append(score)
        labels.append(row["answerable"])
    return probs, scores, labels, not_checked, gated


def calibrate_stated(program: Any, examples: Sequence[Any], objective: Any, out_dir: Path | None,
                     verified_precision: float | None = DEFAULT_VERIFIED_PRECISION,
                     recorded: list[dict[str, Any]] | None = None) -> tuple[float, dict, Usage]:
    """P(stated) of the answer check on each question's first-round passages vs. whether it is answerable.
    With the similarity gate on, the check's score mixes P(stated) with the top similarity (weight from a
    logistic regression) and the gate and the check's threshold are fitted together (``report["joint"]``:
    the pair best for the objective; the new gate is ``report["joint"]["similarity"]``,
    the weight ``report["joint"]["stated_similarity_weight"]``), else the check alone on P(stated).
    With ``verified_precision``, the same P(stated) also fit the ``verified`` threshold (``report["verified"]``):
    the lowest P(stated) above which at least that share of the questions is answerable (≥ 3 of them),
    i.e. where the check is sure enough to stand in for the support judge; none found = never skip.
    ``recorded``: rows of earlier calibrations (:class:`~optimize.gate_check.RecordedRows`) to fit on
    instead of checking ``examples`` (no LM call). The joint fit is also cross-validated on the rows
    (``report["joint"]["cross_validated"]``: the estimate for new questions)."""
    usage, rows = Usage(), list(recorded or [])
    check_prior = program.thresholds.check_prior
    for ex in examples if recorded is None else ():
        question, answerable = str(M.field_value(ex, "question")), bool(M.field_value(ex, "answerable", True))
        p, prior, top, tracer = program.first_round_signals(question)  # checked even below the gate: the rows
                                                                       # hold both signals for the joint fit
        usage = usage.add(tracer.usage)
        rows.append({"p_stated": None if p is None else round(p, 4),
                     **({"p_prior": None if prior is None else round(prior, 4)} if check_prior else {}),
                     "top_similarity": None if top is None else round(top, 4), "answerable": answerable})
    gate = program.gate_threshold
    joint = fit_gate_and_check(rows, objective) if gate > 0.0 else None
    weight = 0.0 if joint is None else joint["stated_similarity_weight"]
    if joint is not None:
        gate = joint["similarity"]
        joint["cross_validated"] = cross_validate_gate_and_check(rows, objective)
    probs, scores, labels, no_relevant, gated = _stated_scores(rows, gate, weight)
    threshold, report = _fit("stated", scores, labels, objective, out_dir, Thresholds().stated)
    if joint is not None:  # the check alone behind the joint gate would take ``threshold_given_gate``
        report["threshold_given_gate"], report["joint"] = threshold, joint
        threshold = report["threshold"] = joint["stated"]
        if "accuracy_fitted" in report:  # of the joint rule, on the questions the check decides
            report["accuracy_fitted"] = round(evaluate_threshold(scores, labels, threshold).accuracy, 4)
    report["questions"], report["check_prior"] = len(rows), check_prior
    report["not_checked"], report["similarity_gated"] = no_relevant, gated
    report["embedder"] = retriever_embedder(getattr(program, "retriever", None)) or ""
    if recorded is not None:
        report["rows_recorded"] = len(recorded)  # fitted on earlier calibrations' rows, no check call
    report["rows"] = rows  # per question: P(stated) without the gate (its prior), the top dense similarity, the label
    if verified_precision is not None and probs and len(set(labels)) == 2:
        verified, curve = fit_min_precision(probs, labels, verified_precision)
        report["verified"] = {"precision_target": verified_precision, "threshold": verified, "curve": curve}
    return threshold, report, usage


def calibrate_similarity(program: Any, examples: Sequence[Any], max_false_abstention: float,
                         out_dir: Path | None) -> tuple[float, str, dict, Usage]:
    """The best dense similarity of each question's first-round passages vs. whether it is answerable
    (no LM call): the threshold below which a round finds nothing, for the most abstention on
    unanswerable questions with false abstention ≤ ``max_false_abstention``. Returns it with the
    embedder it holds for; 0 (off) when the retriever names no embedder or gives no similarities."""
    embedder = retriever_embedder(getattr(program, "retriever", None))
    if embedder is None:
        return 0.0, "", {"n": 0, "kept_default": "the retriever names no embedder"}, Usage()
    sims, labels = [], []
    for ex in examples:
        top, _ = program.retrieval_similarity(str(M.field_value(ex, "question")))
        if top is not None:
            sims.append(min(1.0, max(0.0, top)))
            labels.append(bool(M.field_value(ex, "answerable", True)))
    threshold, report = _fit("similarity", sims, labels, ("max_false_abstention", max_false_abstention),
                             out_dir, Thresholds().similarity)
    report.update(embedder=embedder, questions=len(examples), no_similarity=len(examples) - len(sims))
    if "curve" in report:
        point = next(pt for pt in report["curve"] if pt["threshold"] == threshold)
        report["abstention_unanswerable"] = round(1.0 - point["false_acceptance"], 4)
        report["false_abstention"] = point["false_abstention"]
    return threshold, embedder, report, Usage()


def _run_stage(name: str, size: int | None, program: Any, loader: SplitLoader, split: str,
               answer_examples: Sequence[Any] | None, answer_objective: Any, similarity_false_abstention: float,
               verified_precision: float | None, out_dir: Path | None, recorded: list[dict[str, Any]] | None,
               embedder: str | None) -> tuple[float, dict[str, Any], Usage, str | None]:
    """One calibrate stage on its examples: (threshold, report, usage, the embedder the gate is bound to)."""
    if name == "retrieve":
        return (*calibrate_retrieve(program, list(loader("retrieve", split))[:size], out_dir), embedder)
    if name == "relevance":
        return (*calibrate_relevance(program, list(loader("relevance", split)), size, out_dir), embedder)
    if name == "similarity":
        exs = balanced(list(loader("qa_en", split)), size)
        th, embedder, rep, usage = calibrate_similarity(program, exs, similarity_false_abstention, out_dir)
        return th, rep, usage, embedder
    exs = list(answer_examples) if answer_examples is not None else list(loader("qa_en", split))
    exs = exs[:size] if size is not None else exs
    if name == "stated":
        return (*calibrate_stated(program, exs, answer_objective, out_dir, verified_precision, recorded=recorded),
                embedder)
    return (*calibrate_answer(program, exs, answer_objective, out_dir), embedder)


def calibrate(program: Any, *, loader: SplitLoader, split: str = "train", retrieve: int | None = 60,
              relevance: int | None = 30, similarity: int | None = 0, stated: int | None = 24,
              answer: int | None = 24, answer_objective: Any = DEFAULT_ANSWER_OBJECTIVE,
              similarity_false_abstention: float = DEFAULT_SIMILARITY_FALSE_ABSTENTION,
              verified_precision: float | None = DEFAULT_VERIFIED_PRECISION,
              out_dir: Path | None = None, answer_examples: Sequence[Any] | None = None,
              reporter: Any = None, language: str | None = None,
              stated_rows: StatedRows | None = None, check_prior: bool | None = None) -> dict[str, Any]:
    """Fit the thresholds in order (each later stage runs with the earlier fitted ones: the answer stage
    with the fitted relevance and stated thresholds) and set them on ``program.compiled_thresholds``.
    Returns the manifest section.
    A size of 0 skips that stage: its threshold stays what the program has (the artifact it was compiled
    from, e.g. ``selfrag compile --from``), else the default. ``answer_examples`` overrides
    the ``qa_en`` examples of the stated and answer stages (already balanced / limited by the caller).
    The stated stage is skipped for a program without the answer check (``config.answer_check``); it
    also fits ``verified`` unless ``verified_precision`` is None (then ``verified`` stays as it was).
    ``stated_rows`` (:class:`~optimize.gate_check.RecordedRows`): the stated stage fits on the rows
    earlier calibrations recorded for this embedder (its stage name, ``stated`` or ``stated@KEY``), pooled,
    instead of checking questions — whatever ``stated`` says, no LM call; they are read before the first
    stage (a refusal costs no LM call), and the stage records their splits and files (:func:`_row_origin`).
    Each stage's report records its ``split``; the section's ``split`` joins them (:func:`joined_split`)."""
    out_dir = Path(out_dir) if out_dir is not None else None
    start = getattr(program, "compiled_thresholds", None) or Thresholds()
    embedder = retriever_embedder(getattr(program, "retriever", None))
    # A gate already bound to another embedder stays; this run's embedder-bound fits go to by_embedder[embedder].
    other_set = bool(embedder) and start.similarity > 0.0 and start.similarity_embedder not in ("", embedder)
    key = embedder_key(embedder, language) if embedder else ""
    if other_set and key not in start.by_embedder:  # nothing fitted on this scale yet: no gate, no w
        fitted = start.model_copy(update={"similarity": 0.0, "stated_similarity_weight": 0.0,
                                          "similarity_embedder": embedder})
    else:
        fitted = thresholds_for(start, embedder, language)
    if check_prior is not None and check_prior != fitted.check_prior:
        fitted = fitted.model_copy(update={"check_prior": check_prior})
    # the stages run with this calibration's set in force (a per-language set is otherwise picked by each
    # question's language: stated rows reused from a manifest ask none)
    if other_set and out_dir is not None:  # the set's plots beside the main set's, not over them
        out_dir = out_dir / key
    original = getattr(program, "compiled_thresholds", None)
    if fitted is not start:
        program.compiled_thresholds = fitted
    sections, total = {}, Usage()
    if stated_rows is not None:
        stated = stated or 1  # the stage runs on the recorded rows
    if not getattr(getattr(program, "config", None), "answer_check", False):
        stated = 0
    steps = [("retrieve", retrieve), ("relevance", relevance), ("similarity", similarity), ("stated", stated),
             ("answer", answer)]
    try:
        ask = (f"stated@{key}" if other_set else "stated", embedder or "", fitted.check_prior)
        recorded = stated_rows(*ask) if stated_rows is not None and stated else None  # before any LM call
        for name, size in steps:
            if size == 0:
                continue
            if reporter is not None:
                reporter.stage(f"calibrate {name}")
            th, rep, usage, embedder = _run_stage(
                name, size, program, loader, split, answer_examples, answer_objective, similarity_false_abstention,
                verified_precision, out_dir, recorded if name == "stated" else None, embedder)
            rep["split"] = split
            if name == "stated" and recorded is not None:
                rep.update(_row_origin(stated_rows, ask, len(recorded)))
            if name == "stated" and language:
                rep["language"] = language
            update: dict[str, Any] = {name: th}
            if name == "similarity":
                update["similarity_embedder"] = embedder
            if name == "stated" and "joint" in rep:  # the gate refitted together with the check
                update["similarity"] = rep["joint"]["similarity"]
                update["stated_similarity_weight"] = rep["joint"]["stated_similarity_weight"]
            if name == "stated" and "verified" in rep:  # None fitted: never skip the support judge
                update["verified"] = rep["verified"]["threshold"] if rep["verified"]["threshold"] is not None else 1.0
            fitted = fitted.model_copy(update=update)
            program.compiled_thresholds = fitted
            rep["cost"] = usage.model_dump()
            sections[name] = rep
            total = total.add(usage)
    except BaseException:
        program.compiled_thresholds = original  # a failed calibration leaves the program as it was
        raise
    if other_set:
        fitted = with_embedder_set(start, key, fitted)
        program.compiled_thresholds = fitted
        # the reports of the set's stages are its own: a manifest merge keeps the main set's beside them
        sections = {(f"{name}@{key}" if name in ("similarity", "stated") else name): rep
                    for name, rep in sections.items()}
    return {"split": joined_split(sections, split), "thresholds": fitted.model_dump(), "stages": sections,
            "cost": total.model_dump()}


def _row_origin(stated_rows: StatedRows, ask: tuple[str, str, bool], n: int) -> dict[str, Any]:
    """What a stated stage fitted on recorded rows says of them: ``row_splits`` (how many on each split) and
    ``rows_from`` (the manifests, :meth:`~optimize.gate_check.RecordedRows.origin`), and ``split`` joining
    the splits; "unknown" from a source that does not say where its rows came from."""
    origin = getattr(stated_rows, "origin", None)
    found = origin(*ask) if callable(origin) else {"row_splits": {"unknown": n}}
    return {**found, "split": "+".join(found["row_splits"]) or "unknown"}


def joined_split(stages: dict[str, Any], default: str) -> str:
    """The splits a calibration's stages read, joined in stage order (``train``, ``train+dev``): each
    stage's ``split`` (``default`` for a report without one); ``default`` when no stage ran."""
    parts: list[str] = []
    for report in stages.values():
        split = report.get("split") if isinstance(report, dict) else None
        for part in str(split or default).split("+"):
            if part not in parts:
                parts.append(part)
    return "+".join(parts) or default
