"""Dev-set evaluation of SelfRAG against baselines: the harness (functions; the CLI is ``selfrag eval``).

Every program runs on the same examples with the same LMs, question by question (all programs on
question 1, then question 2, …, so a partial run compares like with like). Each finished
(program, question) pair is appended to ``<out_dir>/results.jsonl`` and fsynced; a rerun with the
same ``out_dir`` skips the pairs already there (a half-written last line from a crash is dropped).
A program raising on one question is recorded as an error line and counted, never fatal.

Metrics per program (:func:`summarize`; errors are counted and left out of the averages):

- ``retrieve_accuracy``: share of questions where the program retrieved (every dataset question
  needs retrieval, so "retrieve" is the correct decision).
- ``relevance_precision`` / ``relevance_recall``: over the ``grade_relevance`` steps of the traces
  (each records the judged ``passage_id``, a document id): a passage is gold when its document is in
  the example's ``gold_doc_ids``. Precision = judged-relevant that are gold / judged-relevant;
  recall = judged-relevant gold / gold passages that were graded (micro-averaged; recall of the
  grader, not of the retriever). ``None`` for a program that grades nothing.
- ``support_accuracy``: the program's support judge on labelled ``support`` examples (optional).
- ``em`` / ``f1``: on the answerable questions (an abstention scores its abstain text, i.e. ~0);
  ``semantic_f1`` (optional, :class:`SemanticF1Judge`): LM-judged, answerable questions, abstention 0;
  ``e2e``: :func:`optimize.metrics.e2e_score` over all questions.
- ``abstain_unanswerable``: share of unanswerable questions the program abstained on;
  ``abstain_answerable``: share of answerable questions it (wrongly) abstained on;
  ``abstention_accuracy``: ``abstention_correct`` over all questions.
- ``citation_hit`` on the answerable questions.
- ``groundedness``: share of (non-abstained) answers the support judge accepted (``supported`` fully
  or partially); ``None`` for a program that never runs the judge.
- cost per question: LM calls, prompt and completion tokens, wall seconds (mean, p50, p95).
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import dspy

from optimize import metrics as M

RESULTS = "results.jsonl"
SUMMARY_JSON = "summary.json"
SUMMARY_MD = "summary.md"
PLOT = "quality_vs_cost.png"
CONFIG = "config.json"

PROGRAMS = ("selfrag", "crag", "vanilla-rag", "no-retrieval", "graded-rag")  # plus compiled:PATH
ACCEPTED_SUPPORT = ("fully", "partially")


class Interrupted(RuntimeError):
    """Raised by a row hook to stop a run (tests simulate a crash with it)."""


# ---------------------------------------------------------------- programs


def parse_programs(spec: str | Sequence[str]) -> list[str]:
    """``"selfrag,compiled:artifacts/x.json,vanilla-rag"`` → names, validated, duplicates removed."""
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    names = list(dict.fromkeys(s.strip() for s in items if s and s.strip()))
    if not names:
        raise ValueError("no programs given")
    for name in names:
        if name.startswith("compiled:"):
            if not name[len("compiled:"):]:
                raise ValueError("compiled: needs an artifact path, e.g. compiled:artifacts/default.json")
        elif name not in PROGRAMS:
            raise ValueError(f"unknown program {name!r}: use {', '.join(PROGRAMS)} or compiled:PATH")
    return names


def build_program(name: str, retriever: Any, *, web_search: Any = None, config: Any = None,
                  generator_lm: Any = None, critic_lm: Any = None, adapter: Any = None) -> dspy.Module:
    """One program by name. ``selfrag`` is the uncompiled program (no artifact); ``compiled:PATH``
    is SelfRAG with the artifact's state loaded (raises :class:`programs.artifacts.ArtifactError`)."""
    from programs.artifacts import load_state_into
    from programs.baselines import BASELINES
    from programs.crag import CorrectiveRAG
    from programs.selfrag import SelfRAG

    kwargs = dict(web_search=web_search, config=config, generator_lm=generator_lm, critic_lm=critic_lm,
                  adapter=adapter)
    if name in BASELINES:
        return BASELINES[name](retriever, **kwargs)
    if name == "crag":
        return CorrectiveRAG(retriever, **kwargs)
    program = SelfRAG(retriever, **kwargs)
    if name.startswith("compiled:"):
        load_state_into(program, Path(name[len("compiled:"):]))
    elif name != "selfrag":
        raise ValueError(f"unknown program {name!r}")
    return program


