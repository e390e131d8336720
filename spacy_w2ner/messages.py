"""Error texts that several readers share, worded once: inputs, corpus files and HTTP requests
report the same problem the same way."""
from typing import Any


def not_utf8(err: UnicodeDecodeError) -> str:
    """What is wrong with bytes that are not UTF-8 (the caller says where)."""
    return f"not valid UTF-8 ({err.reason} at byte {err.start})"


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
