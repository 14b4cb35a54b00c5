"""The llama.cpp engine against a fake ``Llama``: schema translation, usage, errors, locking, state."""

import json
import threading
import time
from typing import Literal

import dspy
import pytest
from dspy.utils.exceptions import ContextWindowExceededError, LMTimeoutError, LMUnsupportedFeatureError

from selfrag.lm import llamacpp_model
from selfrag.lm.llamacpp_engine import LlamaCppEngine
from selfrag.lm.llamacpp_request import to_llama_response_format


class FakeLlama:
    """Records create_chat_completion calls; replies with a scripted JSON text and usage."""

    def __init__(
        self,
        reply='{"label": "relevant"}',
        prompt_tokens=123,
        completion_tokens=7,
        evaluated=None,
        error=None,
        delay=0.0,
    ):
        self.calls = []
        self.reply = reply
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = completion_tokens
        self.evaluated = evaluated
        self.error = error
        self.delay = delay
        self.active = 0
        self.max_active = 0

    def eval(self, tokens):  # wrapped by the engine's instrumentation hook
        pass

    def create_chat_completion(self, **kwargs):
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        try:
            self.calls.append(kwargs)
            if self.evaluated is not None:
                self.eval([0] * self.evaluated)  # the prompt suffix not in the KV cache
                for _ in range(self.completion_tokens):
                    self.eval([0])
            time.sleep(self.delay)
            if self.error is not None:
                raise self.error
            return {
                "id": "chatcmpl-fake",
                "choices": [
                    {"message": {"role": "assistant", "content": self.reply}, "finish_reason": "stop"}
                ],
                "usage": {
                    "prompt_tokens": self.prompt_tokens,
                    "completion_tokens": self.completion_tokens,
                    "total_tokens": self.prompt_tokens + self.completion_tokens,
                },
            }
        finally:
            self.active -= 1


def make_lm(fake, *, temperature=0.0, max_tokens=64, timeout=30.0, path="/models/fake.gguf", loads=None):
    def factory(p, n_ctx, n_threads, seed):
        if loads is not None:
            loads.append((p, n_ctx, n_threads))
        return fake

    engine = LlamaCppEngine(
        path,
        n_ctx=2048,
        n_threads=1,
        timeout=timeout,
        max_tokens=max_tokens,
        temperature=temperature,
        llama_factory=factory,
    )
    return dspy.LM(
        "llamacpp/fake",
        engine=engine,
        temperature=temperature,
        max_tokens=max_tokens,
        cache=False,
        num_retries=0,
    )


class Relevance(dspy.Signature):
    """Is the passage relevant to the question?"""

    question: str = dspy.InputField()
    passage: str = dspy.InputField()
    label: Literal["relevant", "irrelevant"] = dspy.OutputField()


def test_jsonadapter_schema_becomes_llama_response_format():
    fake = FakeLlama()
    lm = make_lm(fake, max_tokens=64)
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        pred = dspy.Predict(Relevance)(
            question="Capital of France?", passage="Paris is the capital of France."
        )
    assert pred.label == "relevant"
    (call,) = fake.calls
    fmt = call["response_format"]
    assert fmt["type"] == "json_object"
    schema = fmt["schema"]
    assert schema["type"] == "object"
    assert schema["required"] == ["label"]
    assert schema["additionalProperties"] is False
    assert schema["properties"]["label"]["enum"] == ["relevant", "irrelevant"]
    assert call["temperature"] == 0.0
    assert call["max_tokens"] == 64
    assert call["stream"] is False
    roles = [m["role"] for m in call["messages"]]
    assert roles == ["system", "user"]
    assert "Capital of France?" in call["messages"][1]["content"]
    usage = lm.history[-1]["usage"]
    assert usage["prompt_tokens"] == 123
    assert usage["completion_tokens"] == 7


def test_open_mapping_output_gets_plain_json_mode():
    class Extract(dspy.Signature):
        text: str = dspy.InputField()
        facts: dict[str, str] = dspy.OutputField()

    fake = FakeLlama(reply='{"facts": {"a": "b"}}')
    with dspy.context(lm=make_lm(fake), adapter=dspy.JSONAdapter()):
        pred = dspy.Predict(Extract)(text="a is b")
    assert pred.facts == {"a": "b"}
    assert fake.calls[0]["response_format"] == {"type": "json_object"}


