"""Running programs question by question into a results file that survives a crash.

Every program runs on the same examples with the same LMs, question by question (all programs on
question 1, then question 2, …, so a partial run compares like with like). Each finished
(program, question) pair is appended to ``<out_dir>/results.jsonl`` and fsynced; a rerun with the
same ``out_dir`` skips the pairs already there (a half-written last line from a crash is dropped).
A program raising on one question is recorded as an error line and counted, never fatal; so is a
question whose deciding LM calls failed (``RAGResult.error``: a dead backend must not score as abstentions).
Before each pair ``fresh_start`` is called (``selfrag eval``: the in-process model forgets the prompts it
has evaluated), so a pair's answer does not depend on which programs ran before it, the run's order or a
resume: greedy decoding over a partly cached prompt can pick another answer than over the whole prompt.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import dspy
from dspy.evaluate.auto_evaluation import SemanticRecallPrecision, f1_score

from optimize import metrics as M
from optimize.eval_examples import example_id
from optimize.progress import Reporter
from programs.base import lm_scope
from programs.tracing import Tracer

RESULTS = "results.jsonl"


class Interrupted(RuntimeError):
    """Raised by a row hook to stop a run (tests simulate a crash with it)."""


# ---------------------------------------------------------------- scoring one prediction


def relevance_counts(trace: Iterable[Any], gold_doc_ids: Iterable[str]) -> dict[str, int]:
    """Confusion counts of the relevance grader over a trace's ``grade_relevance`` steps."""
    gold = {M.document_id(str(g)) for g in gold_doc_ids or []}
    counts = {"tp": 0, "fp": 0, "fn": 0, "tn": 0}
    for step in trace:
        step = step if isinstance(step, dict) else step.model_dump()
        if step.get("step") != "grade_relevance" or not step.get("ok", True):
            continue
        pid = (step.get("inputs") or {}).get("passage_id")
        if pid is None:
            continue
        is_gold = M.document_id(str(pid)) in gold
        said = step.get("output") == "relevant"
        counts[("tp" if is_gold else "fp") if said else ("fn" if is_gold else "tn")] += 1
    return counts


def score(example: Any, pred: Any) -> dict[str, float]:
    return {
        "em": float(M.exact_match(example, pred)),
        "f1": float(M.answer_f1(example, pred)),
        "precision": float(M.answer_precision(example, pred)),
        "e2e": M.e2e_score(example, pred),
        "abstention_correct": float(M.abstention_correct(example, pred)),
        "citation_hit": M.citation_hit(example, pred),  # None: an answerable question without gold documents
    }


class SemanticF1Judge:
    """LM-judged semantic F1 of an answer against the gold answer (DSPy's ``SemanticRecallPrecision``
    signature, one call, no chain of thought), for long free-text answers where token F1 is harsh.
    Answerable questions only: an abstention scores 0 without a call; unanswerable ones are not scored
    (None). A failed judgement is None. Its LM calls are evaluation cost, not the program's."""

    def __init__(self, lm: dspy.BaseLM | None = None, adapter: dspy.Adapter | None = None):
        self.lm, self.adapter = lm, adapter
        self.module = dspy.Predict(SemanticRecallPrecision)

    def __call__(self, example: Any, pred: Any) -> float | None:
        golds = M.gold_answers(example)
        if not bool(M.field_value(example, "answerable", True)) or not golds:
            return None
        if bool(M.field_value(pred, "abstained", False)):
            return 0.0
        try:
            with lm_scope(self.lm, self.adapter):
                out = self.module(question=M.field_value(example, "question"), ground_truth=golds[0],
                                  system_response=M.answer_text(pred))
            return round(f1_score(float(out.precision), float(out.recall)), 4)
        except Exception:  # noqa: BLE001 - an unparsable judgement is a missing score, not a crash
            return None


