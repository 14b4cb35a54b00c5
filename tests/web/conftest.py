from __future__ import annotations

import json
from pathlib import Path

import pytest

RECORDINGS = Path(__file__).parent / "recordings"


def recording(name: str) -> dict:
    return json.loads((RECORDINGS / name).read_text(encoding="utf-8"))


@pytest.fixture(autouse=True)
def _no_tavily_env(monkeypatch):
    """No test may depend on (or leak) a real key or proxy from the environment."""
    for var in ("TAVILY_API_KEY", "TAVILY_HTTP_PROXY", "TAVILY_HTTPS_PROXY", "TAVILY_PROJECT", "TAVILY_ORG_ID"):
        monkeypatch.delenv(var, raising=False)
