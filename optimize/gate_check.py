"""The similarity gate and the answer check fitted together on per-question rows, out-of-sample estimates of
the fit, and rows recorded by earlier calibrations.

A row is one calibration question: ``p_stated`` (the answer check's P(the passages state the answer), None
when the check was not taken — with the gate in force a round's passages reach the check ungraded, so its
call failed, and the program then drafts: a row the gate passes unchecked counts as answered, in the fit
and its cross-validation alike), ``top_similarity`` (the first round's best dense similarity, None without
one) and ``answerable`` — and, in rows recorded with the check less its prior (``check_prior``),
``p_prior`` (the check's P(stated) shown no passage, None when that call failed): the check's value is then
the contrast (:func:`row_value`). :func:`fit_gate_and_check` is what calibrate's stated stage fits when the
gate is on; :func:`cross_validate_gate_and_check` re-fits it on k − 1 folds and applies it to the fold left
out, the estimate of how the rule does on new questions (the calibration sample's own figures flatter it);
:class:`RecordedRows` reads the rows compile manifests recorded, so a stated stage can be fitted again
— on more questions pooled from several runs (``selfrag compile --stated-rows``), or under another
objective — without one LM call.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold

from optimize.calibration import fit_joint_thresholds
from optimize.errors import CompileError
from programs.thresholds import check_value, stated_score, too_dissimilar

Row = dict[str, Any]
StatedRows = Callable[[str, str, bool], list[Row]]  # (stage name, embedder, check_prior) → the rows recorded for it


def row_value(row: Row) -> float | None:
    """The check's value on a row (:func:`~programs.thresholds.check_value`): P(stated), or less its prior in a
    row recorded with it (one holding ``p_prior``); None when the check (or its prior) was not taken."""
    return check_value(row["p_stated"], row.get("p_prior"), "p_prior" in row)


def _similarity_weight(ps: list[float], sims: list[float], labels: list[bool]) -> tuple[float, dict[str, float]]:
    """The similarity's weight w in the check's score (1 − w)·P(stated) + w·similarity: the ratio of the two
    coefficients of a logistic regression of "answerable" on both (0 when either does not point the right
    way: then P(stated) alone), with the regression.

    The regression runs on standardised signals and its coefficients are mapped back to the raw scales: an
    embedder's cosines spread over a few hundredths (multilingual-e5-small's over ~0.05) against P(stated)'s
    whole unit interval, and a penalised fit on the raw values shrinks the narrow signal's large coefficient
    most — it under-weighted e5's similarity by a factor of ~3 (w 0.30 instead of 0.88 on 160 ClapNQ train
    questions, the score's ROC AUC 0.885 instead of 0.947)."""
    x = np.column_stack([ps, sims]).astype(float)
    scale = x.std(axis=0)
    mean = x.mean(axis=0)
    # A constant signal (its spread only float rounding, ~1e-16): its coefficient is ~0, and w follows from the
    # other. Standardised by its rounding noise instead, it got a coefficient of ~1e8 and all the weight.
    scale[scale <= 1e-9 * np.maximum(1.0, np.abs(mean))] = 1.0
    model = LogisticRegression().fit((x - mean) / scale, labels)
    coef = model.coef_[0] / scale  # on the raw scales
    a, b = (float(c) for c in coef)
    weight = round(b / (a + b), 4) if a > 0 and b > 0 else 0.0
    intercept = float(model.intercept_[0]) - float(coef @ mean)
    return weight, {"coef_p_stated": round(a, 4), "coef_similarity": round(b, 4), "intercept": round(intercept, 4),
                    "standardised": True}


