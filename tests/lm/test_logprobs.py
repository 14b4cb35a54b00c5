"""Token log-probabilities from the llama.cpp engine, against a fake ``Llama`` that samples like the real one.

The fake goes through the same path as llama-cpp-python's ``generate``: it calls ``self.sample(idx=...)``
(wrapped by the engine's hook, which reads the logits row through ``_ctx.get_logits_ith``), then
``self.eval([token])``. Each scripted step gives the raw logits and the token the (grammar-constrained)
sampler picks, which need not be the raw argmax.
"""

import ctypes
import math
import threading
from typing import Literal

import dspy
import numpy as np
import pytest
from dspy.lm15 import Config, Message, Request

from programs.soft_labels import soft_label
from selfrag.lm.llamacpp_engine import LlamaCppEngine

VOCAB = ["<eos>", '{"', "relevance", '":', ' "', "rel", "ir", "relevant", '"}', "Paris", "The", " STOP"]
EOS = 0
ID = {t: i for i, t in enumerate(VOCAB)}


def row(**probs: float) -> np.ndarray:
    """Logits whose softmax gives the named tokens these probabilities (the rest share what is left)."""
    rest = (1.0 - sum(probs.values())) / (len(VOCAB) - len(probs))
    p = np.full(len(VOCAB), rest)
    for token, q in probs.items():
        p[ID[token]] = q
    return np.log(p).astype(np.float32) + 3.0  # logits are unnormalised


# The relevance judgement: the grammar forces the JSON frame; at the value the model prefers "Paris".
RELEVANT = [
    ('{"', row(The=0.6, **{'{"': 0.3})),
    ("relevance", row(relevance=0.95)),
    ('":', row(**{'":': 0.9})),
    (' "', row(**{' "': 0.8})),
    ("ir", row(Paris=0.5, ir=0.3, rel=0.1, relevant=0.05)),
    ("relevant", row(relevant=0.9)),
    ('"}', row(**{'"}': 0.9})),
    ("<eos>", row(**{"<eos>": 0.99})),
]


class _Ctx:
    def __init__(self, llama):
        self.llama = llama

    def get_logits_ith(self, i):
        assert i == -1  # the engine's hook reads the row the sampler reads
        return ctypes.cast(self.llama.buffer, ctypes.POINTER(ctypes.c_float))


class SamplingLlama:
    """A fake ``Llama`` with llama-cpp-python's sampling surface; ``scripts`` maps a question to steps."""

    def __init__(self, scripts, prompt_tokens=40, evaluated=None):
        self.scripts = scripts
        self.prompt_tokens = prompt_tokens
        self.evaluated = evaluated
        self.n_tokens = 0
        self.buffer = (ctypes.c_float * len(VOCAB))()
        self._ctx = _Ctx(self)
        self.calls = []
        self._step = None
        self.lock = threading.Lock()

    def n_vocab(self):
        return len(VOCAB)

    def detokenize(self, tokens, prev_tokens=None, special=False):
        return b"".join(b"" if t == EOS and not special else VOCAB[t].encode() for t in tokens)

    def eval(self, tokens):
        self.n_tokens += max(1, len(tokens))

    def sample(self, **kwargs):  # the grammar-constrained sampler: the scripted token
        return ID[self._step]

    def create_chat_completion(self, messages, stream=False, **kwargs):
        assert self.lock.acquire(blocking=False), "calls must be serialised by the engine"
        try:
            self.calls.append(kwargs)
            script = next(steps for key, steps in self.scripts.items() if key in messages[-1]["content"])
            self.eval([0] * (self.evaluated or self.prompt_tokens))
            tokens = []
            for chosen, logits in script:
                ctypes.memmove(self.buffer, logits.ctypes.data, logits.nbytes)
                self._step = chosen
                token = self.sample(idx=self.n_tokens - 1)
                if token == EOS:
                    break
                tokens.append(token)
                self.eval([token])
            text = self.detokenize(tokens).decode()
            for stop in kwargs.get("stop") or ():
                text = text.split(stop)[0]
            return {
                "id": "chatcmpl-fake",
                "choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": self.prompt_tokens, "completion_tokens": len(tokens)},
            }
        finally:
            self.lock.release()


def engine_for(fake) -> LlamaCppEngine:
    return LlamaCppEngine("/models/fake.gguf", n_ctx=512, n_threads=1, llama_factory=lambda *a: fake)


def request(top: int | None, **config) -> Request:
    return Request(
        model="llamacpp/fake",
        messages=(Message.user("question: capital of France?"),),
        config=Config(logprobs=top, **config),
    )


def log_softmax(logits: np.ndarray) -> np.ndarray:
    x = logits.astype(np.float64)
    return x - (x.max() + math.log(np.exp(x - x.max()).sum()))


