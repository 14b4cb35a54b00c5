"""Web-search fallback backends: Tavily, an offline local "web" and a static in-memory one.

All implement :class:`programs.types.WebSearch` and raise :class:`programs.types.WebSearchError`;
:class:`WebBudget` bounds and records the rounds per question; :func:`build_web_search` picks one
from :class:`selfrag.settings.WebSettings`.
"""

from selfrag.web.factory import build_web_search, tavily_key_from_env
from programs.web_budget import WebBudget, error_kind
from selfrag.web.offline import OfflineWebSearch, offline_web_documents, pseudo_url
from selfrag.web.static import StaticWebSearch
from selfrag.web.tavily import TavilySearch, url_id

__all__ = [
    "OfflineWebSearch",
    "StaticWebSearch",
    "TavilySearch",
    "WebBudget",
    "build_web_search",
    "error_kind",
    "offline_web_documents",
    "pseudo_url",
    "tavily_key_from_env",
    "url_id",
]
