"""build_lm / build_adapter per profile: right backend, right model, nothing loaded, no network."""

from pathlib import Path

import dspy
import pytest

from selfrag.lm import factory, llamacpp_model, model_files
from selfrag.lm.factory import build_adapter, build_lm
from selfrag.lm.llamacpp_engine import LlamaCppEngine
from selfrag.settings import LMSettings


@pytest.fixture
def fake_models(tmp_path, monkeypatch):
    local = tmp_path / "qwen.gguf"
    tiny = tmp_path / "smol.gguf"
    local.write_bytes(b"GGUF")
    tiny.write_bytes(b"GGUF")
    monkeypatch.setattr(model_files, "local_model_path", lambda cache_dir: local)
    monkeypatch.setattr(model_files, "tiny_model_path", lambda: tiny)
    return local, tiny


def test_litellm_profile_builds_a_plain_lm(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    settings = LMSettings(
        profile="litellm",
        model="openai/gpt-4o-mini",
        api_base="http://localhost:8080/v1",
        temperature=0.2,
        max_tokens=200,
        timeout=30,
    )
    lm = build_lm(settings)
    assert isinstance(lm, dspy.LM)
    assert lm.model == "openai/gpt-4o-mini"
    assert lm.engine == "auto"
    assert lm.kwargs["api_base"] == "http://localhost:8080/v1"
    assert lm.kwargs["temperature"] == 0.2 and lm.kwargs["max_tokens"] == 200 and lm.kwargs["timeout"] == 30
    assert "api_key" not in lm.kwargs  # keys stay in the environment, read by the provider client
    assert lm.cache is False


def test_litellm_profile_requires_a_model():
    with pytest.raises(ValueError, match="needs lm.model"):
        LMSettings(profile="litellm")


@pytest.mark.parametrize("profile", ["local", "tiny"])
def test_gguf_profiles_build_engine_lms_without_loading(fake_models, profile):
    local, tiny = fake_models
    settings = LMSettings(profile=profile, threads=3, n_ctx=2048, timeout=9, max_tokens=100)
    lm = build_lm(settings)
    engine = lm.engine
    assert isinstance(engine, LlamaCppEngine)
    assert Path(engine.model_path) == (local if profile == "local" else tiny)
    assert (engine.n_threads, engine.n_ctx, engine.timeout, engine.max_tokens) == (3, 2048, 9.0, 100)
    assert lm.model == "llamacpp/" + Path(engine.model_path).stem
    assert lm.num_retries == 0
    assert llamacpp_model._MODELS == {}  # construction loads nothing


def test_model_path_overrides_the_profile_gguf(fake_models, tmp_path):
    mine = tmp_path / "other-model.Q8_0.gguf"
    mine.write_bytes(b"GGUF")
    lm = build_lm(LMSettings(profile="local", model=str(mine)))
    assert lm.engine.model_path == str(mine)


def test_critic_role(fake_models, tmp_path):
    local, _ = fake_models
    assert build_lm(LMSettings(profile="local"), role="critic").engine.model_path == str(local)
    critic = build_lm(LMSettings(profile="local", critic_model="openai/gpt-4o-mini"), role="critic")
    assert critic.model == "openai/gpt-4o-mini" and critic.engine == "auto"
    judge = tmp_path / "judge.gguf"
    judge.write_bytes(b"GGUF")
    critic = build_lm(
        LMSettings(profile="litellm", model="openai/gpt-4o", critic_model=str(judge)), role="critic"
    )
    assert critic.engine.model_path == str(judge)
    assert (
        build_lm(LMSettings(profile="litellm", model="openai/gpt-4o", critic_model=str(judge))).model
        == "openai/gpt-4o"
    )
    with pytest.raises(ValueError, match="role"):
        build_lm(LMSettings(profile="local"), role="judge")


@pytest.mark.parametrize("profile", ["local", "tiny", "litellm"])
def test_adapter_is_json(profile):
    settings = LMSettings(profile=profile, model="openai/x" if profile == "litellm" else None)
    assert isinstance(build_adapter(settings), dspy.JSONAdapter)


def test_factory_module_does_not_configure_dspy():
    assert factory  # importing the factory must not set a global LM
    assert dspy.settings.lm is None


def test_engine_lm_supports_async_calls(monkeypatch, tmp_path):
    import asyncio

    from tests.lm.test_engine import FakeLlama

    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    fake = FakeLlama(reply="pong")
    monkeypatch.setattr(llamacpp_model, "_default_llama_factory", lambda *a: fake)
    lm = build_lm(LMSettings(profile="tiny", model=str(gguf), ram_cache_mb=0), logprobs=False)
    assert asyncio.run(lm.acall("ping")) == ["pong"]
    # With logprobs asked for (the default), a raw LM call returns dicts with the text and logprobs.
    lm = build_lm(LMSettings(profile="tiny", model=str(gguf), ram_cache_mb=0))
    (out,) = asyncio.run(lm.acall("ping"))
    assert out["text"] == "pong" and "logprobs" in out
    state = lm.dump_state()
    assert state["async_engine"]["class"] == "selfrag.lm.llamacpp_engine:AsyncLlamaCppEngine"


def test_engine_lms_ask_for_logprobs_unless_told_not_to(fake_models):
    lm = build_lm(LMSettings(profile="tiny"))
    assert lm.kwargs["logprobs"] is True and lm.kwargs["top_logprobs"] == factory.DEFAULT_TOP_LOGPROBS == 5
    assert build_lm(LMSettings(profile="local"), top_logprobs=10).kwargs["top_logprobs"] == 10
    off = build_lm(LMSettings(profile="tiny"), logprobs=False)
    assert "logprobs" not in off.kwargs and "top_logprobs" not in off.kwargs
    with pytest.raises(ValueError, match="top_logprobs must be between 0 and 20"):
        build_lm(LMSettings(profile="tiny"), top_logprobs=21)


def test_litellm_models_get_logprobs_only_where_litellm_lists_them():
    openai = build_lm(LMSettings(profile="litellm", model="openai/gpt-4o-mini"))
    assert openai.kwargs["logprobs"] is True and openai.kwargs["top_logprobs"] == 5
    claude = build_lm(LMSettings(profile="litellm", model="anthropic/claude-3-5-sonnet-20240620"))
    assert "logprobs" not in claude.kwargs  # Anthropic refuses the parameter
    critic = build_lm(
        LMSettings(profile="litellm", model="openai/gpt-4o", critic_model="hosted_vllm/judge"), role="critic"
    )
    assert critic.kwargs["logprobs"] is True


def test_forget_prompts_reaches_in_process_engines_and_skips_litellm_models():
    class Engine:
        forgot = 0

        def complete(self, request):
            raise AssertionError("not called")

        def forget_prompts(self):
            self.forgot += 1

    class AsyncEngine:
        async def complete(self, request):
            raise AssertionError("not called")

    engine = Engine()
    local = dspy.LM("llamacpp/fake", engine=engine, async_engine=AsyncEngine(), cache=False)
    remote = dspy.LM("openai/gpt-4o-mini", cache=False)
    factory.forget_prompts(local, remote, None)
    assert engine.forgot == 1
