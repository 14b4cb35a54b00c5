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
predictor's input and output fields and their types, not the instructions an optimizer rewrites),
and a state of the wrong shape (:func:`check_state`: demos that are not a list of objects, unknown
keys, an embedded LM).

A predictor a program added after artifacts were compiled for it (listed in the program's
``ADDED_PREDICTORS``, e.g. SelfRAG's ``next_query``) may be absent from an artifact: the signature hash
is then checked over the predictors the artifact has, and the added one keeps its uncompiled state.

``state_sha256`` (header) is the content hash of ``state`` and ``thresholds`` at save time (also put
into the manifest dict the caller passed, so a manifest file written afterwards records it). A file
whose content no longer matches — instructions or demos edited by hand, a partial copy — loads with a
warning, or is refused with ``strict=True``; so is one without a hash, under ``strict``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

import dspy

from pydantic import ValidationError

from programs.registry import program_name
from programs.thresholds import Thresholds

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1
PROGRAM_VERSION = "1.0"
HASH_KEY = "state_sha256"
# What a predictor's saved state may hold (dspy's Predict.load_state sets any other key as an attribute).
_PREDICTOR_KEYS = {"traces", "train", "demos", "signature", "lm", "fields"}


class ArtifactError(ValueError):
    """A compiled artifact that cannot be used with this program."""


def signature_hash(program: dspy.Module, exclude: frozenset[str] | set[str] = frozenset()) -> str:
    """Hash of every named predictor's field names and types (the contract compiled demos rely on),
    leaving out the predictors named in ``exclude``."""
    desc = []
    for name, predictor in sorted(program.named_predictors(), key=lambda kv: kv[0]):
        if name in exclude:
            continue
        sig = predictor.signature
        fields = [(k, "in", str(v.annotation)) for k, v in sig.input_fields.items()]
        fields += [(k, "out", str(v.annotation)) for k, v in sig.output_fields.items()]
        desc.append((name, fields))
    return hashlib.sha256(json.dumps(desc, sort_keys=True).encode()).hexdigest()[:16]


def content_hash(payload: dict[str, Any]) -> str:
    """sha256 of an artifact's ``state`` and ``thresholds`` as canonical JSON (what loading uses)."""
    content = {"state": payload.get("state"), "thresholds": payload.get("thresholds")}
    canonical = json.dumps(json.loads(json.dumps(content, default=str)), sort_keys=True, ensure_ascii=False,
                           separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


def save_artifact(program: dspy.Module, path: Path | str, manifest: dict[str, Any] | None = None) -> Path:
    """Write ``program``'s DSPy state and a header atomically to ``path`` (JSON), with its content hash
    (``state_sha256``, also set in ``manifest`` when one is given)."""
    path = Path(path)
    payload = {
        "selfrag_artifact": FORMAT_VERSION,
        "program": type(program).__name__,
        "program_version": PROGRAM_VERSION,
        "signature_hash": signature_hash(program),
        "dspy_version": dspy.__version__,
        "manifest": dict(manifest or {}),
        "state": program.dump_state(),
    }
    thresholds = getattr(program, "compiled_thresholds", None)
    if thresholds is not None:
        payload["thresholds"] = thresholds.model_dump()
    payload[HASH_KEY] = content_hash(payload)  # over state and thresholds only: the manifest may carry it
    payload["manifest"][HASH_KEY] = payload[HASH_KEY]
    if manifest is not None:
        manifest[HASH_KEY] = payload[HASH_KEY]
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
    except RecursionError:
        raise ArtifactError(f"compiled artifact {path} is not valid JSON: nested too deeply") from None
    except OSError as exc:
        raise ArtifactError(f"compiled artifact {path} cannot be read: {exc.strerror or exc}") from None
    if not isinstance(payload, dict) or payload.get("selfrag_artifact") != FORMAT_VERSION or "state" not in payload:
        raise ArtifactError(f"{path} is not a selfrag artifact (format {FORMAT_VERSION} expected)")
    return payload


def absent_added_predictors(program: dspy.Module, state: Any) -> frozenset[str]:
    """The predictors ``program`` added since artifacts were compiled (its ``ADDED_PREDICTORS``) that
    ``state`` does not hold: they load as they are (uncompiled)."""
    if not isinstance(state, dict):
        return frozenset()  # refused by check_state
    return frozenset(n for n in getattr(program, "ADDED_PREDICTORS", frozenset()) if n not in state)


def check_state(program: dspy.Module, state: Any, path: Path | str) -> None:
    """Refuse a state that is not the shape ``program`` saves: one object per named predictor (no
    other; one of its ``ADDED_PREDICTORS`` may be missing), each with only the keys a predictor saves, ``demos`` / ``traces`` / ``train`` lists of
    objects, a ``signature`` with string instructions and field objects, and no embedded LM."""
    def bad(where: str, problem: str) -> ArtifactError:
        return ArtifactError(f"compiled artifact {path} has a corrupt state: {where}: {problem}")

    if not isinstance(state, dict):
        raise bad("state", f"expected an object, got {type(state).__name__}")
    names = {name for name, _ in program.named_predictors()} - absent_added_predictors(program, state)
    missing, unknown = sorted(names - set(state)), sorted(set(state) - names)
    if missing or unknown:
        raise bad("state", "; ".join(filter(None, [missing and f"missing predictor(s) {', '.join(missing)}",
                                                 unknown and f"unknown predictor(s) {', '.join(map(str, unknown))}"])))
    for name in sorted(names):
        entry = state[name]
        if not isinstance(entry, dict):
            raise bad(name, f"expected an object, got {type(entry).__name__}")
        extra = sorted(set(entry) - _PREDICTOR_KEYS)
        if extra:
            raise bad(name, f"unknown key(s) {', '.join(map(repr, extra))}")
        for key in ("demos", "traces", "train"):
            items = entry.get(key, [])
            if not isinstance(items, list):
                raise bad(f"{name}.{key}", f"expected a list, got {type(items).__name__}")
            for i, item in enumerate(items):
                if not isinstance(item, dict) or not all(isinstance(k, str) for k in item):
                    raise bad(f"{name}.{key}[{i}]", f"expected an object, got {type(item).__name__}")
        signature = entry.get("signature")
        if not isinstance(signature, dict) or not isinstance(signature.get("instructions"), str):
            raise bad(f"{name}.signature", "expected an object with string instructions")
        fields = signature.get("fields", [])
        if not isinstance(fields, list) or not all(
                isinstance(f, dict) and all(isinstance(v, str) for v in f.values()) for f in fields):
            raise bad(f"{name}.signature.fields", "expected a list of objects of strings")
        if entry.get("lm") is not None:
            raise bad(f"{name}.lm", "an artifact must not carry an LM (LMs come from the settings)")


def verify_content(payload: dict[str, Any], path: Path | str, strict: bool = False) -> bool:
    """Whether the artifact's content matches the hash recorded when it was saved. A mismatch (or, with
    ``strict``, a missing hash) raises ArtifactError under ``strict`` and is logged as a warning otherwise."""
    recorded = payload.get(HASH_KEY)
    if recorded is None:
        if strict:
            raise ArtifactError(f"compiled artifact {path} records no content hash ({HASH_KEY}); "
                                "re-save it with `selfrag compile`, or load it without --strict")
        logger.info("compiled artifact %s records no content hash; not verified", path)
        return False
    if recorded == content_hash(payload):
        return True
    message = (f"compiled artifact {path} was modified after it was saved: its content does not match its "
               f"{HASH_KEY} (instructions, demos or thresholds edited?)")
    if strict:
        raise ArtifactError(message + "; refused (--strict)")
    logger.warning("%s; loading it anyway (--strict refuses it)", message)
    return False


def load_state_into(program: dspy.Module, path: Path | str, strict: bool = False) -> dspy.Module:
    """Check ``path`` against ``program`` and load its compiled state (instructions and demos).
    ``strict``: refuse an artifact whose content hash does not match (else: a warning)."""
    payload = read_artifact(path)
    absent = absent_added_predictors(program, payload["state"])
    expected = {"program": type(program).__name__, "program_version": PROGRAM_VERSION,
                "signature_hash": signature_hash(program, exclude=absent)}
    for key, want in expected.items():
        if payload.get(key) != want:
            raise ArtifactError(
                f"compiled artifact {path} was made for {key} = {payload.get(key)!r}, this program has {want!r}; "
                "recompile it with `selfrag compile`"
            )
    check_state(program, payload["state"], path)
    thresholds = None
    if payload.get("thresholds") is not None:
        try:
            thresholds = Thresholds.model_validate(payload["thresholds"])
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            raise ArtifactError(f"compiled artifact {path} has invalid thresholds: {problems}") from exc
    verify_content(payload, path, strict)
    own = dict(program.named_predictors())
    state = {**{name: own[name].dump_state() for name in absent}, **payload["state"]}
    try:
        program.load_state(state)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ArtifactError(f"compiled artifact {path} has a corrupt state: {exc}") from exc
    if thresholds is not None:
        program.compiled_thresholds = thresholds
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
