"""TavilySearch against recorded Tavily responses replayed at the HTTP (requests) layer."""

from __future__ import annotations

import json

import pytest
import requests
import responses

from programs.types import WebSearch, WebSearchError
from selfrag.web.tavily import TavilySearch, url_id

from .conftest import recording

URL = "https://api.tavily.com/search"
KEY = "tvly-test-0000"


class Sleeps(list):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
def http():
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        yield rsps


def make(sleeps, **kw) -> TavilySearch:
    kw.setdefault("retries", 2)
    return TavilySearch(KEY, max_results=3, timeout=5.0, backoff=0.5, sleep=sleeps, **kw)


def test_success_parses_results_into_web_passages(http, sleeps):
    http.post(URL, json=recording("search_success.json"), status=200)
    web = make(sleeps)
    assert isinstance(web, WebSearch)

    passages = web.search("Who won Super Bowl 50?")

    assert [p.source for p in passages] == [
        "https://en.wikipedia.org/wiki/Super_Bowl_50",
        "https://www.nfl.com/news/broncos-win-super-bowl-50",
    ]  # the result with empty content is dropped
    first = passages[0]
    assert first.id == url_id("https://en.wikipedia.org/wiki/Super_Bowl_50")
    assert first.id.startswith("web:") and len(first.id) == 4 + 16
    assert "Denver Broncos" in first.text
    assert first.score == pytest.approx(0.93)
    assert first.metadata["title"] == "Super Bowl 50 - Wikipedia"
    assert first.metadata["origin"] == "web"
    assert first.metadata["source"] == first.metadata["url"]
    assert web.attempts == 1 and sleeps == []

    sent = http.calls[0].request
    assert sent.headers["Authorization"] == f"Bearer {KEY}"
    body = json.loads(sent.body)
    assert body["query"] == "Who won Super Bowl 50?" and body["max_results"] == 3


def test_max_results_truncates_and_is_sent(http, sleeps):
    http.post(URL, json=recording("search_success.json"), status=200)
    passages = make(sleeps).search("Super Bowl 50", max_results=1)
    assert len(passages) == 1
    assert json.loads(http.calls[0].request.body)["max_results"] == 1


def test_401_is_auth_and_not_retried(http, sleeps):
    http.post(URL, json=recording("error_401.json"), status=401)
    with pytest.raises(WebSearchError) as err:
        make(sleeps).search("anything")
    assert err.value.kind == "auth"
    assert "invalid API key" in str(err.value)
    assert len(http.calls) == 1 and sleeps == []


def test_429_then_success_retries_with_backoff(http, sleeps):
    http.post(URL, json=recording("error_429.json"), status=429)
    http.post(URL, json=recording("error_429.json"), status=429)
    http.post(URL, json=recording("search_success.json"), status=200)
    web = make(sleeps)

    passages = web.search("Who won Super Bowl 50?")

    assert len(passages) == 2
    assert len(http.calls) == 3 and web.attempts == 3
    assert sleeps == [0.5, 1.0]  # exponential backoff, injected sleep


def test_429_after_all_retries_is_rate_limited(http, sleeps):
    http.post(URL, json=recording("error_429.json"), status=429)
    with pytest.raises(WebSearchError) as err:
        make(sleeps, retries=1).search("anything")
    assert err.value.kind == "rate_limited"
    assert "gave up after 2 attempts" in str(err.value)
    assert len(http.calls) == 2 and sleeps == [0.5]


def test_5xx_exhausts_retries_is_server_error(http, sleeps):
    http.post(URL, json=recording("error_500.json"), status=500)
    http.post(URL, json=recording("error_500.json"), status=502)
    http.post(URL, json=recording("error_500.json"), status=503)
    web = make(sleeps, retries=2)
    with pytest.raises(WebSearchError) as err:
        web.search("anything")
    assert err.value.kind == "server_error"
    assert "503" in str(err.value)
    assert len(http.calls) == 3 and sleeps == [0.5, 1.0]


def test_backoff_is_capped(http, sleeps):
    http.post(URL, json=recording("error_500.json"), status=500)
    with pytest.raises(WebSearchError):
        TavilySearch(KEY, retries=4, backoff=1.0, max_backoff=3.0, sleep=sleeps).search("anything")
    assert sleeps == [1.0, 2.0, 3.0, 3.0]