def fit_gate_and_check(rows: list[Row], objective: Any) -> dict[str, Any] | None:
    """The check's score weight (:func:`_similarity_weight`, on the checked rows), then the similarity gate
    and the check's threshold on that score fitted together on ``rows``, or None when the rows cannot decide
    (fewer than 4, one class). A question the check did not decide (:func:`row_value` None: its call failed)
    is answered unless the gate stops it — the program drafts after a failed check — as :func:`answers`
    counts it; one without a similarity is never gated and scored on P(stated) alone."""
    labels = [r["answerable"] for r in rows]
    if len(rows) < 4 or len(set(labels)) < 2:
        return None
    sims = [1.0 if r["top_similarity"] is None else min(1.0, max(0.0, r["top_similarity"])) for r in rows]
    values = [row_value(r) for r in rows]
    checked = [i for i, v in enumerate(values) if v is not None]
    if len({labels[i] for i in checked}) == 2:
        weight, regression = _similarity_weight([values[i] for i in checked], [sims[i] for i in checked],
                                                [labels[i] for i in checked])
    else:  # the checked rows alone cannot weigh the two signals: P(stated) alone
        weight, regression = 0.0, None
    # an unchecked row scores 1.0: at or above every threshold the fit can choose (all below 1), so it is
    # answered whenever the gate lets it through
    scores = [1.0 if v is None else stated_score(v, r["top_similarity"], weight) for v, r in zip(values, rows)]
    fit = fit_joint_thresholds(sims, scores, labels, objective)
    return {"similarity": fit.first, "stated": fit.second, "stated_similarity_weight": weight,
            "logistic_regression": regression, "objective": fit.objective, "rules": fit.rules,
            "accuracy": round(fit.point.accuracy, 4), "false_abstention": round(fit.point.false_abstention, 4),
            "abstention_unanswerable": round(1.0 - fit.point.false_acceptance, 4)}


def answers(row: Row, gate: float, weight: float, threshold: float) -> bool:
    """Whether the fitted rule lets this question's first round through to an answer: not gated, and either
    not checked (the check call failed: the program drafts) or its score at or above the threshold."""
    if too_dissimilar(row["top_similarity"], gate):
        return False
    value = row_value(row)
    return value is None or stated_score(value, row["top_similarity"], weight) >= threshold


def cross_validate_gate_and_check(rows: list[Row], objective: Any, folds: int = 5, repeats: int = 5,
                                  seed: int = 0) -> dict[str, Any] | None:
    """Out of sample: :func:`fit_gate_and_check` on k − 1 stratified folds, applied to the fold left out,
    over ``repeats`` shuffles; the abstention on unanswerable and the false abstention of the held-out
    decisions, averaged over the shuffles (with their range). None when a class has fewer than 2 rows."""
    labels = np.array([bool(r["answerable"]) for r in rows])
    pos, neg = int(labels.sum()), int((~labels).sum())
    k = min(folds, pos, neg)
    if k < 2:
        return None
    abstained, false = [], []
    for rep in range(repeats):
        held = np.zeros(len(rows), dtype=bool)  # answered on the held-out fold
        for train, test in StratifiedKFold(k, shuffle=True, random_state=seed + rep).split(labels, labels):
            fit = fit_gate_and_check([rows[i] for i in train], objective)
            if fit is None:  # a fold that cannot decide answers everything (no gate, no check)
                held[test] = True
                continue
            for i in test:
                held[i] = answers(rows[i], fit["similarity"], fit["stated_similarity_weight"], fit["stated"])
        abstained.append(float((~held[~labels]).mean()))
        false.append(float((~held[labels]).mean()))
    return {"folds": k, "repeats": repeats, "n": len(rows), "answerable": pos,
            "abstention_unanswerable": round(float(np.mean(abstained)), 4),
            "false_abstention": round(float(np.mean(false)), 4),
            "abstention_range": [round(min(abstained), 4), round(max(abstained), 4)],
            "false_abstention_range": [round(min(false), 4), round(max(false), 4)]}


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_probability(value: Any) -> bool:
    return value is None or _is_number(value) and 0.0 <= value <= 1.0


def _row_ok(row: Any, check_prior: bool) -> bool:
    return (isinstance(row, dict) and isinstance(row.get("answerable"), bool)
            and "p_stated" in row and "top_similarity" in row and _is_probability(row["p_stated"])
            and (not check_prior or "p_prior" in row and _is_probability(row["p_prior"]))
            and (row["top_similarity"] is None or _is_number(row["top_similarity"])))


