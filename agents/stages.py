"""What both PSV agent variants share: one logical model stage with retries, and its files.

A *stage* is one logical model call of a decision (``"planner"`` or ``"verifier"``).
:class:`StageRunner` makes up to ``max_attempts`` real calls at the same state until the
stage's ``parse`` function accepts a reply, sleeping between failed attempts according to a
back-off schedule. It keeps the books the step records and the cost metrics need:

* one :class:`~humanclaw_gym.policy.Usage` per real call, retries included (a call that
  raised gets zeros with ``source="none"`` and its ``prompt_chars``, which the ``paper``
  metric rules charge as characters / 4 input tokens);
* one *failed call* entry per call that raised (``stage``, ``attempt``, ``prompt_chars``,
  ``estimated_input_tokens`` = prompt characters / 4 rounded up, ``error``), so that a
  metric rule charging failed calls by their prompt length (the reference release does)
  can be applied without the prompt text;
* retries by cause: ``transport`` (the call raised), ``extraction`` (no JSON object in the
  reply), ``invalid_reply`` (an object, but not one the stage can use);
* the recoveries :func:`~humanclaw_agents.replies.read_reply_json` needed for the accepted
  reply.

Sleeping goes through an injectable ``sleep`` callable (``time.sleep`` by default), so
tests can check the schedule without waiting. A provider that answers 429 or 503 with
``Retry-After`` (a :class:`~humanclaw_agents.transports.ModelCallError` whose
``retry_after_s`` is set) is waited for at least that long, at most
``max_retry_after_s`` (:data:`MAX_RETRY_AFTER_S`), instead of the schedule's delay when
that is shorter. A reply longer than ``max_reply_chars`` is a failed attempt
(``extraction``) without being read.

While it waits before another attempt, the runner says so on the run's progress bar
(:func:`humanclaw_gym.evaluation.status.report_status`): the stage, the attempt that
failed, the wait and the cause; the line is cleared when the stage ends.
:meth:`StageRunner.preflight` asks the transport for its preflight check, if it has one.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from humanclaw_agents.replies import (
    DEFAULT_MAX_REPLY_CHARS,
    ReplyExtractionError,
    ResponseFormatError,
)
from humanclaw_agents.transports import ChatModel
from humanclaw_gym import fileio
from humanclaw_gym.evaluation.status import report_status
from humanclaw_gym.policy import Usage, estimate_tokens
from humanclaw_gym.skills import SkillCallError

__all__ = [
    "MAX_RETRY_AFTER_S",
    "PLANNER_FILE",
    "REFERENCE_BACKOFF_S",
    "RETRY_CAUSES",
    "VERIFIER_FILE",
    "Parsed",
    "StageAgent",
    "StageOutcome",
    "StageRunner",
    "as_model",
    "check_image",
    "write_json_atomic",
]

PLANNER_FILE = "step{step:03d}_percept_mid_low.json"
"""Name of a decision's planner record (the reference release's name)."""
VERIFIER_FILE = "step{step:03d}_verifier.json"
"""Name of a decision's verifier record, written only when the verifier was called."""

REFERENCE_BACKOFF_S: tuple[float, ...] = (1.0, 2.0, 4.0, 8.0)
"""Seconds slept after failed attempts 1, 2, 3 and 4 of a stage (the reference's schedule)."""

MAX_RETRY_AFTER_S = 60.0
"""The longest ``Retry-After`` a stage waits for (a longer one is cut to this)."""

RETRY_CAUSES: tuple[str, ...] = ("transport", "extraction", "invalid_reply")
"""Why an attempt failed: the call raised, no JSON object in the reply, an unusable object."""


@dataclass(frozen=True)
class Parsed:
    """What a stage's ``parse`` function made of one reply.

    Attributes:
        data: the JSON object read from the reply.
        value: the stage's result (a proposal, a verdict...).
        recoveries: recovery names from the reply reader (empty for the v1 reader).
    """

    data: dict[str, Any]
    value: Any
    recoveries: tuple[str, ...] = ()


