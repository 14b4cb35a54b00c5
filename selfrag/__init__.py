"""selfrag: Self-reflective Retrieval-Augmented Generation as a compiled DSPy program.

The runtime around the program lives here: settings, LM backends, the knowledge base, web search,
result/trace models and the CLI. The program itself is in ``programs/``, its declarations in
``signatures/`` and its optimisation in ``optimize/``.
"""

__version__ = "0.1.0"
