"""``selfrag serve``: the program behind an HTTP API (FastAPI), with a streamed reflection trace and a
web page. Sits on the runtime layer beside the CLI and uses the same wiring (:mod:`selfrag.wiring`).

- :mod:`selfrag.service.app` — the app factory :func:`create_app` (takes the wired runtime);
- :mod:`selfrag.service.runtime` — :class:`ServiceRuntime` and its wiring from settings;
- :mod:`selfrag.service.settings` — :class:`ServiceSettings` (address, token variable, limits).
"""