@dataclass
class StageOutcome:
    """One stage after all its attempts.

    Attributes:
        value: the accepted :attr:`Parsed.value`, or ``None`` when every attempt failed.
        data: the accepted reply's JSON object, or ``None``.
        final_text: the text of the final attempt's reply (``""`` when that call raised);
            the reference writes it as the record's ``response`` when every attempt failed.
        attempts: real calls made.
        usage: one Usage per call.
        error: the last attempt's error when every attempt failed, else ``None``.
        retries: failed attempts by cause (:data:`RETRY_CAUSES`).
        recoveries: recoveries needed to read the accepted reply.
        failed_calls: one entry per call that raised (see the module docstring).
    """

    value: Any
    data: dict[str, Any] | None
    final_text: str
    attempts: int
    usage: list[Usage]
    error: str | None
    retries: dict[str, int] = field(default_factory=lambda: dict.fromkeys(RETRY_CAUSES, 0))
    recoveries: tuple[str, ...] = ()
    failed_calls: list[dict[str, Any]] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        """True when no attempt gave a usable reply."""
        return self.error is not None


class StageRunner:
    """Runs one stage with retries and back-off.

    Args:
        model: the transport.
        max_attempts: real calls per stage and decision (>= 1).
        backoff_s: seconds slept after failed attempt ``i`` (1-based) is
            ``backoff_s[min(i, len) - 1]``; nothing is slept after the last attempt or when
            the tuple is empty.
        sleep: called with the seconds to wait (``time.sleep`` by default).
        max_retry_after_s: the longest ``Retry-After`` honoured (seconds, finite, >= 0).
        max_reply_chars: longer replies are failed attempts, unread (``None``: no limit).

    Raises:
        ValueError: ``max_attempts`` < 1, a negative / non-finite back-off or maximum.
    """

    def __init__(
        self,
        model: ChatModel,
        max_attempts: int,
        backoff_s: Sequence[float] = (),
        sleep: Callable[[float], Any] | None = None,
        max_retry_after_s: float = MAX_RETRY_AFTER_S,
        max_reply_chars: int | None = DEFAULT_MAX_REPLY_CHARS,
    ) -> None:
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
            raise ValueError(f"max_attempts={max_attempts!r} is invalid: allowed an int >= 1")
        schedule = tuple(backoff_s)
        for value in schedule:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            if not ok or not np.isfinite(value) or value < 0:
                raise ValueError(
                    f"retry_backoff_s={schedule!r} is invalid: allowed finite seconds >= 0"
                )
        if sleep is not None and not callable(sleep):
            raise TypeError(f"sleep must be callable, got {type(sleep).__name__}")
        ok = isinstance(max_retry_after_s, (int, float)) and not isinstance(max_retry_after_s, bool)
        if not ok or not np.isfinite(max_retry_after_s) or max_retry_after_s < 0:
            raise ValueError(
                f"max_retry_after_s={max_retry_after_s!r} is invalid: allowed finite seconds >= 0"
            )
        if max_reply_chars is not None and (
            isinstance(max_reply_chars, bool)
            or not isinstance(max_reply_chars, int)
            or max_reply_chars < 1
        ):
            raise ValueError(
                f"max_reply_chars={max_reply_chars!r} is invalid: allowed an int >= 1 or None"
            )
        self.model = model
        self.max_attempts = max_attempts
        self.backoff_s = tuple(float(value) for value in schedule)
        self.sleep = time.sleep if sleep is None else sleep
        self.max_retry_after_s = float(max_retry_after_s)
        self.max_reply_chars = max_reply_chars

    def run(
        self,
        stage: str,
        prompt: str,
        image: np.ndarray,
        parse: Callable[[str], Parsed],
    ) -> StageOutcome:
        """Call the model until ``parse`` accepts a reply or the attempts run out.

        ``parse`` raises :class:`~humanclaw_agents.replies.ReplyExtractionError` for a reply
        without a JSON object, and another
        :class:`~humanclaw_agents.replies.ResponseFormatError` (or a ``SkillCallError``)
        for an object the stage cannot use; both mean another attempt.
        """
        outcome = StageOutcome(None, None, "", 0, [], None)
        try:
            return self._run(stage, prompt, image, parse, outcome)
        finally:
            if outcome.attempts > 1:
                report_status("")  # the waits of this stage are over

    def preflight(self) -> None:
        """Run the transport's ``preflight()`` check once, if it has one (it raises a
        :class:`~humanclaw_agents.transports.ModelCallError` naming the endpoint and the
        cause). No usage is recorded: the check belongs to no decision."""
        check = getattr(self.model, "preflight", None)
        if callable(check):
            check()

    def close(self) -> None:
        """Close the transport's connections, if it has a ``close()``."""
        close = getattr(self.model, "close", None)
        if callable(close):
            close()

    def _run(
        self,
        stage: str,
        prompt: str,
        image: np.ndarray,
        parse: Callable[[str], Parsed],
        outcome: StageOutcome,
    ) -> StageOutcome:
        for attempt in range(1, self.max_attempts + 1):
            outcome.attempts = attempt
            try:
                reply = self.model.respond(prompt, image, stage)
            except Exception as exc:  # noqa: BLE001 - any provider failure is one failed attempt
                outcome.usage.append(
                    Usage(stage=stage, attempt=attempt, source="none", prompt_chars=len(prompt))
                )
                outcome.error = f"attempt {attempt}: {type(exc).__name__}: {exc}"
                outcome.final_text = ""
                outcome.retries["transport"] += 1
                outcome.failed_calls.append(
                    {
                        "stage": stage,
                        "attempt": attempt,
                        "prompt_chars": len(prompt),
                        "estimated_input_tokens": estimate_tokens(prompt),
                        "error": f"{type(exc).__name__}: {exc}",
                    }
                )
                self._back_off(
                    stage,
                    attempt,
                    str(exc) or type(exc).__name__,
                    getattr(exc, "retry_after_s", None),
                )
                continue
            outcome.usage.append(_stamp_usage(reply, prompt, stage, attempt))
            text = getattr(reply, "text", reply)
            outcome.final_text = text if isinstance(text, str) else ""
            try:
                if (
                    self.max_reply_chars is not None
                    and isinstance(text, str)
                    and len(text) > self.max_reply_chars
                ):
                    outcome.final_text = text[: self.max_reply_chars]
                    raise ReplyExtractionError(
                        f"reply of {len(text)} characters is longer than max_reply_chars="
                        f"{self.max_reply_chars}; refused unread"
                    )
                parsed = parse(text)
            except ReplyExtractionError as exc:
                outcome.error = f"attempt {attempt}: {type(exc).__name__}: {exc}"
                outcome.retries["extraction"] += 1
                self._back_off(stage, attempt, "no JSON object in the reply")
                continue
            except (ResponseFormatError, SkillCallError) as exc:
                outcome.error = f"attempt {attempt}: {type(exc).__name__}: {exc}"
                outcome.retries["invalid_reply"] += 1
                self._back_off(stage, attempt, "a reply the stage cannot use")
                continue
            outcome.value = parsed.value
            outcome.data = parsed.data
            outcome.recoveries = tuple(parsed.recoveries)
            outcome.error = None
            return outcome
        return outcome

    def _back_off(
        self, stage: str, attempt: int, cause: str, retry_after_s: float | None = None
    ) -> None:
        if attempt >= self.max_attempts:
            return
        delay = self.backoff_s[min(attempt, len(self.backoff_s)) - 1] if self.backoff_s else 0.0
        if retry_after_s is not None:  # the provider said when to come back
            delay = max(delay, min(float(retry_after_s), self.max_retry_after_s))
        report_status(
            f"{stage} attempt {attempt}/{self.max_attempts} failed, retrying in {delay:g} s: "
            + _one_line(cause, _STATUS_CAUSE_CHARS)
        )
        if delay > 0:
            self.sleep(delay)


