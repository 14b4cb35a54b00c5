"""Tavily web search through ``tavily-python`` (which speaks HTTP with ``requests``).

Every failure becomes a :class:`~programs.types.WebSearchError` whose ``kind`` tells the caller
what went wrong:

- ``no_key``: no API key was given (nothing is sent);
- ``auth``: 401, the key was refused;
- ``forbidden``: 403/432/433, the key is valid but not allowed (plan or usage limit);
- ``bad_request``: 400, Tavily rejected the request;
- ``rate_limited``: 429, still after every retry;
- ``server_error``: 5xx, still after every retry;
- ``connection``: the network failed, still after every retry;
- ``timeout``: no answer within ``timeout`` seconds (retried only if ``retry_on_timeout``);
- ``http_error``: any other non-2xx status;
- ``bad_response``: a 200 whose body is not the JSON Tavily documents;
- ``empty``: the search succeeded but returned no usable result.

429, 5xx and connection failures are retried up to ``retries`` times with exponential backoff
(``backoff * 2**attempt`` seconds, capped at ``max_backoff``); the sleep function is injectable so
tests do not wait. The key is passed in: this module never reads the environment (the factory does).
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable
from typing import Any

import requests
from tavily import TavilyClient
from tavily import errors as tavily_errors

from programs.types import Passage, WebSearchError

logger = logging.getLogger(__name__)

RETRYABLE_KINDS = frozenset({"rate_limited", "server_error", "connection"})


def url_id(url: str) -> str:
    """A stable passage id for a web result: ``web:`` and the first 16 hex digits of the URL's SHA-256."""
    return "web:" + hashlib.sha256(url.encode("utf-8")).hexdigest()[:16]


