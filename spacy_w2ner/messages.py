"""Error texts that several readers share, worded once: inputs, corpus files and HTTP requests
report the same problem the same way."""
import re
from typing import Any, Iterable, Optional

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def not_utf8(err: UnicodeDecodeError) -> str:
    """What is wrong with bytes that are not UTF-8 (the caller says where)."""
    return f"not valid UTF-8 ({err.reason} at byte {err.start})"


def lone_surrogate(text: str) -> Optional[str]:
    """What is wrong with a text that holds a lone surrogate, which a JSON ``\\ud800`` escape
    makes: no character, and no encoding writes it (None for a text without one)."""
    found = _LONE_SURROGATE.search(text)
    if found is None:
        return None
    return f"holds a lone surrogate ({found.group()!r} at character {found.start()}), which is not a character: fix the \\u escape"


def missing_spans_key(spans_key: str, keys: Iterable[str]) -> str:
    """What is wrong with documents none of which has ``doc.spans[spans_key]`` (``keys``: the span
    groups they have; the caller says where, and what to do)."""
    keys = sorted(keys)
    return f"no doc has doc.spans[{spans_key!r}]; " + (f"they have {', '.join(repr(k) for k in keys)}" if keys else "they have no span groups")


def json_type(value: Any) -> str:
    """The JSON name of a value's type, for messages: "null", "a boolean", "an integer", ..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a float" if value == value else "NaN"
    names = {str: "a string", list: "a list", dict: "an object"}
    for kind, name in names.items():
        if isinstance(value, kind):
            return name
    return type(value).__name__
