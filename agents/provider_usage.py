"""A provider's token usage record read into a :class:`~humanclaw_gym.policy.Usage`.

One reading for every transport (the OpenAI-compatible client's ``completion.usage`` and
the filesystem queue's ``usage`` / flat token fields), the reference release's:

* input: the first of ``input_tokens``, ``prompt_tokens``, ``prompt_token_count``;
* visible output: the first of ``output_tokens``, ``visible_output_tokens``,
  ``candidates_token_count``; when none is given, ``completion_tokens`` minus reasoning
  (OpenAI counts hidden reasoning inside ``completion_tokens``). An explicit visible count
  wins over ``completion_tokens`` when both are present;
* reasoning: the first of ``reasoning_tokens``, ``num_reasoning_tokens``,
  ``thoughts_token_count``, ``thinking_tokens``, else ``reasoning_tokens`` inside
  ``completion_tokens_details`` (or, when that is absent or empty, ``output_tokens_details``);
  0 when none.

"The first of" skips a field that is absent or ``null``, that ``int()`` cannot read
(``"x"``, ``"3.5"``, a list) or that is negative; ``int()`` reads ``"12"`` as 12, ``3.7``
as 3 and ``true`` as 1, as the reference does. Without an input count, or without both a
visible and a ``completion_tokens`` count (``{"prompt_tokens": 900,
"completion_tokens": null}``), there is no provider usage: the transport then records a
characters / 4 estimate, as the reference does.

One deliberate difference: a count ``int()`` cannot represent (``Infinity``, which
Python's JSON reader accepts) makes the reference raise ``OverflowError`` and lose the
reply; here that field is skipped like any unreadable one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from humanclaw_gym.policy import Usage

__all__ = ["usage_fields", "usage_from_fields"]

_INPUT_KEYS = ("input_tokens", "prompt_tokens", "prompt_token_count")
_VISIBLE_KEYS = ("output_tokens", "visible_output_tokens", "candidates_token_count")
_REASONING_KEYS = (
    "reasoning_tokens",
    "num_reasoning_tokens",
    "thoughts_token_count",
    "thinking_tokens",
)


def usage_fields(value: Any) -> dict[str, Any]:
    """A usage record as a plain dict: a mapping as is, a pydantic object (the ``openai``
    client's ``CompletionUsage``) through ``model_dump()``, anything else empty."""
    if isinstance(value, Mapping):
        return dict(value)
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        try:  # a provider's field of the wrong type is read below, not warned about
            dumped = dump(warnings=False)
        except TypeError:  # pragma: no cover - a model_dump without that switch
            dumped = dump()
        return dict(dumped) if isinstance(dumped, Mapping) else {}
    return {}


def _count(fields: Mapping[str, Any], *keys: str) -> int | None:
    for key in keys:
        value = fields.get(key)
        if value is None:
            continue
        try:
            number = int(value)
        except (TypeError, ValueError, OverflowError):
            continue
        if number >= 0:
            return number
    return None


def usage_from_fields(fields: Mapping[str, Any], stage: str) -> Usage | None:
    """The provider usage of one call (see the module docstring), or ``None`` when the
    record lacks an input count or any output count."""
    if not fields:
        return None
    prompt = _count(fields, *_INPUT_KEYS)
    visible = _count(fields, *_VISIBLE_KEYS)
    total = _count(fields, "completion_tokens")
    reasoning = _count(fields, *_REASONING_KEYS)
    if reasoning is None:
        details = fields.get("completion_tokens_details") or fields.get("output_tokens_details")
        reasoning = _count(usage_fields(details), "reasoning_tokens")
    if prompt is None or (visible is None and total is None):
        return None
    reasoning = reasoning or 0
    if visible is None:
        visible = max(0, int(total or 0) - reasoning)
    return Usage(
        stage=stage,
        attempt=1,
        input_tokens=prompt,
        output_tokens=visible,
        reasoning_tokens=reasoning,
        source="provider",
    )
