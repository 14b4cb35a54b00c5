import pytest

from selfrag.paths import offline_environment


def pytest_configure(config):
    """The offline-safe environment, set before any test module imports dspy, litellm or chromadb."""
    offline_environment()


@pytest.fixture(autouse=True)
def _reset_dspy_settings():
    """Each test starts with no LM, no adapter and no callbacks configured."""
    import dspy

    with dspy.context(lm=None, adapter=None, callbacks=[], track_usage=False):
        yield