def run_one(program: dspy.Module, name: str, example: Any,
            semantic_f1: Callable[[Any, Any], float | None] | None = None) -> dict[str, Any]:
    """Run ``program`` on one example and return its results line (an error becomes ``ok: false``)."""
    row: dict[str, Any] = {
        "task": "qa", "program": name, "id": example_id(example), "question": M.field_value(example, "question"),
        "answerable": bool(M.field_value(example, "answerable", True)),
        "gold_doc_ids": list(M.field_value(example, "gold_doc_ids") or []),
    }
    start = time.perf_counter()
    try:
        pred = program(question=row["question"])
    except Exception as exc:  # noqa: BLE001 - one failing question is recorded, the run goes on
        row.update(ok=False, error=f"{type(exc).__name__}: {exc}", error_kind="exception",
                   seconds=round(time.perf_counter() - start, 4))
        return row
    seconds = round(time.perf_counter() - start, 4)
    result = pred.result
    scores = score(example, pred)
    if semantic_f1 is not None:
        scores["semantic_f1"] = semantic_f1(example, pred)
    row.update(
        ok=True, error=None, error_kind=None, answer=pred.answer, abstained=bool(pred.abstained),
        cited_doc_ids=list(pred.cited_doc_ids or []), retrieved=bool(result.retrieved), supported=result.supported,
        used_web=bool(result.used_web), scores=scores,
        relevance=relevance_counts(result.trace, row["gold_doc_ids"]),
        usage=result.usage.model_dump(), seconds=seconds, result=result.model_dump(mode="json"),
    )
    if result.error:  # the deciding LM calls failed: not an answer or an abstention to score
        row.update(ok=False, error=f"LM failure: {result.error}", error_kind=result.error_kind)
    return row


def run_support_one(program: dspy.Module, name: str, example: Any) -> dict[str, Any] | None:
    """The program's support judge on one labelled ``support`` example; None if it has no judge."""
    judge = getattr(program, "judge_support", None)
    if judge is None:
        return None
    tracer = Tracer()
    start = time.perf_counter()
    with lm_scope(getattr(program, "critic_lm", None), getattr(program, "adapter", None)):
        pred, step = tracer.call("judge_support", judge, "support", question=example.question,
                                 passages=example.passages, answer=example.answer)
    return {"task": "support", "program": name, "id": example_id(example), "ok": step.ok, "error": step.error,
            "label": example.support, "predicted": step.output,
            "correct": float(bool(step.ok) and step.output == example.support),
            "usage": tracer.usage.model_dump(), "seconds": round(time.perf_counter() - start, 4)}


# ---------------------------------------------------------------- the results file


def read_results(path: Path) -> list[dict[str, Any]]:
    """Lines of a results file; a torn last line (a crash while writing) is cut off the file."""
    path = Path(path)
    if not path.exists():
        return []
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        data = data[: data.rfind(b"\n") + 1]
        with open(path, "r+b") as fh:
            fh.truncate(len(data))
    rows = []
    for line in data.decode("utf-8").split("\n"):  # not splitlines(): U+2028/NEL may sit inside a JSON string
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return rows


def _key(row: dict[str, Any]) -> tuple[str, str, str]:
    return row.get("task", "qa"), row["program"], row["id"]


def _append(fh, row: dict[str, Any]) -> None:
    fh.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
    fh.flush()
    os.fsync(fh.fileno())


def run_eval(programs: dict[str, dspy.Module], examples: Sequence[Any], out_dir: Path | str, *,
             support_examples: Sequence[Any] = (), semantic_f1: Callable[[Any, Any], float | None] | None = None,
             reporter: Reporter | None = None,
             on_row: Callable[[dict[str, Any]], None] | None = None,
             fresh_start: Callable[[], None] | None = None) -> list[dict[str, Any]]:
    """Run every program on every example (question-major), appending each line to
    ``<out_dir>/results.jsonl``; pairs already in the file are skipped. Returns all lines (old and new)
    of the requested programs. ``on_row`` is called after each line is written (a hook for tests to
    simulate a crash by raising); ``fresh_start`` before each pair is run (see the module docstring)."""
    reporter = reporter or Reporter()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / RESULTS
    rows = read_results(path)
    done = {_key(r) for r in rows}
    todo: list[tuple[str, str, Any]] = []
    for ex in examples:
        todo += [("qa", name, ex) for name in programs if ("qa", name, example_id(ex)) not in done]
    for ex in support_examples:
        todo += [("support", name, ex) for name, prog in programs.items()
                 if hasattr(prog, "judge_support") and ("support", name, example_id(ex)) not in done]

    already = len(examples) * len(programs) - sum(t == "qa" for t, _, _ in todo)
    if already:
        reporter.log(f"resuming: {already} finished question(s) skipped")
    reporter.stage("eval", total=len(todo))
    try:
        with open(path, "a", encoding="utf-8") as fh:
            for task, name, ex in todo:
                reporter.describe(f"{name:>14} · {example_id(ex)[:28]}")
                if fresh_start is not None:
                    fresh_start()
                row = (run_one(programs[name], name, ex, semantic_f1) if task == "qa"
                       else run_support_one(programs[name], name, ex))
                if row is None:
                    continue
                _append(fh, row)
                rows.append(row)
                reporter.advance()
                if on_row is not None:
                    on_row(row)
    finally:
        reporter.done()
    return [r for r in rows if r["program"] in programs]