# ---------------------------------------------------------------- examples and knowledge base


def example_id(example: Any) -> str:
    return str(M._get(example, "id") or M._get(example, "question"))


def balanced(examples: Sequence[Any], limit: int | None) -> list[Any]:
    """The first ``limit`` examples alternating answerable / unanswerable (half each while both last),
    in file order within each kind; all examples (file order) when ``limit`` is None."""
    if limit is None or limit >= len(examples):
        return list(examples)
    yes = [e for e in examples if M._get(e, "answerable", True)]
    no = [e for e in examples if not M._get(e, "answerable", True)]
    out: list[Any] = []
    while len(out) < limit and (yes or no):
        for pool in (yes, no):
            if pool and len(out) < limit:
                out.append(pool.pop(0))
    return out


DATASET_TASKS = {"clapnq": ("qa_en", "clapnq"), "cmrc": ("qa_zh", "cmrc")}


def load_examples(dataset: str, limit: int | None = None, splits_dir: Path | None = None) -> list[dspy.Example]:
    """Dev examples of ``clapnq`` / ``cmrc`` (the derived splits), or of a JSONL file of QA records
    (``id``, ``question``, ``answers``, ``answerable``, ``gold_doc_ids``), balanced by :func:`balanced`."""
    from optimize.datasets import load_split, to_example

    if dataset in DATASET_TASKS:
        examples = load_split(DATASET_TASKS[dataset][0], "dev", splits_dir)
    else:
        path = Path(dataset)
        if not path.is_file():
            raise FileNotFoundError(f"dataset {dataset!r} is neither clapnq, cmrc nor a JSONL file")
        with open(path, encoding="utf-8") as fh:
            records = [json.loads(line) for line in fh if line.strip()]
        for n, r in enumerate(records):
            if "question" not in r:
                raise ValueError(f"{path}: record {n + 1} has no question")
            r.setdefault("id", f"{path.stem}:{n + 1}")
            r.setdefault("answers", [r["answer"]] if r.get("answer") else [])
            r.setdefault("answerable", bool(r["answers"]))
            r.setdefault("gold_doc_ids", [])
        examples = [to_example(r, "qa_en") for r in records]
    return balanced(examples, limit)


def corpus_name(dataset: str, examples: Sequence[Any] = ()) -> str:
    """The corpus a dataset's questions are answered from: clapnq (+ XQuAD distractors) or cmrc."""
    if dataset in DATASET_TASKS:
        return DATASET_TASKS[dataset][1]
    langs = {M._get(e, "language") for e in examples}
    return "cmrc" if "zh" in langs else "clapnq"


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


# ---------------------------------------------------------------- scoring one prediction


def relevance_counts(trace: Iterable[Any], gold_doc_ids: Iterable[str]) -> dict[str, int]:
    """Confusion counts of the relevance grader over a trace's ``grade_relevance`` steps."""
    gold = {M._doc_id(str(g)) for g in gold_doc_ids or []}
    counts = {"tp": 0, "fp": 0, "fn": 0, "tn": 0}
    for step in trace:
        step = step if isinstance(step, dict) else step.model_dump()
        if step.get("step") != "grade_relevance" or not step.get("ok", True):
            continue
        pid = (step.get("inputs") or {}).get("passage_id")
        if pid is None:
            continue
        is_gold = M._doc_id(str(pid)) in gold
        said = step.get("output") == "relevant"
        counts[("tp" if is_gold else "fp") if said else ("fn" if is_gold else "tn")] += 1
    return counts


def score(example: Any, pred: Any) -> dict[str, float]:
    return {
        "em": float(M.exact_match(example, pred)),
        "f1": float(M.answer_f1(example, pred)),
        "e2e": M.e2e_score(example, pred),
        "abstention_correct": float(M.abstention_correct(example, pred)),
        "citation_hit": float(M.citation_hit(example, pred)),
    }


