"""Cost: token totals of every real model call, with an honest label of where they came from.

Every attempt counts, retries included. Visible output and hidden reasoning tokens are kept
apart. The episode's ``source`` label says whether the numbers are provider-reported
(``"provider"``), all estimated as characters / 4 (``"estimated_chars_div_4"``), a mix of
both (``"mixed"``), or absent (``"none"``: no model call reported any tokens, e.g. a
scripted policy).

A call that raised reports no numbers (``source="none"``) but carries the length of the
prompt it sent (``Usage.prompt_chars``). The ``paper`` rules charge it
``ceil(prompt_chars / 4)`` input tokens and count it as an estimated call, as the reference
release does; the ``strict`` rules charge nothing and count it as ``none``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, ClassVar

from humanclaw_gym.metrics._checks import as_int
from humanclaw_gym.metrics.fields import Column, MetricField, MetricSpec, Reduce
from humanclaw_gym.metrics.rules import DEFAULT_METRIC_RULES, check_rules
from humanclaw_gym.metrics.tracker import DecisionRecord, EpisodeEnd, EpisodeStart, FrameRecord

if TYPE_CHECKING:
    from humanclaw_gym.policy import Usage

__all__ = [
    "TOKEN_SOURCE_LABELS",
    "USAGE_SPEC",
    "UsageMetric",
    "UsageTracker",
    "check_usage",
    "combine_token_sources",
]

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


def _chars_div_4(chars: int) -> int:
    return -(-chars // 4)


def check_usage(
    usage: Iterable[Usage],
) -> list[tuple[str, tuple[int, int, int], int | None]]:
    """Check the usage records of one decision.

    Returns:
        ``(source, (input, output, reasoning tokens), prompt_chars or None)`` per record.

    Raises:
        ValueError: naming the record and field.
    """
    out = []
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
        chars = getattr(item, "prompt_chars", None)
        if chars is not None:
            chars = as_int(chars, f"usage[{i}].prompt_chars", 0)
        out.append((source, counts, chars))
    return out


class UsageTracker:
    """Sums :class:`~humanclaw_gym.policy.Usage` records of one episode.

    Args:
        rules: the metric rules (how a failed call is charged, see the module docstring).
    """

    def __init__(self, rules: str = DEFAULT_METRIC_RULES) -> None:
        self.rules = check_rules(rules)
        self.failed_calls = 0
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
        for source, counts, chars in check_usage(usage):
            failed = source == "none" and chars is not None
            if failed and self.rules == "paper":
                source = "estimated_chars_div_4"
                counts = (counts[0] + _chars_div_4(chars), counts[1], counts[2])
            items.append((source, counts, failed))
        for source, (tok_in, tok_out, tok_reason), failed in items:
            self.failed_calls += int(failed)
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
            "failed_calls": self.failed_calls,
            "calls_by_source": dict(sorted(self._sources.items())),
            "source": self.source,
        }


#: The reference layout's names of the token sources (ours, reference).
_REFERENCE_SOURCES = (
    ("provider", "provider_exact"),
    ("estimated_chars_div_4", "estimated_chars_div_4"),
    ("mixed", "mixed_exact_and_estimated"),
    ("none", "unavailable_no_calls"),
)


def _token_field(name: str, meaning: str, **kwargs: Any) -> MetricField:
    return MetricField(f"tokens.{name}", "int", meaning, unit="tokens", minimum=0, **kwargs)


#: Declared output of the cost metrics (see :mod:`humanclaw_gym.metrics.fields`).
USAGE_SPEC = MetricSpec(
    name="usage",
    fields=(
        # the reference layout has the totals (its cost section), not the object
        MetricField("tokens", "object", "token totals of every real model call", imported=True),
        _token_field(
            "input_tokens",
            "prompt tokens, retries included",
            aggregate="summed",
            upstream="cost.input_tokens",
        ),
        _token_field(
            "output_tokens",
            "visible completion tokens",
            aggregate="summed",
            upstream="cost.visible_output_tokens",
        ),
        _token_field(
            "reasoning_tokens",
            "hidden reasoning tokens",
            aggregate="summed",
            upstream="cost.reasoning_tokens",
        ),
        MetricField(
            "tokens.calls", "int", "real model calls", minimum=0, upstream="cost.vlm_calls"
        ),
        MetricField(
            "tokens.failed_calls",
            "int",
            "calls that raised",
            minimum=0,
            at_most="tokens.calls",
            since=2,
            legacy=0,
        ),
        MetricField(
            "tokens.source",
            "str",
            "where the counts came from",
            choices=TOKEN_SOURCE_LABELS,
            aggregate="combined over episodes, ignoring none",
            upstream="cost.token_source",
            upstream_labels=_REFERENCE_SOURCES,
        ),
    ),
    columns=(
        Column(
            "in tok/step",
            "input_tokens_per_step",
            "main",
            ".1f",
            Reduce("pooled", "tokens.input_tokens", "steps"),
            8,
        ),
        Column(
            "out tok/step",
            "output_tokens_per_step",
            "main",
            ".1f",
            Reduce("pooled", "tokens.output_tokens", "steps"),
            9,
        ),
    ),
)


class UsageMetric:
    """Tracker of the token totals (:data:`USAGE_SPEC`): the usage records of every
    decision."""

    spec: ClassVar[MetricSpec] = USAGE_SPEC
    needs: ClassVar[frozenset[str]] = frozenset()
    thresholds: ClassVar[dict[str, float | int]] = {}

    def on_reset(self, start: EpisodeStart) -> None:
        self._tracker = UsageTracker(rules=start.rules)

    def on_decision(self, decision: DecisionRecord) -> None:
        self._tracker.record(decision.usage)

    def on_frame(self, frame: FrameRecord) -> None:
        pass

    def summary(self, end: EpisodeEnd) -> dict[str, Any]:
        tokens = self._tracker.summary()
        steps = end.steps
        return {
            "tokens": {
                **tokens,
                "input_tokens_per_step": tokens["input_tokens"] / steps if steps else None,
                "output_tokens_per_step": tokens["output_tokens"] / steps if steps else None,
            }
        }
