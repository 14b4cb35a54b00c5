"""Compiled-program artifacts: JSON DSPy state with a header that pins what it was compiled for.

An artifact is one JSON file::

    {"selfrag_artifact": 1, "program": "SelfRAG", "program_version": "...", "signature_hash": "...",
     "manifest": {...}, "state": {<dspy dump_state()>}, "thresholds": {"retrieve": .., "relevance": ..,
     "answer": ..}}

``thresholds`` (optional) are the decision thresholds the calibrate stage fitted on labelled dev data
(their dev curves are in the manifest); a program without them uses :class:`~programs.thresholds.Thresholds`' defaults.

It never holds pickled code; ``program`` is the class name, which :func:`artifact_program` maps to
the registry name. Loading refuses a missing or corrupt file, another program, another
program version, or signatures whose fields changed since compiling (the hash covers each named
predictor's input and output fields and their types, not the instructions an optimizer rewrites).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import dspy

from pydantic import ValidationError

from programs.registry import program_name
from programs.thresholds import Thresholds

FORMAT_VERSION = 1
PROGRAM_VERSION = "1.0"


class ArtifactError(ValueError):
    """A compiled artifact that cannot be used with this program."""


def signature_hash(program: dspy.Module) -> str:
    """Hash of every named predictor's field names and types (the contract compiled demos rely on)."""
    desc = []
    for name, predictor in sorted(program.named_predictors(), key=lambda kv: kv[0]):
        sig = predictor.signature
        fields = [(k, "in", str(v.annotation)) for k, v in sig.input_fields.items()]
        fields += [(k, "out", str(v.annotation)) for k, v in sig.output_fields.items()]
        desc.append((name, fields))
    return hashlib.sha256(json.dumps(desc, sort_keys=True).encode()).hexdigest()[:16]


def save_artifact(program: dspy.Module, path: Path | str, manifest: dict[str, Any] | None = None) -> Path:
    """Write ``program``'s DSPy state and a header atomically to ``path`` (JSON)."""
    path = Path(path)
    payload = {
        "selfrag_artifact": FORMAT_VERSION,
        "program": type(program).__name__,
        "program_version": PROGRAM_VERSION,
        "signature_hash": signature_hash(program),
        "dspy_version": dspy.__version__,
        "manifest": manifest or {},
        "state": program.dump_state(),
    }
    thresholds = getattr(program, "compiled_thresholds", None)
    if thresholds is not None:
        payload["thresholds"] = thresholds.model_dump()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(payload, fh, ensure_ascii=False, indent=1, default=str)
    os.chmod(tmp, 0o644)  # mkstemp makes 0600; an artifact is meant to be shared
    os.replace(tmp, path)
    return path


def read_artifact(path: Path | str) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise ArtifactError(f"compiled artifact not found: {path}")
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ArtifactError(f"compiled artifact {path} is not valid JSON: {exc}") from exc
    if not isinstance(payload, dict) or payload.get("selfrag_artifact") != FORMAT_VERSION or "state" not in payload:
        raise ArtifactError(f"{path} is not a selfrag artifact (format {FORMAT_VERSION} expected)")
    return payload


def load_state_into(program: dspy.Module, path: Path | str) -> dspy.Module:
    """Check ``path`` against ``program`` and load its compiled state (instructions and demos)."""
    payload = read_artifact(path)
    expected = {"program": type(program).__name__, "program_version": PROGRAM_VERSION,
                "signature_hash": signature_hash(program)}
    for key, want in expected.items():
        if payload.get(key) != want:
            raise ArtifactError(
                f"compiled artifact {path} was made for {key} = {payload.get(key)!r}, this program has {want!r}; "
                "recompile it with `selfrag compile`"
            )
    try:
        program.load_state(payload["state"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ArtifactError(f"compiled artifact {path} has a corrupt state: {exc}") from exc
    if payload.get("thresholds") is not None:
        try:
            program.compiled_thresholds = Thresholds.model_validate(payload["thresholds"])
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            raise ArtifactError(f"compiled artifact {path} has invalid thresholds: {problems}") from exc
    return program


def artifact_program(path: Path | str) -> str:
    """The registry name of the program ``path`` was compiled for (``selfrag``, ``crag``...), read from
    its header; ArtifactError for an unusable file or an unregistered program."""
    payload = read_artifact(path)
    try:
        return program_name(str(payload.get("program")))
    except ValueError:
        raise ArtifactError(f"compiled artifact {path} is for program {payload.get('program')!r}, "
                            "which is not a registered program") from None