# ---- shared helpers ----------------------------------------------------------------------------

_STATUS_CAUSE_CHARS = 160


class StageAgent:
    """What both PSV agents do alike with their :class:`StageRunner` (``self._runner``):
    the endpoint preflight, closing the transport, and a ``repr`` naming the model and the
    prompt and verifier versions."""

    _runner: StageRunner
    model: ChatModel
    prompt_version: str
    verifier_version: str

    def preflight(self) -> None:
        """Check once, before the first episode, that the model endpoint answers this
        config (the batch runner calls it; see ``docs/policies.md``). One cheap request
        for an OpenAI-compatible endpoint, a write check for a queue; no usage is recorded.

        Raises:
            ModelCallError: one line naming the endpoint and the cause.
        """
        self._runner.preflight()

    def close(self) -> None:
        """Close the model transport's connections (the agent cannot call it afterwards)."""
        self._runner.close()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(model={self.model!r}, "
            f"prompt_version={self.prompt_version!r}, "
            f"verifier_version={self.verifier_version!r})"
        )


def _one_line(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def write_json_atomic(path: Path, data: Mapping[str, Any]) -> None:
    """Write ``data`` as indented JSON through a temporary file and a rename."""
    fileio.write_json_atomic(path, data, ensure_ascii=False)


def as_model(model: Any) -> ChatModel:
    """A ChatModel from a ChatModel, a model config object or a model config path."""
    from humanclaw_agents.model_config import MODEL_CONFIG_TYPES, load_model_config
    from humanclaw_agents.transports import build_model

    if isinstance(model, (str, os.PathLike)):
        return build_model(load_model_config(model))
    if isinstance(model, MODEL_CONFIG_TYPES):
        return build_model(model)
    if not callable(getattr(model, "respond", None)):
        raise TypeError(
            "PSVAgent model must be a ChatModel (with respond(prompt, image_rgb, stage)), a "
            f"model config or a model config path; got {type(model).__name__}"
        )
    return model


def check_image(observation: Any) -> np.ndarray:
    """The observation as a ``uint8 (H, W, 3)`` array, or a ValueError naming what it is."""
    image = np.asarray(observation)
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
        raise ValueError(
            "PSVAgent observation must be a uint8 RGB image of shape (H, W, 3) "
            f"(448x448 in the benchmark), got dtype {image.dtype} and shape {image.shape}"
        )
    return image


def tell_step(model: Any, step: int) -> None:
    """Let a transport that files requests by step (``current_episode_step``) know it."""
    if hasattr(model, "current_episode_step"):
        try:
            model.current_episode_step = int(step)
        except (AttributeError, TypeError):  # a read-only attribute: nothing to tell
            pass


def _stamp_usage(reply: Any, prompt: str, stage: str, attempt: int) -> Usage:
    usage = getattr(reply, "usage", None)
    if isinstance(usage, Usage):
        return replace(usage, stage=stage, attempt=attempt)
    text = getattr(reply, "text", reply)
    return Usage(
        stage=stage,
        attempt=attempt,
        input_tokens=estimate_tokens(prompt),
        output_tokens=estimate_tokens(text if isinstance(text, str) else ""),
        source="estimated_chars_div_4",
    )


def text_field(value: Any) -> str:
    """A reply field as one line of text ("" when it is not a string)."""
    return " ".join(str(value).split()) if isinstance(value, str) else ""


def non_negative_int(value: Any, default: int) -> int:
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= 0:
        return int(value)
    return default


def positive_int(value: Any, default: int) -> int:
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value > 0:
        return int(value)
    return default
