"""Build the configured web backend. The only place that reads ``TAVILY_API_KEY``."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable

from programs.types import Retriever, WebSearch
from selfrag.settings import WebSettings
from selfrag.web.offline import OfflineWebSearch
from selfrag.web.tavily import TavilySearch

logger = logging.getLogger(__name__)

TAVILY_KEY_ENV = "TAVILY_API_KEY"


def tavily_key_from_env() -> str | None:
    """The Tavily key from the environment at call time, or None if unset or blank."""
    return (os.environ.get(TAVILY_KEY_ENV) or "").strip() or None


def build_web_search(
    web: WebSettings,
    offline_retriever: Retriever | None = None,
    api_key: str | None = None,
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> WebSearch | None:
    """``none`` -> None; ``tavily`` -> :class:`TavilySearch`; ``offline`` -> :class:`OfflineWebSearch`.

    For ``tavily`` the key is ``api_key`` if given, else ``TAVILY_API_KEY``; without either the backend
    is still built (with a warning) and each search fails with ``WebSearchError("no_key")``, so the
    program answers from its knowledge base and records why the web was not used. For ``offline``,
    ``offline_retriever`` (a retriever over the ``web.offline_collection`` collection) is required.
    """
    backend = web.backend
    if backend == "none":
        return None
    if backend == "tavily":
        key = api_key if api_key is not None else tavily_key_from_env()
        if not key:
            logger.warning("web.backend = 'tavily' but %s is not set: web searches will fail with no_key", TAVILY_KEY_ENV)
        return TavilySearch(
            key,
            max_results=web.max_results,
            timeout=web.timeout,
            retries=web.retries,
            backoff=web.backoff,
            sleep=sleep,
        )
    if backend == "offline":
        if offline_retriever is None:
            raise ValueError(
                f"web.backend = 'offline' needs a retriever over the offline web collection "
                f"{web.offline_collection!r}; build one (e.g. a KnowledgeBase on that collection) and pass it "
                "as offline_retriever"
            )
        return OfflineWebSearch(offline_retriever, collection=web.offline_collection, max_results=web.max_results)
    raise ValueError(f"unknown web.backend {backend!r}; expected 'none', 'tavily' or 'offline'")