def test_timeout_is_timeout_and_not_retried_by_default(http, sleeps):
    http.post(URL, body=requests.exceptions.ReadTimeout("read timed out"))
    with pytest.raises(WebSearchError) as err:
        make(sleeps).search("anything")
    assert err.value.kind == "timeout"
    assert "5.0s" in str(err.value)
    assert len(http.calls) == 1 and sleeps == []


def test_timeout_retried_when_asked(http, sleeps):
    http.post(URL, body=requests.exceptions.ReadTimeout("read timed out"))
    http.post(URL, json=recording("search_success.json"), status=200)
    passages = make(sleeps, retry_on_timeout=True).search("Super Bowl 50")
    assert len(passages) == 2 and sleeps == [0.5]


def test_connection_error_is_retried_then_reported(http, sleeps):
    http.post(URL, body=requests.exceptions.ConnectionError("name resolution failed"))
    with pytest.raises(WebSearchError) as err:
        make(sleeps, retries=1).search("anything")
    assert err.value.kind == "connection"
    assert len(http.calls) == 2


def test_empty_results_is_empty(http, sleeps):
    http.post(URL, json=recording("search_empty.json"), status=200)
    with pytest.raises(WebSearchError) as err:
        make(sleeps).search("zzqx flibbertigibbet quantum marmalade 1887")
    assert err.value.kind == "empty"
    assert "flibbertigibbet" in str(err.value)


def test_non_json_200_is_bad_response(http, sleeps):
    http.post(URL, body="<html>gateway</html>", status=200, content_type="text/html")
    with pytest.raises(WebSearchError) as err:
        make(sleeps).search("anything")
    assert err.value.kind == "bad_response"


@pytest.mark.parametrize("body", ["[]", "null", '"text"'])
def test_json_200_that_is_not_an_object_is_bad_response(http, sleeps, body):
    http.post(URL, body=body, status=200, content_type="application/json")
    with pytest.raises(WebSearchError) as err:
        make(sleeps).search("anything")
    assert err.value.kind == "bad_response"


def test_404_is_http_error(http, sleeps):
    http.post(URL, json={"detail": "Not Found"}, status=404)
    with pytest.raises(WebSearchError) as err:
        make(sleeps).search("anything")
    assert err.value.kind == "http_error" and "404" in str(err.value)
    assert len(http.calls) == 1


def test_forbidden_plan_limit(http, sleeps):
    http.post(URL, json={"detail": {"error": "This request exceeds your plan's set usage limit."}}, status=432)
    with pytest.raises(WebSearchError) as err:
        make(sleeps).search("anything")
    assert err.value.kind == "forbidden" and len(http.calls) == 1


@pytest.mark.parametrize("key", [None, ""])
def test_no_key_fails_without_network(http, sleeps, key):
    web = TavilySearch(key, sleep=sleeps)
    with pytest.raises(WebSearchError) as err:
        web.search("anything")
    assert err.value.kind == "no_key"
    assert "TAVILY_API_KEY" in str(err.value)
    assert len(http.calls) == 0
    assert "missing" in repr(web)


def test_repr_hides_the_key():
    assert KEY not in repr(TavilySearch(KEY))


@pytest.mark.parametrize(
    "kwargs, message",
    [({"max_results": 0}, "max_results"), ({"timeout": 0}, "timeout"), ({"retries": -1}, "retries")],
)
def test_bad_constructor_values_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        TavilySearch(KEY, **kwargs)


@pytest.mark.integration
def test_the_real_tavily_api(monkeypatch):
    """Opt-in (``-m integration``, a ``TAVILY_API_KEY`` and the network): the request shape and the parsing
    of the recorded responses above hold against the real service."""
    import os

    key = os.environ.get("TAVILY_API_KEY")
    if not key:
        pytest.skip("TAVILY_API_KEY is not set")
    passages = TavilySearch(key, max_results=3, timeout=20.0).search("Who won Super Bowl 50?", max_results=3)
    assert 1 <= len(passages) <= 3
    assert all(p.metadata["url"].startswith("http") and p.text.strip() for p in passages)
    assert key not in repr(passages)
