"""Labelled data, metrics, compilation and evaluation of the programs. Imports ``signatures`` and
``programs``, never the runtime (``selfrag``): the command line passes the folders, LMs, web search
and knowledge-base factory in.

- data: ``sources`` (dataset readers, corpus documents) → ``records`` (labelled records, hard
  negatives via ``negatives``) → ``splits`` (train/dev files, manifest, ``load_split``)
- your own data: ``qa_format`` (the QA file, its check, gold documents in a collection) → ``derive``
  (labelled records of every judgement, with ``derive_labels``' text operations) → ``derived_data``
  (the versioned derived folder, its loader)
- ``metrics``: judgement and end-to-end metrics; ``feedback``: GEPA's textual feedback per judgement
- compile: ``judgements`` (what is compiled, on which examples), ``optimizers`` (DSPy optimizers and
  budgets), ``dev_score`` (``dspy.Evaluate`` before/after), ``usage`` (cost meter), ``progress``
  (reporter hooks), ``stages`` (one judgement, end to end), ``manifest``, ``compile`` (the whole run)
- evaluate: ``eval_examples`` (questions, corpus), ``eval_runs`` (resumable results file),
  ``eval_summary`` (metrics per program), ``eval_reports`` (markdown, plot), ``evaluate`` (the whole run)
- ``errors``: the user errors (``CompileError``, ``DataError``) the command line turns into one line
"""
