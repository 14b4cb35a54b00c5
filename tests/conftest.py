import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

import dspy  # noqa: E402
import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _reset_dspy_settings():
    """Each test starts with no LM, no adapter and no callbacks configured."""
    with dspy.context(lm=None, adapter=None, callbacks=[], track_usage=False):
        yield
