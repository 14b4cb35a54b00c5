"""Evaluate a Chroma ``where`` filter against one metadata dict, so BM25 results obey the same
filters as dense ones. Supports ``$eq $ne $gt $gte $lt $lte $in $nin $and $or`` and the
shorthand ``{"key": value}``."""

from __future__ import annotations

from typing import Any

from selfrag.errors import InputError

_CMP = {
    "$eq": lambda a, b: a == b,
    "$ne": lambda a, b: a != b,
    "$gt": lambda a, b: a is not None and a > b,
    "$gte": lambda a, b: a is not None and a >= b,
    "$lt": lambda a, b: a is not None and a < b,
    "$lte": lambda a, b: a is not None and a <= b,
    "$in": lambda a, b: a in b,
    "$nin": lambda a, b: a not in b,
}


def validate_where(where: dict[str, Any] | None) -> None:
    """Raise InputError (a ValueError) naming the bad part of a filter we cannot evaluate."""
    if where is None:
        return
    if not isinstance(where, dict):
        raise InputError(f"filters must be a dict (Chroma 'where'), got {where!r}")
    for key, cond in where.items():
        if key in ("$and", "$or"):
            if not isinstance(cond, list):
                raise InputError(f"{key} needs a list of filters, got {cond!r}")
            for sub in cond:
                validate_where(sub)
        elif key.startswith("$"):
            raise InputError(f"unsupported filter operator {key!r}")
        elif isinstance(cond, dict):
            for op in cond:
                if op not in _CMP:
                    raise InputError(f"unsupported filter operator {op!r} for field {key!r}")


def matches(where: dict[str, Any] | None, metadata: dict[str, Any]) -> bool:
    if not where:
        return True
    for key, cond in where.items():
        if key == "$and":
            if not all(matches(sub, metadata) for sub in cond):
                return False
        elif key == "$or":
            if not any(matches(sub, metadata) for sub in cond):
                return False
        elif isinstance(cond, dict):
            value = metadata.get(key)
            for op, arg in cond.items():
                if op in ("$ne", "$nin") and key not in metadata:
                    continue
                if key not in metadata:
                    return False
                try:
                    if not _CMP[op](value, arg):
                        return False
                except TypeError:
                    return False
        else:
            if key not in metadata or metadata[key] != cond:
                return False
    return True