def test_call_time_temperature_and_max_tokens_reach_llama():
    fake = FakeLlama(reply="hello")
    lm = make_lm(fake)
    assert lm("hi", temperature=0.7, max_tokens=20) == ["hello"]
    assert fake.calls[0]["temperature"] == 0.7
    assert fake.calls[0]["max_tokens"] == 20
    assert "response_format" not in fake.calls[0]


def test_sampled_calls_take_successive_seeds_and_greedy_or_seeded_calls_keep_theirs():
    """llama.cpp reseeds its sampler on every call: the same prompt sampled twice with one seed is the same
    sample. Each sampled call (temperature > 0, no seed asked for) takes the next seed; a greedy call and a
    call that names its seed are left alone."""
    fake = FakeLlama(reply="hello")
    lm = make_lm(fake)
    lm("hi", temperature=0.7, rollout_id=1)
    lm("hi", temperature=0.7, rollout_id=2)
    lm("hi")
    lm("hi", temperature=0.7, seed=42)
    assert [c["seed"] for c in fake.calls] == [0, 1, 0, 42]


def test_response_format_translation():
    assert to_llama_response_format(None) is None
    assert to_llama_response_format({"type": "json_object"}) == {"type": "json_object"}
    schema = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}
    assert to_llama_response_format(
        {"type": "json_schema", "schema": schema, "name": "X", "strict": True}
    ) == {"type": "json_object", "schema": schema}


def test_prefix_reuse_is_reported_as_cached_tokens():
    fake = FakeLlama(reply="ok", prompt_tokens=100, completion_tokens=3, evaluated=40)
    lm = make_lm(fake)
    lm("hi")
    engine = lm.engine
    assert engine.last.prompt_tokens == 100
    assert engine.last.prompt_evaluated == 40
    assert lm.history[-1]["usage"]["prompt_tokens_details"] == {"cached_tokens": 60}
    assert engine.stats.calls == 1 and engine.stats.prompt_evaluated == 40


def test_model_is_loaded_lazily_and_once_per_key():
    fake, loads = FakeLlama(reply="ok"), []
    lm1 = make_lm(fake, loads=loads)
    lm2 = make_lm(fake, loads=loads)
    assert loads == []  # construction never loads
    lm1("a")
    lm2("b")
    assert loads == [("/models/fake.gguf", 2048, 1)]


def test_context_overflow_raises_context_window_error():
    fake = FakeLlama(error=ValueError("Requested tokens (5000) exceed context window of 2048"))
    with pytest.raises(ContextWindowExceededError):
        make_lm(fake)("x")


def test_deadline_inside_generation_raises_timeout():
    class Slow(FakeLlama):
        def create_chat_completion(self, **kwargs):
            time.sleep(0.05)
            self.eval([0])  # the engine's hook sees the deadline has passed
            raise AssertionError("unreachable")

    with pytest.raises(LMTimeoutError):
        make_lm(Slow(), timeout=0.01)("x")


def test_busy_model_times_out_waiting_for_the_lock():
    fake = FakeLlama(reply="ok")
    lm = make_lm(fake, timeout=0.05)
    model = lm.engine.model()
    with model.lock:
        with pytest.raises(LMTimeoutError):
            lm("x")


