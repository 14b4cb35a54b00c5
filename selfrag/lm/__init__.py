"""LM backends: build a ``dspy.LM`` and adapter from :class:`selfrag.settings.LMSettings`.

- :mod:`selfrag.lm.factory` — ``build_lm(settings, role)``, ``build_adapter(settings)``;
- :mod:`selfrag.lm.llamacpp_engine` — ``LlamaCppEngine``, the in-process llama.cpp engine for DSPy;
- :mod:`selfrag.lm.model_files` — ``gguf_path(profile, model, cache_dir)``: where the GGUF lives.

Nothing is imported here so that ``import selfrag.lm`` stays cheap.
"""
