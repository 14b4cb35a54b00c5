import pytest


@pytest.fixture(autouse=True)
def _fresh_model_registry(monkeypatch):
    """Each test sees an empty process-wide model registry (fake models never leak between tests)."""
    from selfrag.lm import llamacpp_model

    monkeypatch.setattr(llamacpp_model, "_MODELS", {})