class SemanticF1Judge:
    """LM-judged semantic F1 of an answer against the gold answer (DSPy's ``SemanticRecallPrecision``
    signature, one call, no chain of thought), for long free-text answers where token F1 is harsh.
    Answerable questions only: an abstention scores 0 without a call; unanswerable ones are not scored
    (None). A failed judgement is None. Its LM calls are evaluation cost, not the program's."""

    def __init__(self, lm: dspy.BaseLM | None = None, adapter: dspy.Adapter | None = None):
        from dspy.evaluate.auto_evaluation import SemanticRecallPrecision

        self.lm, self.adapter = lm, adapter
        self.module = dspy.Predict(SemanticRecallPrecision)

    def __call__(self, example: Any, pred: Any) -> float | None:
        from dspy.evaluate.auto_evaluation import f1_score

        from programs.base import lm_scope

        golds = M._golds(example)
        if not bool(M._get(example, "answerable", True)) or not golds:
            return None
        if bool(M._get(pred, "abstained", False)):
            return 0.0
        try:
            with lm_scope(self.lm, self.adapter):
                out = self.module(question=M._get(example, "question"), ground_truth=golds[0],
                                  system_response=M._answer(pred))
            return round(f1_score(float(out.precision), float(out.recall)), 4)
        except Exception:  # noqa: BLE001 - an unparsable judgement is a missing score, not a crash
            return None


def run_one(program: dspy.Module, name: str, example: Any,
            semantic_f1: Callable[[Any, Any], float | None] | None = None) -> dict[str, Any]:
    """Run ``program`` on one example and return its results line (an error becomes ``ok: false``)."""
    row: dict[str, Any] = {
        "task": "qa", "program": name, "id": example_id(example), "question": M._get(example, "question"),
        "answerable": bool(M._get(example, "answerable", True)),
        "gold_doc_ids": list(M._get(example, "gold_doc_ids") or []),
    }
    start = time.perf_counter()
    try:
        pred = program(question=row["question"])
    except Exception as exc:  # noqa: BLE001 - one failing question is recorded, the run goes on
        row.update(ok=False, error=f"{type(exc).__name__}: {exc}", seconds=round(time.perf_counter() - start, 4))
        return row
    seconds = round(time.perf_counter() - start, 4)
    result = pred.result
    scores = score(example, pred)
    if semantic_f1 is not None:
        scores["semantic_f1"] = semantic_f1(example, pred)
    row.update(
        ok=True, error=None, answer=pred.answer, abstained=bool(pred.abstained),
        cited_doc_ids=list(pred.cited_doc_ids or []), retrieved=bool(result.retrieved), supported=result.supported,
        used_web=bool(result.used_web), scores=scores,
        relevance=relevance_counts(result.trace, row["gold_doc_ids"]),
        usage=result.usage.model_dump(), seconds=seconds, result=result.model_dump(mode="json"),
    )
    return row


def run_support_one(program: dspy.Module, name: str, example: Any) -> dict[str, Any] | None:
    """The program's support judge on one labelled ``support`` example; None if it has no judge."""
    from programs.base import lm_scope
    from programs.tracing import Tracer

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
    for line in data.decode("utf-8").splitlines():
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
             progress: bool = False, on_row: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    """Run every program on every example (question-major), appending each line to
    ``<out_dir>/results.jsonl``; pairs already in the file are skipped. Returns all lines (old and new)
    of the requested programs. ``on_row`` is called after each line is written (a hook for progress or
    for tests to simulate a crash by raising)."""
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

    bar = _progress(progress, len(todo), len(examples) * len(programs) - sum(t == "qa" for t, _, _ in todo))
    with open(path, "a", encoding="utf-8") as fh, bar as p:
        task_id = p.add_task("eval", total=len(todo)) if p is not None else None
        for task, name, ex in todo:
            if p is not None:
                p.update(task_id, description=f"{name:>14} · {example_id(ex)[:28]}")
            row = run_one(programs[name], name, ex, semantic_f1) if task == "qa" else run_support_one(programs[name], name, ex)
            if row is None:
                continue
            _append(fh, row)
            rows.append(row)
            if p is not None:
                p.advance(task_id)
            if on_row is not None:
                on_row(row)
    return [r for r in rows if r["program"] in programs]


