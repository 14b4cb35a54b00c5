"""Where to search and with which metadata filters: collection routing and self-query."""

from typing import Any

import dspy
from pydantic import BaseModel


class RouteCollections(dspy.Signature):
    """Choose the document collections that can answer the question.

    Each collection is described in one line. List the names of every collection likely to hold
    the answer, best first; list none when no collection is about the question's subject (it is
    then answered from the web or directly). Use only the names given."""

    question: str = dspy.InputField()
    collections: str = dspy.InputField(desc="one collection per line: name: description")
    chosen: list[str] = dspy.OutputField(desc="collection names, or an empty list")


class FilterCondition(BaseModel):
    """One metadata condition: ``field op value`` (op: eq, ne, gt, gte, lt, lte, in, nin).

    Loosely typed on purpose: the program's filter grammar checks each condition against the
    collection's fields and drops a bad one alone, so one malformed condition never loses the rest."""

    field: str = ""
    op: str = "eq"
    value: Any = None  # a str, number or bool; a list of them for in / nin


class ExtractFilters(dspy.Signature):
    """Extract the metadata conditions the question states about the documents it wants (self-query).

    Use only the listed fields and their types, e.g. "manuals from 2023 about the Heron" with the
    fields year (int) and doc_type (str) → year eq 2023, doc_type eq "manual". Conditions about
    the subject matter itself are not filters: they stay in the search text. Return an empty list
    when the question states no such condition."""

    question: str = dspy.InputField()
    metadata_fields: str = dspy.InputField(desc="one field per line: name (type): example values")
    filters: list[FilterCondition] = dspy.OutputField()
