"""Self-query's filter grammar: what an LM-extracted metadata condition may say, checked before it
touches a store.

A condition is ``field op value``. The field must be one of the collection's metadata keys (its
:class:`FieldSpec`, inferred from stored metadata by :func:`infer_schema`), the operator one of
:data:`OPERATORS` allowed for the field's type (order comparisons only on numbers), and the value is
coerced to the field's type (``"2023"`` → 2023 for an int field; ``in``/``nin`` take a short list).
Anything else — an unknown field, an operator such as ``$where``, a dict or over-long value, a value
of the wrong type — is dropped with a reason (:class:`Dropped`), never an error: the question is
still searched, without that condition.

Valid conditions become a Chroma ``where`` (:func:`to_where`; the knowledge base's BM25 retriever
applies the same ``where`` as a post-filter) and can be checked against one passage's metadata with
:func:`matches` (for retrievers that do not filter). Values stay values: a where is a dict, never a
query string, so text like ``"x'; DROP"`` or ``"$ne"`` is only ever compared as a literal.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from programs.passages import quote_safe

FieldType = Literal["str", "int", "float", "bool"]
Scalar = str | int | float | bool

# grammar operator → Chroma operator
OPERATORS: dict[str, str] = {"eq": "$eq", "ne": "$ne", "gt": "$gt", "gte": "$gte", "lt": "$lt", "lte": "$lte",
                             "in": "$in", "nin": "$nin"}
ORDER_OPERATORS = frozenset({"gt", "gte", "lt", "lte"})
LIST_OPERATORS = frozenset({"in", "nin"})
MAX_CLAUSES = 4
MAX_LIST = 10
MAX_VALUE_CHARS = 200
# Metadata the chunker and the index builders write for their own use: never something to filter on.
INTERNAL_KEYS = frozenset({"content_hash", "chunk_index", "parent_id", "children", "cluster_hash", "kind",
                           "representation", "raptor_level"})


@dataclass(frozen=True)
class FieldSpec:
    """One filterable metadata key of a collection, its value type and a few example values."""

    name: str
    type: FieldType
    examples: tuple[str, ...] = ()


@dataclass(frozen=True)
class Clause:
    """One validated condition; ``value`` has the field's type (a tuple for ``in``/``nin``)."""

    field: str
    op: str
    value: Scalar | tuple[Scalar, ...]


@dataclass(frozen=True)
class Dropped:
    """A condition the grammar refused, as given (briefly) and why."""

    condition: str
    reason: str


def _brief(raw: Any) -> str:
    text = " ".join(repr(raw).split())
    return text if len(text) <= 120 else text[:119] + "…"


def _get(raw: Any, key: str) -> Any:
    if isinstance(raw, Mapping):
        return raw.get(key)
    return getattr(raw, key, None)


def coerce(value: Any, ftype: FieldType) -> Scalar:
    """``value`` as ``ftype``; ValueError naming the problem when it is not one."""
    if isinstance(value, (dict, list, tuple, set)) or value is None:
        raise ValueError(f"expected a {ftype} value, got {type(value).__name__}")
    if ftype == "bool":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        raise ValueError(f"expected true or false, got {value!r}")
    if ftype in ("int", "float"):
        if isinstance(value, bool):
            raise ValueError(f"expected a number, got {value!r}")
        if isinstance(value, str):
            text = value.strip()
            if len(text) > 40:
                raise ValueError("number too long")
            try:
                number = int(text) if ftype == "int" else float(text)
            except ValueError:
                raise ValueError(f"expected a {ftype}, got {value!r}") from None
        elif isinstance(value, (int, float)):
            number = value
        else:
            raise ValueError(f"expected a {ftype}, got {type(value).__name__}")
        if isinstance(number, float) and not math.isfinite(number):
            raise ValueError(f"expected a finite number, got {value!r}")
        if ftype == "int":
            if isinstance(number, float) and not number.is_integer():
                raise ValueError(f"expected an int, got {value!r}")
            return int(number)
        return float(number)
    # str
    if isinstance(value, bool):
        raise ValueError(f"expected text, got {value!r}")
    if isinstance(value, (int, float)):
        text = str(value)
    elif isinstance(value, str):
        text = value.strip()
    else:
        raise ValueError(f"expected text, got {type(value).__name__}")
    if not text:
        raise ValueError("empty text")
    if len(text) > MAX_VALUE_CHARS:
        raise ValueError(f"text longer than {MAX_VALUE_CHARS} characters")
    if any(ord(ch) < 32 for ch in text):
        raise ValueError("control characters in text")
    return text