def _progress(enabled: bool, total: int, already: int):
    import contextlib

    if not enabled:
        return contextlib.nullcontext(None)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, \
        TimeRemainingColumn

    if already:
        from rich.console import Console

        Console(stderr=True).print(f"resuming: {already} finished question(s) skipped")
    return Progress(TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), TimeRemainingColumn(), transient=False)


# ---------------------------------------------------------------- summary


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolated percentile (numpy's default), None for no values."""
    xs = sorted(values)
    if not xs:
        return None
    pos = (len(xs) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def _stats(values: Sequence[float]) -> dict[str, float | None]:
    return {"mean": M.mean(values) if values else None, "p50": percentile(values, 50), "p95": percentile(values, 95)}


def _ratio(num: float, den: float) -> float | None:
    return num / den if den else None


def _mean_present(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return M.mean(present) if present else None


def summarize_program(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    qa = [r for r in rows if r.get("task", "qa") == "qa"]
    ok = [r for r in qa if r.get("ok")]
    answerable = [r for r in ok if r["answerable"]]
    unanswerable = [r for r in ok if not r["answerable"]]
    answered = [r for r in ok if not r["abstained"]]
    rel = {k: sum(r["relevance"][k] for r in ok) for k in ("tp", "fp", "fn", "tn")}
    judged = any(r.get("supported") is not None for r in ok)
    support_rows = [r for r in rows if r.get("task") == "support"]
    support_ok = [r for r in support_rows if r.get("ok")]

    def avg(rs, key):
        return M.mean(r["scores"][key] for r in rs) if rs else None

    return {
        "questions": len(qa),
        "answerable": len(answerable),
        "unanswerable": len(unanswerable),
        "errors": len(qa) - len(ok),
        "retrieve_accuracy": M.mean(float(r["retrieved"]) for r in ok) if ok else None,
        "relevance_precision": _ratio(rel["tp"], rel["tp"] + rel["fp"]),
        "relevance_recall": _ratio(rel["tp"], rel["tp"] + rel["fn"]),
        "relevance_counts": rel,
        "support_accuracy": M.mean(r["correct"] for r in support_rows) if support_rows else None,
        "support_examples": len(support_rows),
        "support_errors": len(support_rows) - len(support_ok),
        "em": avg(answerable, "em"),
        "f1": avg(answerable, "f1"),
        "semantic_f1": _mean_present(r["scores"].get("semantic_f1") for r in answerable),
        "e2e": avg(ok, "e2e"),
        "abstain_unanswerable": M.mean(float(r["abstained"]) for r in unanswerable) if unanswerable else None,
        "abstain_answerable": M.mean(float(r["abstained"]) for r in answerable) if answerable else None,
        "abstention_accuracy": avg(ok, "abstention_correct"),
        "citation_hit": avg(answerable, "citation_hit"),
        "groundedness": (M.mean(float(r.get("supported") in ACCEPTED_SUPPORT) for r in answered)
                         if judged and answered else None),
        "lm_calls": _stats([r["usage"]["lm_calls"] for r in ok]),
        "prompt_tokens": _stats([r["usage"]["prompt_tokens"] for r in ok]),
        "completion_tokens": _stats([r["usage"]["completion_tokens"] for r in ok]),
        "seconds": _stats([r["seconds"] for r in ok]),
    }


def summarize(rows: Sequence[dict[str, Any]], programs: Sequence[str] | None = None,
              meta: dict[str, Any] | None = None) -> dict[str, Any]:
    names = list(programs) if programs is not None else list(dict.fromkeys(r["program"] for r in rows))
    return {"meta": meta or {},
            "programs": {n: summarize_program([r for r in rows if r["program"] == n]) for n in names}}


# ---------------------------------------------------------------- reports


def _fmt(value: Any, digits: int = 2) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


COLUMNS = (
    ("n", lambda s: s["questions"]),
    ("err", lambda s: s["errors"]),
    ("retrieve acc", lambda s: s["retrieve_accuracy"]),
    ("rel P", lambda s: s["relevance_precision"]),
    ("rel R", lambda s: s["relevance_recall"]),
    ("support acc", lambda s: s["support_accuracy"]),
    ("EM", lambda s: s["em"]),
    ("F1", lambda s: s["f1"]),
    ("sem F1", lambda s: s.get("semantic_f1")),
    ("e2e", lambda s: s["e2e"]),
    ("abstain unans.", lambda s: s["abstain_unanswerable"]),
    ("abstain ans.", lambda s: s["abstain_answerable"]),
    ("cite hit", lambda s: s["citation_hit"]),
    ("grounded", lambda s: s["groundedness"]),
    ("LM calls mean/p50/p95", lambda s: _triple(s["lm_calls"], 1)),
    ("prompt tok mean/p50/p95", lambda s: _triple(s["prompt_tokens"], 0)),
    ("compl. tok mean/p50/p95", lambda s: _triple(s["completion_tokens"], 0)),
    ("s mean/p50/p95", lambda s: _triple(s["seconds"], 1)),
)


def _triple(stats: dict[str, float | None], digits: int) -> str:
    return " / ".join(_fmt(None if stats[k] is None else float(stats[k]), digits) for k in ("mean", "p50", "p95"))


def render_markdown(summary: dict[str, Any]) -> str:
    meta = summary.get("meta") or {}
    lines = [f"# Evaluation {meta.get('run_id', '')}".rstrip(), ""]
    for key in ("dataset", "examples", "profile", "model", "program_settings", "started", "finished"):
        if key in meta:
            lines.append(f"- {key}: {meta[key] if not isinstance(meta[key], dict) else json.dumps(meta[key])}")
    lines += ["", "| program | " + " | ".join(c for c, _ in COLUMNS) + " |",
              "|---|" + "---:|" * len(COLUMNS)]
    for name, s in summary["programs"].items():
        lines.append(f"| {name} | " + " | ".join(_fmt(fn(s)) for _, fn in COLUMNS) + " |")
    lines += ["", "EM/F1/cite hit on answerable questions; e2e = F1 if answered (answerable) or 1 if abstained "
              "(unanswerable); rel P/R = relevance grader against gold passages over graded passages; "
              "grounded = answers the support judge accepted (fully/partially); errors are excluded from "
              "averages.", ""]
    return "\n".join(lines)


def plot(summary: dict[str, Any], path: Path | str) -> Path:
    """Quality (e2e, F1) against cost (mean seconds and mean tokens per question), one point per program."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    for ax, (xlabel, xfn) in zip(axes, (
        ("mean wall seconds per question", lambda s: s["seconds"]["mean"]),
        ("mean LM tokens per question (prompt + completion)",
         lambda s: (s["prompt_tokens"]["mean"] or 0) + (s["completion_tokens"]["mean"] or 0)),
    )):
        for i, (name, s) in enumerate(summary["programs"].items()):
            x = xfn(s)
            if x is None or s["e2e"] is None:
                continue
            label = f"compiled:{Path(name[9:]).stem}" if name.startswith("compiled:") else name
            ax.scatter([x], [s["e2e"]], s=60, marker="o")
            # staggered labels: programs with equal quality often sit on one line
            ax.annotate(label, (x, s["e2e"]), textcoords="offset points", xytext=(5, 5 + 9 * (i % 4)), fontsize=8)
            if s["f1"] is not None:
                ax.scatter([x], [s["f1"]], s=30, marker="x", color="grey")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("quality (● e2e, × F1 on answerable)")
        ax.set_ylim(-0.05, 1.05)
        ax.grid(alpha=0.3)
    fig.suptitle(f"Quality against cost — {summary.get('meta', {}).get('run_id', '')}")
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_reports(out_dir: Path | str, summary: dict[str, Any]) -> dict[str, Path]:
    out_dir = Path(out_dir)
    paths = {"summary_json": out_dir / SUMMARY_JSON, "summary_md": out_dir / SUMMARY_MD, "plot": out_dir / PLOT}
    paths["summary_json"].write_text(json.dumps(summary, indent=2, ensure_ascii=False, default=str) + "\n",
                                     encoding="utf-8")
    paths["summary_md"].write_text(render_markdown(summary), encoding="utf-8")
    plot(summary, paths["plot"])
    return paths


# ---------------------------------------------------------------- one call from settings to reports


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S")


def evaluate(settings: Any, dataset: str, programs: Sequence[str], *, limit: int | None = None,
             run_id: str | None = None, reports_dir: Path | str = "reports", lms: tuple | None = None,
             embedder: Any = None, support_limit: int = 0, semantic_f1: bool = False, progress: bool = False,
             on_row: Callable[[dict[str, Any]], None] | None = None) -> tuple[Path, dict[str, Any]]:
    """Build (or reuse) the ``eval-<corpus>`` knowledge base, the LMs and the programs from
    ``settings``, run them (resuming ``run_id`` when its folder exists: the examples are the ones the
    run started with) and write the reports. Returns ``(out_dir, summary)``."""
    from optimize.datasets import corpus_documents, load_split
    from selfrag.paths import offline_environment
    from selfrag.wiring import build_knowledge_base, build_lms, build_web

    offline_environment()
    names = parse_programs(programs)
    run_id = run_id or new_run_id()
    out_dir = Path(reports_dir) / run_id
    config_path = out_dir / CONFIG
    examples = load_examples(dataset, None)
    if config_path.is_file():  # resume: the same questions as the interrupted run
        config = json.loads(config_path.read_text(encoding="utf-8"))
        by_id = {example_id(e): e for e in examples}
        missing = [i for i in config["example_ids"] if i not in by_id]
        if missing:
            raise ValueError(f"run {run_id}: {len(missing)} example(s) of the run are not in {dataset}")
        examples = [by_id[i] for i in config["example_ids"]]
        config["programs"] = list(dict.fromkeys([*config.get("programs", []), *names]))
    else:
        examples = balanced(examples, limit)
        config = {"run_id": run_id, "dataset": dataset, "programs": names, "limit": limit,
                  "example_ids": [example_id(e) for e in examples], "started": time.strftime("%Y-%m-%d %H:%M:%S"),
                  "profile": settings.lm.profile, "model": settings.lm.model,
                  "program_settings": settings.program.model_dump(mode="json"),
                  "retrieval": settings.retrieval.model_dump(mode="json")}
    out_dir.mkdir(parents=True, exist_ok=True)
    config_path.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")

    corpus = corpus_name(dataset, examples)
    kb = build_knowledge_base(settings, collection=f"eval-{corpus}", embedder=embedder)
    added = ensure_corpus(kb, corpus_documents(corpus), progress=progress)
    retriever = kb.retriever()
    generator, critic, adapter = lms if lms is not None else build_lms(settings)
    web = build_web(settings, embedder=embedder) if settings.web.backend != "none" else None
    built = {n: build_program(n, retriever, web_search=web, config=settings.program, generator_lm=generator,
                              critic_lm=critic, adapter=adapter) for n in names}
    support_examples = load_split("support", "dev")[:support_limit] if support_limit else []
    judge = SemanticF1Judge(critic or generator, adapter) if semantic_f1 else None
    rows = run_eval(built, examples, out_dir, support_examples=support_examples, semantic_f1=judge,
                    progress=progress, on_row=on_row)
    meta = {"run_id": run_id, "dataset": dataset, "examples": len(examples), "profile": settings.lm.profile,
            "model": settings.lm.model, "program_settings": {k: v for k, v in settings.program.model_dump().items()
                                                             if k in ("k", "max_candidates", "max_rewrites",
                                                                      "max_web_rounds", "max_regenerations",
                                                                      "passage_chars", "retrieve_mode")},
            "collection": kb.name, "corpus_added": added, "started": config["started"],
            "finished": time.strftime("%Y-%m-%d %H:%M:%S")}
    summary = summarize(rows, names, meta)
    write_reports(out_dir, summary)
    return out_dir, summary
