"""LM backends: build a ``dspy.LM`` and adapter from :class:`selfrag.settings.LMSettings`.

- :mod:`selfrag.lm.factory` — ``build_lm(settings, role)``, ``build_adapter(settings)``;
- :mod:`selfrag.lm.llamacpp_engine` — ``LlamaCppEngine``, the in-process llama.cpp engine for DSPy
  (token usage with cached prompt tokens, token log-probabilities);
- :mod:`selfrag.lm.llamacpp_model` — the process-wide shared ``Llama``, its lock and instrumentation;
- :mod:`selfrag.lm.llamacpp_request` — lm15 ``Request`` -> ``create_chat_completion`` arguments;
- :mod:`selfrag.lm.llamacpp_logprobs` — raw token log-probabilities captured at sampling;
- :mod:`selfrag.lm.model_files` — ``gguf_path(profile, model, cache_dir)``: where the GGUF lives.

Nothing is imported here so that ``import selfrag.lm`` stays cheap.
"""