def _checked_rows(rows: Any, where: str, check_prior: bool) -> list[Row]:
    """``rows`` as fit rows, each checked: P(stated) None or in [0, 1] (and with ``check_prior`` its prior
    likewise), the similarity None or a number (a cosine may be negative), ``answerable`` a bool; the first
    bad one refused, naming its position."""
    if not isinstance(rows, list) or not rows:
        raise CompileError(f"{where}: no rows recorded")
    out = []
    fields = "{p_stated, p_prior, top_similarity, answerable}" if check_prior else "{p_stated, top_similarity, answerable}"
    for i, row in enumerate(rows, 1):
        if not _row_ok(row, check_prior):
            raise CompileError(f"{where}: row {i} is not {fields}: {str(row)[:80]}")
        out.append({"p_stated": row["p_stated"], "top_similarity": row["top_similarity"],
                    "answerable": row["answerable"], **({"p_prior": row["p_prior"]} if check_prior else {})})
    return out


def _check_stage(path: str, report: Any, stage: str) -> None:
    """A recorded stated stage's shape, checked when its manifest is read (before any LM is built): an
    object, its embedder and language text, ``check_prior`` a bool, its rows (when it has any) a list of
    well-formed rows. A stage without rows is refused only when its rows are asked for."""
    where = f"--stated-rows {path} {stage!r}"
    if not isinstance(report, dict):
        raise CompileError(f"{where}: not a stage report (an object), got {str(report)[:80]}")
    for key in ("embedder", "language"):
        if report.get(key) is not None and not isinstance(report[key], str):
            raise CompileError(f"{where}: its {key} is not text: {str(report[key])[:80]}")
    if not isinstance(report.get("check_prior", False), bool):
        raise CompileError(f"{where}: its check_prior is not true or false: {str(report['check_prior'])[:80]}")
    rows = report.get("rows")
    if rows is not None and not isinstance(rows, list):
        raise CompileError(f"{where}: its rows are not a list: {str(rows)[:80]}")
    if rows:
        _checked_rows(rows, where, report.get("check_prior", False))


