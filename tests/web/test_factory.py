"""build_web_search per backend; the factory is the one place reading TAVILY_API_KEY."""

from __future__ import annotations

import pytest
import responses

from selfrag.settings import WebSettings
from programs.types import Passage, WebSearch, WebSearchError
from selfrag.web.factory import build_web_search
from selfrag.web.offline import OfflineWebSearch
from selfrag.web.tavily import TavilySearch

from .conftest import recording


class FakeRetriever:
    def retrieve(self, query: str, k: int = 5, filters=None) -> list[Passage]:
        return [Passage(id="d1", text="offline text", metadata={"title": "Doc"})][:k]


def test_none_backend_is_none():
    assert build_web_search(WebSettings()) is None
    assert build_web_search(WebSettings(backend="none"), offline_retriever=FakeRetriever()) is None


def test_tavily_uses_settings_and_explicit_key(monkeypatch):
    monkeypatch.setenv("TAVILY_API_KEY", "tvly-from-env")
    web = build_web_search(
        WebSettings(backend="tavily", max_results=5, timeout=2.5, retries=4, backoff=0.1), api_key="tvly-explicit"
    )
    assert isinstance(web, TavilySearch) and isinstance(web, WebSearch)
    assert web.api_key == "tvly-explicit"
    assert (web.max_results, web.timeout, web.retries, web.backoff) == (5, 2.5, 4, 0.1)


def test_tavily_reads_env_at_call_time(monkeypatch):
    monkeypatch.setenv("TAVILY_API_KEY", "tvly-from-env")
    web = build_web_search(WebSettings(backend="tavily"))
    assert web.api_key == "tvly-from-env"


def test_tavily_without_key_builds_but_fails_no_key(caplog):
    with caplog.at_level("WARNING"):
        web = build_web_search(WebSettings(backend="tavily"))
    assert isinstance(web, TavilySearch)
    assert "TAVILY_API_KEY" in caplog.text
    with pytest.raises(WebSearchError) as err:
        web.search("q")
    assert err.value.kind == "no_key"


def test_tavily_from_factory_end_to_end_with_injected_sleep():
    sleeps: list[float] = []
    web = build_web_search(WebSettings(backend="tavily", retries=1), api_key="tvly-x", sleep=sleeps.append)
    with responses.RequestsMock() as http:
        http.post("https://api.tavily.com/search", json=recording("error_429.json"), status=429)
        http.post("https://api.tavily.com/search", json=recording("search_success.json"), status=200)
        out = web.search("Who won Super Bowl 50?")
    assert len(out) == 2 and sleeps == [0.5]


def test_offline_backend_wraps_the_retriever():
    web = build_web_search(WebSettings(backend="offline", offline_collection="demo", max_results=1), FakeRetriever())
    assert isinstance(web, OfflineWebSearch)
    (p,) = web.search("q")
    assert p.source == "offline://demo/doc" and p.metadata["origin"] == "web"


def test_offline_without_retriever_is_a_clear_error():
    with pytest.raises(ValueError, match="offline_retriever") as err:
        build_web_search(WebSettings(backend="offline", offline_collection="webby"))
    assert "'webby'" in str(err.value)
