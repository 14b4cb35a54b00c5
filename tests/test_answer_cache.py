"""AnswerCache: hit with zero cost, misses when the collection / artifact / settings change, LRU bound,
corrupt files and entries read as empty, never as a crash."""

import logging
import sqlite3
import threading

import pytest

from programs.types import Citation, RAGResult, TraceStep, Usage
from selfrag.answer_cache import AnswerCache, CacheKey, cacheable, fingerprint, normalise_question


def result(question="What is the Heron's range?", answer="80 km", ok=True) -> RAGResult:
    return RAGResult(
        question=question, answer=answer, retrieved=True, supported="fully", score=2.5,
        citations=[Citation(id="c1", source="heron.md", title="Heron", snippet="range of 80 km")],
        trace=[TraceStep(step="retrieve_decision", output="yes", lm_calls=1),
               TraceStep(step="web_search", ok=ok, error=None if ok else "timeout: slow")],
        usage=Usage(lm_calls=7, prompt_tokens=5000, completion_tokens=300), seconds=12.0,
    )


KEY = CacheKey("What is the Heron's range?", collection="col-v1", artifact="art-1", settings="set-1")


@pytest.fixture
def cache(tmp_path):
    c = AnswerCache(tmp_path / "kb" / "answer_cache.sqlite3", max_entries=3)
    yield c
    c.close()


def test_hit_returns_the_result_at_zero_cost(cache):
    assert cache.get(KEY) is None
    assert cache.put(KEY, result())
    hit = cache.get(CacheKey("  what is the heron's RANGE ", "col-v1", "art-1", "set-1"))  # normalised question
    assert hit is not None
    assert hit.answer == "80 km" and hit.citations[0].source == "heron.md" and hit.supported == "fully"
    assert hit.usage == Usage()
    assert [s.step for s in hit.trace] == ["answer_cache"]
    step = hit.trace[0]
    assert step.lm_calls == 0 and step.ok and step.output["hit"] is True
    assert step.output["original_lm_calls"] == 7 and step.output["original_prompt_tokens"] == 5000


@pytest.mark.parametrize("changed", [
    CacheKey(KEY.question, "col-v2", KEY.artifact, KEY.settings),
    CacheKey(KEY.question, KEY.collection, "art-2", KEY.settings),
    CacheKey(KEY.question, KEY.collection, KEY.artifact, "set-2"),
    CacheKey("What is the Kestrel's range?", KEY.collection, KEY.artifact, KEY.settings),
])
def test_miss_when_anything_in_the_key_changes(cache, changed):
    cache.put(KEY, result())
    assert cache.get(changed) is None
    assert cache.get(KEY) is not None


def test_invalidate_by_collection_or_artifact(cache):
    cache.put(KEY, result())
    cache.put(CacheKey("q2", "col-v1", "art-2", "set-1"), result("q2"))
    cache.put(CacheKey("q3", "col-v9", "art-2", "set-1"), result("q3"))
    assert cache.invalidate(collection="col-v1", artifact="art-2") == 1
    assert cache.invalidate(artifact="art-1") == 1
    assert cache.get(KEY) is None and len(cache) == 1
    assert cache.invalidate() == 1 and len(cache) == 0


def test_bounded_with_least_recently_used_eviction(cache):
    keys = [CacheKey(f"q{i}", "c", "a", "s") for i in range(4)]
    for k in keys[:3]:
        cache.put(k, result(k.question))
    assert cache.get(keys[0]) is not None  # q0 is now the most recently used; q1 the least
    cache.put(keys[3], result("q3"))
    assert len(cache) == 3
    assert cache.get(keys[1]) is None
    assert all(cache.get(k) is not None for k in (keys[0], keys[2], keys[3]))


def test_failed_runs_are_not_cached(cache):
    bad = result(ok=False)
    assert not cacheable(bad)
    assert cache.put(KEY, bad) is False and cache.get(KEY) is None


def test_persists_across_instances(tmp_path):
    path = tmp_path / "c.sqlite3"
    first = AnswerCache(path)
    first.put(KEY, result())
    first.close()
    second = AnswerCache(path)
    assert second.get(KEY).answer == "80 km"
    second.close()


def test_corrupt_file_is_treated_as_empty_with_a_warning(tmp_path, caplog):
    path = tmp_path / "answer_cache.sqlite3"
    path.write_bytes(b"this is not a sqlite database at all" * 100)
    with caplog.at_level(logging.WARNING, logger="selfrag.answer_cache"):
        cache = AnswerCache(path)
    assert "unreadable" in caplog.text
    assert (tmp_path / "answer_cache.sqlite3.corrupt").exists()
    assert cache.get(KEY) is None and len(cache) == 0
    assert cache.put(KEY, result()) and cache.get(KEY) is not None
    cache.close()


def test_entry_that_no_longer_parses_is_dropped(cache, caplog):
    cache.put(KEY, result())
    with sqlite3.connect(cache.path) as conn:
        conn.execute("UPDATE answers SET result = '{\"question\": 1}'")
    with caplog.at_level(logging.WARNING, logger="selfrag.answer_cache"):
        assert cache.get(KEY) is None
    assert "no longer parses" in caplog.text and len(cache) == 0


def test_storage_error_reads_as_a_miss(cache, caplog):
    cache.put(KEY, result())
    with sqlite3.connect(cache.path) as conn:
        conn.execute("DROP TABLE answers")
    with caplog.at_level(logging.WARNING, logger="selfrag.answer_cache"):
        assert cache.get(KEY) is None
        assert cache.put(KEY, result()) is False
    assert "read failed" in caplog.text and "write failed" in caplog.text


def test_thread_safe_puts_and_gets(tmp_path):
    cache = AnswerCache(tmp_path / "c.sqlite3", max_entries=50)
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            k = CacheKey(f"q{i}", "c", "a", "s")
            cache.put(k, result(k.question))
            assert cache.get(k).question == k.question
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(cache) == 20
    cache.close()


def test_helpers():
    assert normalise_question("  What   IS x？ ") == "what is x"
    assert fingerprint({"b": 1, "a": 2}) == fingerprint({"a": 2, "b": 1}) != fingerprint({"a": 3, "b": 1})
    assert len(fingerprint("x")) == 16
    with pytest.raises(ValueError):
        AnswerCache("unused.sqlite3", max_entries=0)
