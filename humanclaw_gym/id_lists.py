"""Arguments that take several ids (``episode_ids``, ``scene_ids``): a list, never a bare
string. A leaf module, so that every part of the package can use it."""

from __future__ import annotations

from typing import Any

__all__ = ["check_id_list"]

_SHOWN_CHARS = 80


def _shown(value: Any) -> str:
    """``repr(value)`` cut to a readable length (no repr of a huge int)."""
    if isinstance(value, int) and value.bit_length() >= 1000:
        return "<int>"
    text = repr(value)
    return (
        text if len(text) <= _SHOWN_CHARS else f"{text[:_SHOWN_CHARS]}... ({len(text)} characters)"
    )


def check_id_list(value: Any, field: str) -> list[str]:
    """An argument that takes several ids (``episode_ids``, ``scene_ids``) as a list.

    A bare string is refused rather than read as a sequence of one-character ids
    (``"hc_val_003_000"`` would be ``["h", "c", ...]``), and so is an unordered set (the
    order of the ids is the order of the episodes).

    Raises:
        ValueError: a string, a set, not iterable, or an item that is not a string; one
            line naming ``field`` and what is allowed.
    """
    if isinstance(value, (str, bytes, bytearray)):
        raise ValueError(
            f"{field}={_shown(value)} is a single string: give a list of ids, "
            f"e.g. {field}=[{_shown(value)}]"
        )
    if isinstance(value, (set, frozenset)) or not hasattr(value, "__iter__"):
        raise ValueError(
            f"{field} must be a list or tuple of id strings (in the order wanted), "
            f"got {type(value).__name__}"
        )
    ids = list(value)
    for i, item in enumerate(ids):
        if not isinstance(item, str):
            raise ValueError(
                f"{field}[{i}] must be an id string, got {type(item).__name__} {_shown(item)}"
            )
    return ids