def _read_manifest(path: Path | str) -> tuple[dict[str, Any], str]:
    """A compile manifest's calibration section (with the run's language when its stages do not say) and
    the file's sha256; CompileError naming the file when it is unreadable or not a compile manifest with
    calibration stages, or when a stated stage is malformed (:func:`_check_stage`)."""
    try:
        raw = Path(path).read_bytes()
        data = json.loads(raw.decode("utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        raise CompileError(f"--stated-rows {path}: cannot read a compile manifest ({exc})") from exc
    calibration = data.get("calibration") if isinstance(data, dict) else None
    if not isinstance(calibration, dict) or not isinstance(calibration.get("stages"), dict):
        raise CompileError(f"--stated-rows {path}: not a compile manifest with calibration stages")
    thresholds = calibration.get("thresholds")
    if thresholds is not None and not isinstance(thresholds, dict):
        raise CompileError(f"--stated-rows {path}: its calibration thresholds are not an object: "
                           f"{str(thresholds)[:80]}")
    for stage, report in calibration["stages"].items():
        if stage.startswith("stated"):
            _check_stage(str(path), report, stage)
    if isinstance(data.get("language"), str):  # the language of the run, for a stage that does not say
        calibration = {**calibration, "language": data["language"]}
    return calibration, hashlib.sha256(raw).hexdigest()


def _resolved(path: Any) -> Path | None:
    try:
        return Path(str(path)).resolve()
    except (OSError, ValueError, RuntimeError):
        return None


def _pooled_sources(calibration: dict[str, Any]) -> list[tuple[str, str | None, str | None]]:
    """(stage, source path, source sha256) for every manifest a stated stage of ``calibration`` pooled rows
    from, as far as it records them: its stages' ``rows_from`` (with the sources' own sources), else — an
    older manifest — the run's ``stated_rows_from`` paths for the stages fitted on recorded rows."""
    out: list[tuple[str, str | None, str | None]] = []

    def walk(stage: str, entries: Any) -> None:
        for entry in entries if isinstance(entries, list) else ():
            if isinstance(entry, dict):
                out.append((stage, entry.get("path"), entry.get("sha256")))
                walk(stage, entry.get("rows_from"))

    named = calibration.get("stated_rows_from")
    for stage, report in calibration["stages"].items():
        if not stage.startswith("stated") or not isinstance(report, dict):
            continue
        if "rows_from" in report:
            walk(stage, report["rows_from"])
        elif "rows_recorded" in report:
            paths = named.get(stage) if isinstance(named, dict) else named
            out += [(stage, p, None) for p in paths if isinstance(p, str)] if isinstance(paths, list) else []
    return out


def _stage_splits(calibration: dict[str, Any], report: dict[str, Any], n: int) -> dict[str, int]:
    """How many of a recorded stage's ``n`` rows are on each split: its own ``row_splits`` (it pooled rows
    itself), else the split it or its calibration ran on — "unknown" for rows pooled before the splits were
    recorded (the calibration's split was then the run's ``--cal-split``, not theirs), and for a stage that
    does not say when its calibration's split is a joined summary of its stages (``train+dev``)."""
    recorded = report.get("row_splits")
    if isinstance(recorded, dict) and recorded and all(isinstance(v, int) for v in recorded.values()):
        return {str(k): v for k, v in recorded.items()}
    if "rows_recorded" in report:
        return {"unknown": n}
    split = report.get("split")
    if not isinstance(split, str):  # the calibration's own split — unless that is a summary of its stages'
        split = calibration.get("split")
        split = split if isinstance(split, str) and "+" not in split else None
    return {split if isinstance(split, str) and split else "unknown": n}


def stage_split(calibration: dict[str, Any], report: dict[str, Any]) -> str:
    """The split(s) a calibration stage's report was fitted on, joined (``train``, ``train+dev``;
    :func:`_stage_splits`)."""
    return "+".join(_stage_splits(calibration, report, 0))


def _stage_embedder(calibration: dict[str, Any], stage: str) -> str:
    """The embedder a recorded stated stage's similarities are on: the stage's own record, else its key
    (``stated@EMBEDDER@LANG``), else the main thresholds' gate embedder."""
    report = calibration["stages"][stage]
    if report.get("embedder"):
        return str(report["embedder"])
    if "@" in stage:
        return stage.split("@")[1]
    return str((calibration.get("thresholds") or {}).get("similarity_embedder") or "")


def _main_stage_fits(calibration: dict[str, Any], stage: str) -> bool:
    """Whether a manifest's main ``stated`` stage holds rows for the per-embedder set ``stage``
    (``stated@EMBEDDER@LANG``): recorded on that embedder, in that language (when the stage says which)."""
    _, _, key = stage.partition("@")
    embedder, _, language = key.partition("@")
    if not key or "stated" not in calibration["stages"]:
        return False
    recorded = calibration["stages"]["stated"].get("language") or calibration.get("language")
    return _stage_embedder(calibration, "stated") == embedder and (not language or recorded in (None, language))


class RecordedRows:
    """Rows recorded by the stated stages of compile manifests (``<name>.manifest.json``), read and checked
    when built — before any LM is built: an unreadable file, a manifest without calibration stages or with a
    malformed stated stage (:func:`_check_stage`), the same manifest twice (by path or content), or one whose
    stage pooled rows from another file also given, is refused then, naming the file. Called with a stage
    name and the embedder being fitted, it pools that stage's rows over all of them, refusing a manifest
    without that stage, whose similarities are on another embedder, or whose rows are another's (a stage
    kept from ``--from``). ``sources``: the files; :meth:`origin`: the splits and files the rows came from."""

    def __init__(self, paths: Sequence[Path | str]):
        self.manifests: list[tuple[str, dict[str, Any], str]] = []
        for path in paths:
            calibration, sha = _read_manifest(path)
            for other, _, other_sha in self.manifests:
                if sha == other_sha or _resolved(path) == _resolved(other):
                    raise CompileError(f"--stated-rows {path}: the same manifest as {other} (its rows would "
                                       "count twice): give it once")
            self.manifests.append((str(path), calibration, sha))
        for path, calibration, _ in self.manifests:
            for stage, source, source_sha in _pooled_sources(calibration):
                for other, _, other_sha in self.manifests:
                    if other != path and (source_sha == other_sha or (
                            source is not None and _resolved(source) == _resolved(other))):
                        raise CompileError(f"--stated-rows {path}: its {stage!r} stage was fitted on rows pooled "
                                           f"from {other}, also given (its rows would count twice): give one of them")
        self.sources = [path for path, _, _ in self.manifests]

    def _pooled(self, stage: str, embedder: str, check_prior: bool
                ) -> list[tuple[str, str, dict[str, Any], str, list[Row]]]:
        """(path, sha256, calibration, the stage read, its rows) per manifest, for ``stage``."""
        out = []
        seen: dict[str, str] = {}
        for path, calibration, sha in self.manifests:
            if stage not in calibration["stages"] and _main_stage_fits(calibration, stage):
                stage_here = "stated"  # a run whose main set was on this embedder (and language) recorded them
            else:
                stage_here = stage
            if stage_here not in calibration["stages"]:
                have = ", ".join(s for s in calibration["stages"] if s.startswith("stated")) or "none"
                raise CompileError(f"--stated-rows {path}: no {stage!r} stage (stated stages: {have})")
            recorded = _stage_embedder(calibration, stage_here)
            if embedder and recorded and recorded != embedder:
                raise CompileError(f"--stated-rows {path}: its {stage_here!r} similarities are on {recorded!r}, "
                                   f"this retriever's are on {embedder!r}")
            report = calibration["stages"][stage_here]
            if bool(report.get("check_prior", False)) != check_prior:
                said = "with" if report.get("check_prior") else "without"
                raise CompileError(f"--stated-rows {path}: its {stage_here!r} rows were recorded {said} the check's "
                                   f"prior; this fit is {'with' if check_prior else 'without'} it (--check-prior)")
            rows = _checked_rows(report.get("rows"), f"--stated-rows {path} {stage_here!r}", check_prior)
            key = json.dumps(rows, sort_keys=True)
            if key in seen:
                raise CompileError(f"--stated-rows {path}: its {stage_here!r} rows are the same as {seen[key]}'s "
                                   "(a stage kept from --from?): give one of them")
            seen[key] = path
            out.append((path, sha, calibration, stage_here, rows))
        return out

    def __call__(self, stage: str, embedder: str, check_prior: bool = False) -> list[Row]:
        return [row for *_, rows in self._pooled(stage, embedder, check_prior) for row in rows]

    def origin(self, stage: str, embedder: str, check_prior: bool = False) -> dict[str, Any]:
        """Where the rows of ``self(stage, ...)`` came from: ``row_splits``, how many on each split
        (:func:`_stage_splits`), and ``rows_from``, per manifest its path, sha256, the stage read, its rows,
        their splits and — rows it pooled itself — where those came from (so a later pooling of this
        manifest with one of them is refused)."""
        splits: dict[str, int] = {}
        sources = []
        for path, sha, calibration, stage_here, rows in self._pooled(stage, embedder, check_prior):
            report = calibration["stages"][stage_here]
            here = _stage_splits(calibration, report, len(rows))
            for split, n in here.items():
                splits[split] = splits.get(split, 0) + n
            entry = {"path": path, "sha256": sha, "stage": stage_here, "rows": len(rows), "row_splits": here}
            if isinstance(report.get("rows_from"), list):
                entry["rows_from"] = report["rows_from"]
            sources.append(entry)
        return {"row_splits": splits, "rows_from": sources}