def validate(raw: Any, schema: Mapping[str, FieldSpec]) -> Clause:
    """One raw condition (a dict or an object with ``field``, ``op``, ``value``) as a :class:`Clause`;
    ValueError with the reason otherwise."""
    field, op, value = _get(raw, "field"), _get(raw, "op"), _get(raw, "value")
    if not isinstance(field, str) or field not in schema:
        raise ValueError(f"unknown field {field!r}; known: {', '.join(sorted(schema)) or 'none'}")
    spec = schema[field]
    op = op.strip().lower().lstrip("$") if isinstance(op, str) else op
    if op not in OPERATORS:
        raise ValueError(f"unknown operator {_get(raw, 'op')!r}; use one of {', '.join(OPERATORS)}")
    if op in ORDER_OPERATORS and spec.type not in ("int", "float"):
        raise ValueError(f"operator {op} needs a number field; {field} is {spec.type}")
    if op in LIST_OPERATORS:
        items = value if isinstance(value, (list, tuple)) else [value]
        if not items or len(items) > MAX_LIST:
            raise ValueError(f"{op} needs 1 to {MAX_LIST} values, got {len(items)}")
        coerced = tuple(dict.fromkeys(coerce(v, spec.type) for v in items))
        return Clause(field, op, coerced)
    if isinstance(value, (list, tuple)) and len(value) == 1:
        value = value[0]
    return Clause(field, op, coerce(value, spec.type))


def parse_clauses(raw: Iterable[Any] | None, schema: Mapping[str, FieldSpec],
                  max_clauses: int = MAX_CLAUSES) -> tuple[list[Clause], list[Dropped]]:
    """The valid conditions of ``raw`` (duplicates removed, at most ``max_clauses``) and the dropped ones."""
    kept: list[Clause] = []
    dropped: list[Dropped] = []
    for item in list(raw or []):
        try:
            clause = validate(item, schema)
        except ValueError as exc:
            dropped.append(Dropped(_brief(item), str(exc)))
            continue
        if clause in kept:
            continue
        if len(kept) >= max_clauses:
            dropped.append(Dropped(_brief(item), f"more than {max_clauses} conditions"))
            continue
        kept.append(clause)
    return kept, dropped


def to_where(clauses: Iterable[Clause]) -> dict[str, Any] | None:
    """A Chroma ``where`` for the conditions (one: ``{field: {$op: value}}``, several: ``$and``); None for none."""
    parts = [{c.field: {OPERATORS[c.op]: list(c.value) if isinstance(c.value, tuple) else c.value}}
             for c in clauses]
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else {"$and": parts}


def and_where(*wheres: dict[str, Any] | None) -> dict[str, Any] | None:
    """The conjunction of several ``where`` dicts (None ones ignored)."""
    present = [w for w in wheres if w]
    if not present:
        return None
    return present[0] if len(present) == 1 else {"$and": present}


def _holds(clause: Clause, metadata: Mapping[str, Any]) -> bool:
    if clause.field not in metadata:
        return clause.op in ("ne", "nin")
    value = metadata[clause.field]
    try:
        return {
            "eq": lambda: value == clause.value, "ne": lambda: value != clause.value,
            "gt": lambda: value > clause.value, "gte": lambda: value >= clause.value,
            "lt": lambda: value < clause.value, "lte": lambda: value <= clause.value,
            "in": lambda: value in clause.value, "nin": lambda: value not in clause.value,
        }[clause.op]()
    except TypeError:
        return False


def matches(clauses: Iterable[Clause], metadata: Mapping[str, Any]) -> bool:
    """Whether one passage's metadata satisfies every condition (the post-filter)."""
    return all(_holds(c, metadata) for c in clauses)


def describe(schema: Mapping[str, FieldSpec]) -> str:
    """The schema as the self-query prompt shows it: ``name (type): e.g. a, b``, one per line."""
    lines = []
    for spec in sorted(schema.values(), key=lambda s: s.name):
        # text examples are stored document metadata: quoted data, like passages
        shown = [f"«{quote_safe(e)}»" if spec.type == "str" else e for e in spec.examples]
        examples = f": e.g. {', '.join(shown)}" if shown else ""
        lines.append(f"{spec.name} ({spec.type}){examples}")
    return "\n".join(lines)


def _type_of(value: Any) -> FieldType | None:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    return None


def infer_schema(metadatas: Iterable[Mapping[str, Any]], exclude: Iterable[str] = INTERNAL_KEYS,
                 max_examples: int = 3) -> dict[str, FieldSpec]:
    """The filterable keys of a sample of stored metadata: a key whose values mix types is a float
    field when they are all numbers, else left out; ``exclude`` keys and keys starting with ``$``
    or ``_`` are never fields."""
    skip = set(exclude)
    types: dict[str, set[str]] = {}
    examples: dict[str, list[str]] = {}
    for meta in metadatas:
        for key, value in meta.items():
            if not isinstance(key, str) or key in skip or key.startswith(("$", "_")):
                continue
            ftype = _type_of(value)
            if ftype is None:
                continue
            types.setdefault(key, set()).add(ftype)
            seen = examples.setdefault(key, [])
            shown = str(value)[:40]
            if len(seen) < max_examples and shown not in seen:
                seen.append(shown)
    schema: dict[str, FieldSpec] = {}
    for key, found in types.items():
        if len(found) == 1:
            ftype = next(iter(found))
        elif found <= {"int", "float"}:
            ftype = "float"
        else:
            continue
        schema[key] = FieldSpec(key, ftype, tuple(examples[key]))  # type: ignore[arg-type]
    return dict(sorted(schema.items()))
