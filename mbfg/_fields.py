"""Field checks shared by the model-file readers (:mod:`mbfg.model_file`, :mod:`mbfg.mbse_yaml`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def checked_mapping(value: Any, entry: str, allowed: tuple[str, ...], required: tuple[str, ...],
                    error: Callable[[str, str], Exception], word: str = "field") -> dict[str, Any]:
    """``value`` as a dict with only ``allowed`` keys and all ``required`` ones, else ``error(entry, message)``
    raised for the first offending entry (``entry`` "" = the document's top level; ``word``: what the format
    calls a key, for the messages)."""
    if not isinstance(value, dict):
        raise error(entry or "document",
                    f"expected a mapping with keys {', '.join(required)}, got {type(value).__name__} {value!r}")
    for key in value:
        if key not in allowed:
            raise error(f"{entry}.{key}" if entry else str(key), f"unknown {word}; expected one of {', '.join(allowed)}")
    for key in required:
        if key not in value:
            raise error(f"{entry}.{key}" if entry else key, f"missing required {word} {key!r}")
    return value
