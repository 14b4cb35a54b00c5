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


_SCALAR_TYPES = (str, int, float, bool)
_NUMBER_OPS = ("$gt", "$gte", "$lt", "$lte")


def validate_where(where: dict[str, Any] | None) -> None:
    """Raise InputError (a ValueError) naming the bad part of a filter we cannot evaluate: an unknown
    operator, or an operand of the wrong type (Chroma's rules, so dense and BM25 searches refuse alike)."""
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
            if not cond:
                raise InputError(f"filter on field {key!r} has no operator, got {{}}")
            for op, arg in cond.items():
                if op not in _CMP:
                    raise InputError(f"unsupported filter operator {op!r} for field {key!r}")
                _check_operand(key, op, arg)
        else:
            _check_operand(key, "", cond)  # the shorthand {"key": value}


def _check_operand(key: str, op: str, arg: Any) -> None:
    """InputError unless ``arg`` is what ``op`` ("" for the shorthand ``{key: value}``) compares with: one
    str/int/float/bool (``$gt``-like: a number), or for ``$in``/``$nin`` a non-empty list of them, of one type."""
    if op in ("$in", "$nin"):
        if (not isinstance(arg, list) or not arg or not all(isinstance(a, _SCALAR_TYPES) for a in arg)
                or len({type(a) for a in arg}) > 1):
            raise InputError(f"filter on field {key!r}: {op} needs a non-empty list of str, int, float or bool "
                             f"values of one type, got {arg!r}")
    elif op in _NUMBER_OPS:
        if not isinstance(arg, (int, float)) or isinstance(arg, bool):
            raise InputError(f"filter on field {key!r}: {op} needs a number, got {arg!r}")
    elif not isinstance(arg, _SCALAR_TYPES):
        raise InputError(f"filter on field {key!r}: {op or 'a value'} needs a str, int, float or bool "
                         f"(several values: {{\"$in\": [...]}}), got {arg!r}")


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
