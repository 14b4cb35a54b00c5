"""Web-search backends for the program's web fallback, each a :class:`programs.types.WebSearch`
raising :class:`programs.types.WebSearchError` (its ``kind`` a :data:`programs.types.WebErrorKind`):

- :mod:`selfrag.web.tavily` — :class:`~selfrag.web.tavily.TavilySearch`, the Tavily API;
- :mod:`selfrag.web.offline` — :class:`~selfrag.web.offline.OfflineWebSearch`, a local collection
  searched like the web, and the documents it is built from;
- :mod:`selfrag.web.static` — :class:`~selfrag.web.static.StaticWebSearch`, fixed passages (tests, demos);
- :mod:`selfrag.web.factory` — :func:`~selfrag.web.factory.build_web_search`, the configured one.

The per-question round limit and the recording of failures belong to the program
(:class:`programs.web_budget.WebBudget`). Import the module you need: this package imports nothing,
so the offline or static backend does not load ``tavily`` and ``requests``.
"""
