"""The Policy protocol and the Decision record: the seam between any agent and the env.

A policy sees only what a person standing in the scene would see: the ego RGB image
(``uint8 (448, 448, 3)``) and the public ``info`` mapping (instruction, target category,
episode and step ids). It returns a :class:`Decision`: the one :class:`~humanclaw_gym.SkillCall`
to execute plus, optionally, the text in which it claims what it sees (``visible_state``,
read by the FindSR rule of the metrics wrapper) and the provider usage records of every
model call it made for this decision (read by the cost metrics).

``env.step`` accepts a Decision directly, so the text and usage travel with the action and
never through ``info``. This module imports nothing heavy and never imports ``agents/``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np

from humanclaw_gym.skills import SkillCall

__all__ = ["Decision", "Policy", "TokenSource", "Usage"]

TokenSource = Literal["provider", "estimated_chars_div_4", "none"]
_TOKEN_SOURCES = ("provider", "estimated_chars_div_4", "none")


@dataclass(frozen=True)
class Usage:
    """Token usage of one real model call (one attempt of one stage).

    Attributes:
        stage: logical stage that made the call, e.g. ``"planner"`` or ``"verifier"``.
        attempt: 1-based attempt number within the stage (retries count too).
        input_tokens: prompt tokens (text + image) as reported by the provider.
        output_tokens: visible completion tokens.
        reasoning_tokens: hidden reasoning tokens, kept apart from visible output.
        source: ``"provider"`` when the numbers came from the provider's usage field,
            ``"estimated_chars_div_4"`` when they were estimated as characters / 4,
            ``"none"`` when the call gave no numbers (it raised).
        prompt_chars: length in characters of the prompt text sent, for a call that raised
            (``source="none"``), else ``None``. The ``paper`` metric rules charge such a
            call ``ceil(prompt_chars / 4)`` input tokens, as the reference release does;
            the ``strict`` rules charge nothing.
    """

    stage: str
    attempt: int = 1
    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    source: TokenSource = "provider"
    prompt_chars: int | None = None

    def __post_init__(self) -> None:
        for name in ("attempt", "input_tokens", "output_tokens", "reasoning_tokens"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
                raise ValueError(f"Usage.{name} must be a non-negative int, got {value!r}")
        if self.attempt < 1:
            raise ValueError(f"Usage.attempt must be >= 1, got {self.attempt!r}")
        if self.source not in _TOKEN_SOURCES:
            raise ValueError(f"Usage.source must be one of {_TOKEN_SOURCES}, got {self.source!r}")
        chars = self.prompt_chars
        if chars is not None and (
            isinstance(chars, bool) or not isinstance(chars, (int, np.integer)) or chars < 0
        ):
            raise ValueError(
                f"Usage.prompt_chars must be a non-negative int or None, got {chars!r}"
            )

    def to_dict(self) -> dict[str, Any]:
        out = {
            "stage": self.stage,
            "attempt": int(self.attempt),
            "input_tokens": int(self.input_tokens),
            "output_tokens": int(self.output_tokens),
            "reasoning_tokens": int(self.reasoning_tokens),
            "source": self.source,
        }
        if self.prompt_chars is not None:
            out["prompt_chars"] = int(self.prompt_chars)
        return out


@dataclass(frozen=True)
class Decision:
    """What a policy returns for one decision step.

    Attributes:
        action: the single authoritative SkillCall to execute.
        visible_state: optional free text in which the policy states what it sees; the
            FindSR rule reads it (sentence split + negation words). ``None`` means the
            policy makes no visibility claim.
        usage: one :class:`Usage` per real model call made for this decision, retries
            included. Empty for policies that call no model.
        extras: small JSON-serialisable annotations for logs and reports (goal text,
            verifier verdict, ...). Never read by the env or the metrics.
    """

    action: SkillCall
    visible_state: str | None = None
    usage: tuple[Usage, ...] = ()
    extras: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.action, SkillCall):
            raise TypeError(
                f"Decision.action must be a SkillCall, got {type(self.action).__name__}"
            )
        if self.visible_state is not None and not isinstance(self.visible_state, str):
            raise TypeError("Decision.visible_state must be a str or None")
        usage = tuple(self.usage)
        for item in usage:
            if not isinstance(item, Usage):
                raise TypeError(f"Decision.usage items must be Usage, got {type(item).__name__}")
        object.__setattr__(self, "usage", usage)


@runtime_checkable
class Policy(Protocol):
    """Anything that can drive the env: a VLM agent, a planner, a learned network.

    The episode loop (:func:`humanclaw_gym.evaluation.run_episode`) calls ``reset`` once per
    episode with the public episode info (the same mapping ``env.reset`` returns as
    ``info``), then ``act`` once per decision step with the current ego image and info.
    """

    def reset(self, episode_info: Mapping[str, Any]) -> None: ...

    def act(self, observation: np.ndarray, info: Mapping[str, Any]) -> Decision: ...


def estimate_tokens(text: str) -> int:
    """Character-based token estimate used when a provider reports no usage (chars / 4)."""
    return int(math.ceil(len(text) / 4.0))