def test_concurrent_calls_are_serialised():
    fake = FakeLlama(reply="ok", delay=0.02)
    lm = make_lm(fake)
    threads = [threading.Thread(target=lm, args=(f"q{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(fake.calls) == 4
    assert fake.max_active == 1


def test_tools_are_refused():
    from dspy.lm15 import FunctionTool, Message, Request

    lm = make_lm(FakeLlama())
    tool = FunctionTool(name="f", description="d", parameters={"type": "object", "properties": {}})
    with pytest.raises(LMUnsupportedFeatureError):
        lm(Request(model=lm.model, messages=(Message.user("x"),), tools=(tool,)))


def test_saved_program_state_never_holds_the_model(tmp_path):
    fake = FakeLlama()
    lm = make_lm(fake)
    program = dspy.Predict(Relevance)
    # A globally configured LM is not part of a program's state.
    path = tmp_path / "program.json"
    with dspy.context(lm=lm):
        program.save(str(path))
    assert json.loads(path.read_text())["lm"] is None
    # A predictor-level LM is saved as the engine's settings (class path + dump_state), reloadable.
    program.lm = lm
    program.save(str(path))
    state = json.loads(path.read_text())["lm"]
    assert state["engine"]["class"] == "selfrag.lm.llamacpp_engine:LlamaCppEngine"
    assert state["engine"]["state"]["model_path"] == "/models/fake.gguf"
    loaded = dspy.Predict(Relevance)
    loaded.load(str(path), allow_unsafe_lm_state=True)
    assert isinstance(loaded.lm.engine, LlamaCppEngine)
    assert loaded.lm.engine.model_path == "/models/fake.gguf"
    assert llamacpp_model._MODELS == {}  # nothing was loaded by saving or loading


def test_ram_cache_entries_hold_no_logits_buffer(monkeypatch):
    """save/load_state see a one-row logits view, so cache entries are the KV state only."""
    import numpy as np
    pytest.importorskip("llama_cpp")

    class StatefulFake(FakeLlama):
        _logits_all = False

        def __init__(self):
            super().__init__(reply="ok")
            self.scores = np.zeros((512, 1000), dtype=np.float32)
            self.seen = []
            self.cache = None

        def set_cache(self, cache):
            self.cache = cache

        def save_state(self):
            self.seen.append(("save", self.scores.shape))
            return "state"

        def load_state(self, state):
            self.seen.append(("load", self.scores.shape))

    fake = StatefulFake()
    llamacpp_model.get_model("/models/fake.gguf", 2048, 1, ram_cache_mb=64, factory=lambda *a: fake)
    assert fake.cache is not None and fake.cache.capacity_bytes == 64 << 20
    fake.save_state()
    fake.load_state("state")
    assert fake.seen == [("save", (1, 1000)), ("load", (1, 1000))]
    assert fake.scores.shape == (512, 1000)  # the full buffer is back after each call


def test_forget_prompts_resets_the_kv_prefix_and_empties_the_ram_cache():
    """After ``forget_prompts`` the next call evaluates its whole prompt: llama.cpp's KV prefix is reset and the
    RAM cache's saved states are gone (a cache of the same capacity stays attached)."""
    from llama_cpp import LlamaRAMCache

    class StatefulFake(FakeLlama):
        def __init__(self):
            super().__init__(reply="ok")
            self.resets = 0
            self.cache = None

        def set_cache(self, cache):
            self.cache = cache

        def reset(self):
            self.resets += 1

    fake = StatefulFake()
    engine = LlamaCppEngine("/models/fake.gguf", n_ctx=2048, n_threads=1, llama_factory=lambda *a: fake)
    engine.forget_prompts()  # nothing loaded yet: nothing to forget, and nothing is loaded for it
    assert llamacpp_model._MODELS == {} and fake.resets == 0
    model = engine.model()
    old = LlamaRAMCache(capacity_bytes=64 << 20)
    old.cache_state[(1, 2, 3)] = "state"
    fake.set_cache(old)
    engine.forget_prompts()
    assert fake.resets == 1
    assert isinstance(fake.cache, LlamaRAMCache) and fake.cache is not old
    assert fake.cache.capacity_bytes == 64 << 20 and len(fake.cache.cache_state) == 0
    assert not model.lock.locked()


def test_forget_prompts_without_a_ram_cache_resets_the_prefix_only():
    class Fake(FakeLlama):
        resets = 0

        def reset(self):
            self.resets += 1

    fake = Fake(reply="ok")
    engine = LlamaCppEngine("/models/fake.gguf", n_ctx=2048, n_threads=1, llama_factory=lambda *a: fake)
    engine.model()
    engine.forget_prompts()
    assert fake.resets == 1 and not hasattr(fake, "cache")


def test_declared_output_bounds_reach_the_grammar_schema():
    """``OutputField(max_length=N)`` becomes ``maxItems`` / ``maxLength`` in the constrained-decoding schema
    (JSONAdapter drops it): the local model filled ``list[str]`` outputs until max_tokens (31 s a query)."""
    from llama_cpp.llama_grammar import LlamaGrammar

    from selfrag.lm.compact_adapter import CompactJSONAdapter
    from selfrag.lm.llamacpp_request import to_llama_response_format

    class Paraphrase(dspy.Signature):
        question: str = dspy.InputField()
        paraphrases: list[str] = dspy.OutputField(max_length=3)
        note: str = dspy.OutputField(max_length=40)
        free: list[str] = dspy.OutputField()

    fake = FakeLlama(reply='{"paraphrases": ["a", "b"], "note": "n", "free": []}')
    with dspy.context(lm=make_lm(fake), adapter=CompactJSONAdapter()):
        pred = dspy.Predict(Paraphrase)(question="q")
    assert pred.paraphrases == ["a", "b"]
    schema = fake.calls[0]["response_format"]["schema"]
    assert schema["properties"]["paraphrases"]["maxItems"] == 3
    assert schema["properties"]["note"]["maxLength"] == 40
    assert "maxItems" not in schema["properties"]["free"]
    LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)  # llama.cpp accepts it
    assert to_llama_response_format({"type": "json_schema", "schema": schema})["schema"] == schema


def _bounded_answer_schema(n):
    return {"type": "object", "required": ["answer", "citations"],
            "properties": {"answer": {"type": "string", "maxLength": n},
                           "citations": {"type": "array", "items": {"type": "integer"}, "maxItems": n}}}


def test_a_bound_llama_cpp_cannot_parse_is_lowered_not_crashed_on():
    """llama-cpp-python writes maxLength N as N nested groups; llama.cpp's parser refuses ~1,050 and deeper, and
    the process then crashed at sampling (a 1,176-character answer bound did, on the local model)."""
    from selfrag.lm.llamacpp_request import MAX_GRAMMAR_BOUND, _schema_compiles, within_grammar_bounds

    too_deep = _bounded_answer_schema(MAX_GRAMMAR_BOUND + 176)
    assert not _schema_compiles(json.dumps(too_deep, sort_keys=True))  # llama.cpp's own parser says no
    lowered = within_grammar_bounds(too_deep)
    assert lowered["properties"]["answer"]["maxLength"] == MAX_GRAMMAR_BOUND
    assert lowered["properties"]["citations"]["maxItems"] == MAX_GRAMMAR_BOUND
    assert too_deep["properties"]["answer"]["maxLength"] == MAX_GRAMMAR_BOUND + 176  # the caller's schema is kept
    assert _schema_compiles(json.dumps(lowered, sort_keys=True))
    sent = to_llama_response_format({"type": "json_schema", "schema": too_deep})
    assert sent == {"type": "json_object", "schema": lowered}
    small = _bounded_answer_schema(400)
    assert within_grammar_bounds(small) == small


def test_a_schema_whose_grammar_the_parser_refuses_decodes_any_json(monkeypatch):
    import llama_cpp

    from selfrag.lm import llamacpp_request

    llamacpp_request._schema_compiles.cache_clear()
    monkeypatch.setattr(llama_cpp, "llama_sampler_init_grammar", lambda vocab, grammar, root: None)
    schema = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}
    try:
        assert to_llama_response_format({"type": "json_schema", "schema": schema}) == {"type": "json_object"}
    finally:
        llamacpp_request._schema_compiles.cache_clear()


def test_the_llama_cpp_engine_gets_the_answer_bound_in_its_grammar_schema():
    """The in-process engine enforces string bounds: a program's draft reaches it with the answer's maxLength
    (what fits in its max_tokens; programs/answer_length.py)."""
    from programs.answer_length import answer_max_chars
    from programs.baselines import VanillaRAG
    from selfrag.lm.compact_adapter import CompactJSONAdapter
    from tests.fakes import ListRetriever, passage

    fake = FakeLlama(reply='{"answer": "120 km", "citations": [1], "answerable": true}')
    program = VanillaRAG(ListRetriever([passage("p1", "The Heron has a range of 120 km.")]),
                         generator_lm=make_lm(fake, max_tokens=200), adapter=CompactJSONAdapter())
    assert program(question="What is the range of the Heron?").answer == "120 km"
    schema = fake.calls[0]["response_format"]["schema"]
    assert schema["properties"]["answer"]["maxLength"] == answer_max_chars(200, "en")
