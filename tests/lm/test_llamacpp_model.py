"""Chunk-aligned prefix reuse in the llama.cpp model's eval hook, against a fake ``Llama`` that mimics
``Llama.generate``'s prefix match and ``Llama.eval``'s batching (the real models: test_real_models.py)."""

import pytest

from selfrag.lm.llamacpp_model import LoadedModel, aligned_prefix


@pytest.mark.parametrize("cached,prompt_end,step,expected", [
    (0, 0, 8, 0),
    (7, 100, 8, 0),      # less than one batch cached: evaluate from the start
    (8, 100, 8, 8),
    (21, 100, 8, 16),    # the unfinished batch [16, 24) is evaluated again
    (30, 21, 8, 16),     # cells past the earlier prompt hold generated tokens: never reused
    (21, 0, 8, 0),       # nothing known of the earlier prompt (a state saved before the hook)
])
def test_aligned_prefix(cached, prompt_end, step, expected):
    assert aligned_prefix(cached, prompt_end, step) == expected


class BatchingLlama:
    """Keeps ``input_ids``/``n_tokens`` like ``Llama`` and records every batch ``eval`` decodes as
    (first position, tokens)."""

    def __init__(self, n_batch=4):
        self.n_batch = n_batch
        self.input_ids = [0] * 256
        self.n_tokens = 0
        self._requires_eval = True
        self.batches: list[tuple[int, list[int]]] = []
        self.states = []

    def eval(self, tokens):
        for i in range(0, len(tokens), self.n_batch):
            batch = list(tokens[i:i + self.n_batch])
            self.batches.append((self.n_tokens, batch))
            self.input_ids[self.n_tokens:self.n_tokens + len(batch)] = batch
            self.n_tokens += len(batch)
            self._requires_eval = False

    def generate(self, prompt, new_tokens):
        """What ``Llama.generate`` does: keep the longest cached prefix (never the whole prompt), evaluate
        the rest as one call, then one eval per generated token."""
        prefix = 0
        for a, b in zip(self.input_ids[:self.n_tokens], prompt[:-1]):
            if a != b:
                break
            prefix += 1
        self.n_tokens, self._requires_eval = prefix, True
        self.eval(prompt[prefix:])
        for t in new_tokens:
            self.eval([t])

    def save_state(self):
        return type("State", (), {"ids": list(self.input_ids[:self.n_tokens]), "n": self.n_tokens})()

    def load_state(self, state):
        self.input_ids[:state.n] = state.ids
        self.n_tokens, self._requires_eval = state.n, True


def call(model, prompt, new_tokens=(90, 91)):
    model.evals.clear()  # as the engine does before each call
    start = len(model.llama.batches)
    model.llama.generate(list(prompt), list(new_tokens))
    return model.llama.batches[start:]


def test_a_warm_prompt_runs_the_batches_a_cold_one_runs():
    shared = list(range(1, 11))                  # 10 shared tokens: batches [0,4) [4,8) then 2 of [8,12)
    first, second = shared + [50, 51, 52], shared + [60, 61, 62, 63, 64]
    model = LoadedModel(llama=BatchingLlama(n_batch=4), path="fake", load_seconds=0.0)
    model.instrument()
    call(model, first)
    assert model.prompt_end == len(first)
    warm = call(model, second)
    cold_model = LoadedModel(llama=BatchingLlama(n_batch=4), path="fake", load_seconds=0.0)
    cold_model.instrument()
    cold = call(cold_model, second)
    # the warm call reuses [0, 8) and evaluates from 8: its batches are the cold call's from there on
    assert warm == [b for b in cold if b[0] >= 8]
    assert warm[0] == (8, [9, 10, 60, 61])
    assert model.evals[0][0] == len(second) - 8  # the tokens really evaluated (reported as not cached)


def test_generated_tokens_are_never_part_of_the_reused_prefix():
    model = LoadedModel(llama=BatchingLlama(n_batch=4), path="fake", load_seconds=0.0)
    model.instrument()
    call(model, [1, 2, 3, 4, 5, 6], new_tokens=[7, 8, 9])  # prompt ends at 6; 7, 8, 9 decoded one by one
    warm = call(model, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11])
    assert warm[0] == (4, [5, 6, 7, 8])  # the batch [4, 8) is evaluated as a cold call would


def test_a_state_from_the_ram_cache_keeps_where_its_prompt_ended():
    model = LoadedModel(llama=BatchingLlama(n_batch=4), path="fake", load_seconds=0.0)
    model.instrument()
    call(model, list(range(1, 11)), new_tokens=[70, 71, 72])
    state = model.llama.save_state()
    assert state.selfrag_prompt_end == 10
    call(model, [99, 98, 97, 96, 95])  # another prompt moves the KV cache away
    assert model.prompt_end == 5
    model.llama.load_state(state)
    assert model.prompt_end == 10
    warm = call(model, list(range(1, 11)) + [70, 71, 72, 73, 74])
    assert warm[0] == (8, [9, 10, 70, 71])


def test_forget_prompts_forgets_where_the_prompt_ended():
    llama = BatchingLlama(n_batch=4)
    llama.reset = lambda: setattr(llama, "n_tokens", 0)
    model = LoadedModel(llama=llama, path="fake", load_seconds=0.0)
    model.instrument()
    call(model, list(range(1, 11)))
    model.forget_prompts()
    assert model.prompt_end == 0 and call(model, list(range(1, 11)))[0] == (0, [1, 2, 3, 4])