class TavilySearch:
    """:class:`~programs.types.WebSearch` over the Tavily API.

    ``api_key`` may be ``None``: the object is still built (so a program can run on its knowledge base
    alone) and every ``search`` raises ``WebSearchError("no_key", ...)`` without touching the network.
    """

    def __init__(
        self,
        api_key: str | None,
        *,
        max_results: int = 3,
        timeout: float = 10.0,
        retries: int = 2,
        backoff: float = 0.5,
        max_backoff: float = 8.0,
        retry_on_timeout: bool = False,
        search_depth: str = "basic",
        sleep: Callable[[float], None] = time.sleep,
        api_base_url: str | None = None,
        session: requests.Session | None = None,
    ):
        if max_results < 1:
            raise ValueError(f"max_results must be >= 1, got {max_results}")
        if timeout <= 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
        if retries < 0:
            raise ValueError(f"retries must be >= 0, got {retries}")
        if backoff < 0 or max_backoff < 0:
            raise ValueError(f"backoff and max_backoff must be >= 0, got {backoff} and {max_backoff}")
        self.api_key = api_key or None
        self.max_results = max_results
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.retry_on_timeout = retry_on_timeout
        self.search_depth = search_depth
        self._sleep = sleep
        self._api_base_url = api_base_url
        self._session = session
        self._client: TavilyClient | None = None
        self.attempts = 0  # HTTP requests sent by the last search (1 + retries used)

    def __repr__(self) -> str:  # never show the key
        key = "set" if self.api_key else "missing"
        return f"TavilySearch(key={key}, max_results={self.max_results}, timeout={self.timeout}, retries={self.retries})"

    def _get_client(self) -> TavilyClient:
        if self._client is None:
            # A key is always passed here, so TavilyClient neither reads TAVILY_API_KEY nor goes keyless.
            self._client = TavilyClient(
                api_key=self.api_key, api_base_url=self._api_base_url, session=self._session
            )
        return self._client

    def search(self, query: str, max_results: int | None = None) -> list[Passage]:
        """Search the web for ``query``; at most ``max_results`` passages, never more than the constructor's."""
        n = self.max_results if max_results is None else min(max_results, self.max_results)  # web.max_results caps
        if n < 1:
            raise ValueError(f"max_results must be >= 1, got {n}")
        if not query or not query.strip():
            raise WebSearchError("bad_request", "the search query is empty")
        if not self.api_key:
            raise WebSearchError(
                "no_key", "no Tavily API key: set TAVILY_API_KEY or choose web.backend = 'offline' or 'none'"
            )
        self.attempts = 0
        body = self._search_with_retries(query, n)
        passages = self._parse(body, n)
        if not passages:
            raise WebSearchError("empty", f"Tavily returned no results for query {query!r}")
        logger.info("tavily: %d result(s) for %r after %d request(s)", len(passages), query, self.attempts)
        return passages

    def _search_with_retries(self, query: str, n: int) -> dict[str, Any]:
        for attempt in range(self.retries + 1):
            self.attempts = attempt + 1
            try:
                return self._search_once(query, n)
            except WebSearchError as exc:
                retryable = exc.kind in RETRYABLE_KINDS or (exc.kind == "timeout" and self.retry_on_timeout)
                if not retryable or attempt == self.retries:
                    if retryable and self.retries:
                        raise WebSearchError(exc.kind, f"{_detail(exc)} (gave up after {attempt + 1} attempts)") from exc
                    raise
                delay = min(self.max_backoff, self.backoff * (2**attempt))
                logger.warning(
                    "tavily: %s on attempt %d/%d; retrying in %.2fs", exc, attempt + 1, self.retries + 1, delay
                )
                self._sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    def _search_once(self, query: str, n: int) -> dict[str, Any]:
        client = self._get_client()
        try:
            body = client.search(query, max_results=n, search_depth=self.search_depth, timeout=self.timeout)
        except tavily_errors.TimeoutError as exc:
            raise WebSearchError("timeout", f"Tavily did not answer within {self.timeout}s") from exc
        except tavily_errors.InvalidAPIKeyError as exc:
            raise WebSearchError("auth", f"Tavily refused the API key (401){_colon(exc)}") from exc
        except tavily_errors.ForbiddenError as exc:
            raise WebSearchError("forbidden", f"Tavily refused the request (403/432/433){_colon(exc)}") from exc
        except tavily_errors.UsageLimitExceededError as exc:
            raise WebSearchError("rate_limited", f"Tavily rate limit (429){_colon(exc)}") from exc
        except tavily_errors.BadRequestError as exc:
            raise WebSearchError("bad_request", f"Tavily rejected the request (400){_colon(exc)}") from exc
        except requests.HTTPError as exc:
            status = exc.response.status_code if exc.response is not None else None
            if status is not None and status >= 500:
                raise WebSearchError("server_error", f"Tavily server error (HTTP {status})") from exc
            raise WebSearchError("http_error", f"Tavily answered HTTP {status}") from exc
        except requests.exceptions.InvalidJSONError as exc:  # a 200 whose body is not JSON
            raise WebSearchError("bad_response", f"Tavily answered with a body that is not JSON: {exc}") from exc
        except requests.ConnectionError as exc:
            raise WebSearchError("connection", f"cannot reach Tavily: {exc}") from exc
        except requests.RequestException as exc:
            raise WebSearchError("connection", f"request to Tavily failed: {exc}") from exc
        except ValueError as exc:
            raise WebSearchError("bad_response", f"Tavily answered with a body that is not JSON: {exc}") from exc
        except TypeError as exc:  # tavily-python does `raise response.raise_for_status()` on a non-error status
            raise WebSearchError("http_error", f"Tavily answered an unexpected status: {exc}") from exc
        except AttributeError as exc:  # a 200 whose JSON is not an object: tavily-python calls .setdefault on it
            raise WebSearchError("bad_response", f"Tavily answered JSON that is not an object: {exc}") from exc
        if not isinstance(body, dict):
            raise WebSearchError("bad_response", f"Tavily answered a {type(body).__name__}, expected a JSON object")
        return body

    @staticmethod
    def _parse(body: dict[str, Any], n: int) -> list[Passage]:
        results = body.get("results") or []
        if not isinstance(results, list):
            raise WebSearchError("bad_response", f"Tavily 'results' is a {type(results).__name__}, expected a list")
        passages: list[Passage] = []
        seen: set[str] = set()
        for rank, item in enumerate(results):
            if not isinstance(item, dict):
                continue
            url = str(item.get("url") or "").strip()
            text = str(item.get("content") or "").strip()
            if not url or not text or url in seen:
                logger.debug("tavily: skipping result %d (no url, no content or duplicate url)", rank)
                continue
            seen.add(url)
            try:
                score = float(item.get("score") or 0.0)
            except (TypeError, ValueError):
                score = 0.0
            passages.append(
                Passage(
                    id=url_id(url),
                    text=text,
                    score=score,
                    metadata={
                        "url": url,
                        "title": str(item.get("title") or url),
                        "source": url,
                        "origin": "web",
                        "rank": len(passages),
                    },
                )
            )
            if len(passages) >= n:
                break
        return passages


def _colon(exc: Exception) -> str:
    text = str(exc).strip()
    return f": {text}" if text else ""


def _detail(exc: WebSearchError) -> str:
    prefix = f"{exc.kind}: "
    text = str(exc)
    return text[len(prefix):] if text.startswith(prefix) else text