def test_engine_reports_raw_token_logprobs_with_top_k():
    fake = SamplingLlama({"capital": RELEVANT})
    response = engine_for(fake).complete(request(3))
    assert response.text == '{"relevance": "irrelevant"}'
    tokens = response.logprobs
    assert [t.token for t in tokens] == ['{"', "relevance", '":', ' "', "ir", "relevant", '"}']  # no <eos>
    value = tokens[4]
    expected = log_softmax(RELEVANT[4][1])
    assert value.logprob == pytest.approx(expected[ID["ir"]], abs=1e-5)
    # Raw, pre-grammar: the top alternative is a token the grammar forbids.
    assert [t.token for t in value.top] == ["Paris", "ir", "rel"]
    raw = [expected[ID[t]] for t in ("Paris", "ir", "rel")]
    assert [t.logprob for t in value.top] == pytest.approx(raw, abs=1e-5)
    assert value.top[0].token_id == ID["Paris"] and value.token_id == ID["ir"]
    # A token the grammar forced shows its raw (low) probability.
    assert tokens[0].logprob == pytest.approx(math.log(0.3), abs=1e-5)
    assert tokens[0].top[0].token == "The" and tokens[0].top[0].logprob > tokens[0].logprob
    # Captured by the engine, not asked of llama-cpp-python (which would need logits_all=True).
    assert "logprobs" not in fake.calls[0] and "top_logprobs" not in fake.calls[0]


def test_top_zero_gives_chosen_tokens_only_and_none_gives_nothing():
    fake = SamplingLlama({"capital": RELEVANT})
    engine = engine_for(fake)
    chosen_only = engine.complete(request(0)).logprobs
    assert len(chosen_only) == 7 and all(t.top == () for t in chosen_only)
    assert engine.complete(request(None)).logprobs is None


def test_stop_sequence_trims_the_token_list_to_the_text():
    steps = [(t, row(**{t: 0.9})) for t in ("The", " STOP", "Paris")] + [("<eos>", row(**{"<eos>": 0.9}))]
    fake = SamplingLlama({"capital": steps})
    response = engine_for(fake).complete(request(1, stop=(" STOP",)))
    assert response.text == "The"
    assert [t.token for t in response.logprobs] == ["The"]


class Relevance(dspy.Signature):
    """Is the passage relevant?"""

    question: str = dspy.InputField()
    relevance: Literal["relevant", "irrelevant"] = dspy.OutputField()


def lm_for(fake, **kwargs) -> dspy.LM:
    return dspy.LM("llamacpp/fake", engine=engine_for(fake), cache=False, num_retries=0, **kwargs)


def test_prediction_carries_logprobs_and_soft_label_reads_them():
    fake = SamplingLlama({"capital": RELEVANT})
    lm = lm_for(fake, logprobs=True, top_logprobs=4)
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        pred = dspy.Predict(Relevance)(question="capital of France?")
    assert pred.relevance == "irrelevant"
    content = pred.logprobs["content"]
    assert "".join(t["token"] for t in content) == '{"relevance": "irrelevant"}'
    top = content[4]["top_logprobs"][0]
    assert top["token"] == "Paris" and top["bytes"] == list(b"Paris")
    assert top["logprob"] == pytest.approx(math.log(0.5), abs=1e-5)
    soft = soft_label("relevance", ("relevant", "irrelevant"), pred.logprobs)
    # At "ir": "ir" -> irrelevant, "rel" and "relevant" -> relevant, "Paris" is illegal and dropped.
    assert soft.probs["irrelevant"] == pytest.approx(0.3 / 0.45, abs=1e-5)
    assert soft.probs["relevant"] == pytest.approx(0.15 / 0.45, abs=1e-5)
    assert soft.soft and soft.label == "irrelevant"


def test_without_logprobs_the_prediction_has_none_and_falls_back():
    fake = SamplingLlama({"capital": RELEVANT})
    with dspy.context(lm=lm_for(fake), adapter=dspy.JSONAdapter()):
        pred = dspy.Predict(Relevance)(question="capital of France?")
    assert "logprobs" not in pred
    soft = soft_label("relevance", ("relevant", "irrelevant"), pred.get("logprobs"), decoded=pred.relevance)
    assert not soft.soft and soft.probs == {"relevant": 0.0, "irrelevant": 1.0}


def test_parallel_predictions_each_carry_their_own_logprobs():
    relevant = [(t, row(**{t: 0.7, "ir": 0.1})) for t in ('{"', "relevance", '":', ' "', "relevant", '"}')]
    fake = SamplingLlama({"capital": RELEVANT, "bananas": relevant})
    lm = lm_for(fake, logprobs=True, top_logprobs=3)
    predict = dspy.Predict(Relevance)
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        results = dspy.Parallel(num_threads=4)(
            [(predict, {"question": q}) for q in ["capital of France?", "bananas?"] * 4]
        )
    for pred, question in zip(results, ["capital", "bananas"] * 4):
        soft = soft_label("relevance", ("relevant", "irrelevant"), pred.logprobs)
        assert soft.decoded == pred.relevance == ("irrelevant" if question == "capital" else "relevant")
        assert "".join(t["token"] for t in pred.logprobs["content"]) == f'{{"relevance": "{pred.relevance}"}}'


def test_cached_prompt_tokens_reach_the_prediction_usage():
    fake = SamplingLlama({"capital": RELEVANT}, prompt_tokens=40, evaluated=15)
    lm = lm_for(fake, logprobs=True, top_logprobs=2)
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter(), track_usage=True):
        pred = dspy.Predict(Relevance)(question="capital of France?")
    (usage,) = pred.get_lm_usage().values()
    assert usage["prompt_tokens"] == 40
    assert usage["completion_tokens"] == 7
    assert usage["prompt_tokens_details"]["cached_tokens"] == 25


def test_unreadable_logits_mean_no_logprobs_not_a_failed_call():
    fake = SamplingLlama({"capital": RELEVANT})
    fake._ctx.get_logits_ith = lambda i: None  # a null pointer
    response = engine_for(fake).complete(request(3))
    assert response.text == '{"relevance": "irrelevant"}'
    assert response.logprobs is None
