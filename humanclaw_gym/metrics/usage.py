"""Cost: token totals of every real model call, with an honest label of where they came from.

Every attempt counts, retries included. Visible output and hidden reasoning tokens are kept
apart. The episode's ``source`` label says whether the numbers are provider-reported
(``"provider"``), all estimated as characters / 4 (``"estimated_chars_div_4"``), a mix of
both (``"mixed"``), or absent (``"none"``: no model call reported any tokens, e.g. a
scripted policy).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from humanclaw_gym.metrics._checks import as_int

if TYPE_CHECKING:
    from humanclaw_gym.policy import Usage

__all__ = ["TOKEN_SOURCE_LABELS", "UsageTracker", "combine_token_sources"]

#: Every label an episode (or a whole run) can carry.
TOKEN_SOURCE_LABELS: tuple[str, ...] = ("provider", "estimated_chars_div_4", "mixed", "none")


def combine_token_sources(labels: Iterable[str]) -> str:
    """Combine per-call or per-episode labels into one: ``"none"`` entries are ignored; one
    remaining kind gives that kind, two or more (or any ``"mixed"``) give ``"mixed"``."""
    kinds = set()
    for label in labels:
        if label not in TOKEN_SOURCE_LABELS:
            raise ValueError(f"token source must be one of {TOKEN_SOURCE_LABELS}, got {label!r}")
        if label != "none":
            kinds.add(label)
    if not kinds:
        return "none"
    if len(kinds) == 1:
        return kinds.pop()
    return "mixed"


class UsageTracker:
    """Sums :class:`~humanclaw_gym.policy.Usage` records of one episode."""

    def __init__(self) -> None:
        self.input_tokens = 0
        self.output_tokens = 0
        self.reasoning_tokens = 0
        self.calls = 0
        self._sources: dict[str, int] = {}

    def record(self, usage: Iterable[Usage]) -> None:
        """Add the usage records of one decision (one per real model call).

        All records are checked before any is added, so a bad record changes nothing.
        """
        items = []
        for i, item in enumerate(usage):
            source = getattr(item, "source", None)
            if source not in ("provider", "estimated_chars_div_4", "none"):
                raise ValueError(
                    f"usage[{i}].source must be 'provider', 'estimated_chars_div_4' or "
                    f"'none', got {source!r}"
                )
            counts = tuple(
                as_int(getattr(item, key, None), f"usage[{i}].{key}", 0)
                for key in ("input_tokens", "output_tokens", "reasoning_tokens")
            )
            items.append((source, counts))
        for source, (tok_in, tok_out, tok_reason) in items:
            self.input_tokens += tok_in
            self.output_tokens += tok_out
            self.reasoning_tokens += tok_reason
            self.calls += 1
            self._sources[source] = self._sources.get(source, 0) + 1

    @property
    def source(self) -> str:
        """``"provider"``, ``"estimated_chars_div_4"``, ``"mixed"`` or ``"none"``."""
        return combine_token_sources(self._sources)

    def summary(self) -> dict[str, Any]:
        """JSON-ready ``tokens`` object of metrics.json."""
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "reasoning_tokens": self.reasoning_tokens,
            "calls": self.calls,
            "calls_by_source": dict(sorted(self._sources.items())),
            "source": self.source,
        }
