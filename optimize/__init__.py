"""Labelled data, metrics, compilation and evaluation of the SelfRAG program."""
