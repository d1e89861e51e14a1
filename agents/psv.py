"""The PSV reference agent (planner, skill, verifier), behaving as the reference release's.

One decision of :class:`PSVAgent` (the ``psv`` agent; ``psv:v2`` is the same):

1. **Planner** (always): one model call with the ego image and the ``v2`` prompt
   (:func:`~humanclaw_agents.prompts.render_planner_prompt_v2`): task, step count and the
   last ten (or more) :class:`~humanclaw_agents.prompts.HistoryRow` records. The reply is
   read by :func:`~humanclaw_agents.replies.read_reply_json` with the reference release's
   reader (``reply_reader="reference"``; ``--agent psv:tolerant`` reads with ours, which
   recovers and counts more think-tag forms, repairs and the like) and turned into a
   proposal by
   :func:`~humanclaw_agents.actions.action_from_reply`, which never fails.
2. **Turn-for-sit gate**: once the first flagged turn of a sit sequence was executed, later
   flagged turns lose their flag (no second verification); any other executed action
   (including a plain Turn) ends the sequence.
3. **Verifier** (routes of :func:`~humanclaw_agents.verifier.select_route_v2`): a second
   call with the same image that sees only the task, the proposal, the planner's
   ``additional_info`` and, after sitting, the recent actions. Its reply is read by
   :func:`~humanclaw_agents.verifier.read_verdict_v2` (an unreadable replacement keeps the
   proposal). Other proposals get an in-memory accept: no call, no file.
4. Only the final action is returned (and executed by the episode loop).

Failures: a stage retries transport errors and replies without a JSON object, at most
``max_attempts`` (5) calls, sleeping 1, 2, 4 and 8 s between them (``retry_backoff_s``,
through the injectable ``sleep``), or as long as a 429/503 answer's ``Retry-After`` asks
(at most ``max_retry_after_s``). A reply longer than ``max_reply_chars`` is a failed
attempt, unread. If the planner still fails, the agent executes
``Walk<forward><slow>`` without a verifier call; if the verifier still fails, the
planner's proposal is executed (fail-open).

The mid-level goal is tracked with a plan horizon of six steps, as the reference does: the
goal's age restarts when the goal text changes or six steps have passed. It is bookkeeping
(shown in the records and used as the goal of a planner-failure step), not a prompt input.

Files (when ``output_dir`` is given), one per logical stage and decision, with the
reference's names and its ``prompt`` / ``response`` / ``error`` fields plus ours:
``step{NNN}_percept_mid_low.json`` and ``step{NNN}_verifier.json`` (only when the verifier
was called). See ``docs/agents.md``.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from humanclaw_agents.actions import (
    action_from_fields,
    action_from_reply,
    action_text_v2,
    executed_action_text_v2,
)
from humanclaw_agents.prompts import (
    HistoryRow,
    render_planner_prompt_v2,
    resolve_prompt_version,
)
from humanclaw_agents.prompts_imagegoal import (
    DEFAULT_IMAGEGOAL_PROMPT,
    render_imagegoal_prompt,
)
from humanclaw_agents.psv_v1 import FALLBACK_ACTION, PSVAgentV1
from humanclaw_agents.replies import DEFAULT_MAX_REPLY_CHARS, READERS, read_reply_json
from humanclaw_agents.stages import (
    MAX_RETRY_AFTER_S,
    PLANNER_FILE,
    REFERENCE_BACKOFF_S,
    RETRY_CAUSES,
    VERIFIER_FILE,
    Parsed,
    StageAgent,
    StageOutcome,
    StageRunner,
    as_model,
    check_image,
    non_negative_int,
    tell_step,
    write_json_atomic,
)
from humanclaw_agents.transports import ChatModel
from humanclaw_agents.verifier import (
    VerifierVersionV2,
    read_verdict_v2,
    reference_flag,
    render_verifier_prompt_v2,
    resolve_verifier_version,
    select_route_v2,
)
from humanclaw_gym.policy import Decision
from humanclaw_gym.skills import Skill, SkillCall

__all__ = [
    "FALLBACK_ACTION",
    "MIN_HISTORY",
    "PLANNER_FILE",
    "PSV_VARIANTS",
    "VERIFIER_FILE",
    "PSVAgent",
    "PSVAgentV1",
    "action_from_fields",
    "action_from_reply",
    "make_psv_agent",
    "visible_state_text",
]

PSV_VARIANTS: dict[str, str] = {
    "v2": "the reference release's behaviour (default; prompt v2, verifier v2)",
    "tolerant": "v2 reading replies with our tolerant reader (more think tags, repairs)",
    "v1": "our first agent, kept unchanged for reproducibility (prompt v1, verifier v1)",
}
"""Agent variants selectable as ``--agent psv:VARIANT``."""

MIN_HISTORY = 10
"""The reference keeps at least ten history records; smaller ``history_size`` is refused."""

_RECORD_SCHEMA = "humanclaw_agents.stage_record/v2"
_PLANNER_STAGE = "planner"
_VERIFIER_STAGE = "verifier"
_PLAN_HORIZON_STEPS = 6
_FINISHED_GOAL = "Stop/Stand"
_V2_PROMPTS = frozenset({"v2"})
# Verifier routes that judge the lane on the current picture alone, whatever the task: an
# image-goal decision is verified on these only (the Stop and sitting routes ask about an
# object target).
_IMAGEGOAL_ROUTES = frozenset({"walk", "climb_up"})


class PSVAgent(StageAgent):
    """The reference PSV agent implementing the :class:`~humanclaw_gym.policy.Policy`
    protocol (``--agent psv``).

    Args:
        model: a :class:`~humanclaw_agents.transports.ChatModel`, a model config object, or
            the path of a JSON model config (then the transport is built from it).
        output_dir: where the per-stage JSON records go; ``None`` writes nothing (the
            episode loop's ``output_dir`` in the episode info replaces it).
        prompt_version: planner prompt version (``"v2"``).
        verifier_version: verifier version (``"v2"``).
        max_attempts: real model calls per stage and decision (>= 1; the reference's 5).
        history_size: history records shown to the planner (>= 10, the reference's
            minimum; default 10).
        plan_horizon_steps: steps after which the mid-level goal's age restarts (>= 1).
        retry_backoff_s: seconds slept after failed attempt 1, 2, 3, 4 (the last value
            repeats); ``()`` retries at once.
        sleep: called with the seconds to wait (default ``time.sleep``).
        reply_reader: ``"reference"`` (the reference release's reader, default) or
            ``"tolerant"`` (see :mod:`humanclaw_agents.replies`).
        max_reply_chars: longer replies are failed attempts, unread (``None``: no limit).
        max_retry_after_s: the longest ``Retry-After`` of a 429/503 answer honoured.

    Raises:
        ValueError: an unknown or v1 version, an unknown reader, or an out-of-range count.
    """

    def __init__(
        self,
        model: ChatModel | Any,
        output_dir: str | os.PathLike[str] | None = None,
        prompt_version: str = "v2",
        verifier_version: str = "v2",
        max_attempts: int = 5,
        history_size: int = MIN_HISTORY,
        plan_horizon_steps: int = _PLAN_HORIZON_STEPS,
        retry_backoff_s: Sequence[float] = REFERENCE_BACKOFF_S,
        sleep: Callable[[float], Any] | None = None,
        reply_reader: str = "reference",
        max_reply_chars: int | None = DEFAULT_MAX_REPLY_CHARS,
        max_retry_after_s: float = MAX_RETRY_AFTER_S,
    ) -> None:
        if reply_reader not in READERS:
            raise ValueError(f"reply_reader={reply_reader!r} is invalid: allowed one of {READERS}")
        resolve_prompt_version(prompt_version)
        if prompt_version not in _V2_PROMPTS:
            raise ValueError(
                f"prompt_version={prompt_version!r} is not a v2 prompt: allowed one of "
                f"{sorted(_V2_PROMPTS)} (the v1 prompt runs in PSVAgentV1, --agent psv:v1)"
            )
        if not isinstance(resolve_verifier_version(verifier_version), VerifierVersionV2):
            raise ValueError(
                f"verifier_version={verifier_version!r} is not a v2 verifier (the v1 verifier "
                "runs in PSVAgentV1, --agent psv:v1)"
            )
        _check_int("history_size", history_size, MIN_HISTORY)
        _check_int("plan_horizon_steps", plan_horizon_steps, 1)
        self._runner = StageRunner(
            as_model(model),
            max_attempts,
            retry_backoff_s,
            sleep,
            max_retry_after_s=max_retry_after_s,
            max_reply_chars=max_reply_chars,
        )
        self.model = self._runner.model
        self.reply_reader = reply_reader
        self.output_dir = Path(output_dir) if output_dir is not None else None
        self.prompt_version = prompt_version
        self.verifier_version = verifier_version
        self.max_attempts = max_attempts
        self.history_size = history_size
        self.plan_horizon_steps = plan_horizon_steps
        self._rows: deque[HistoryRow] = deque(maxlen=history_size)
        self._executed: deque[str] = deque(maxlen=history_size)
        self._instruction: str | None = None
        self._turn_for_sit_verified = False
        self._current_plan: str | None = None
        self._plan_age = 0
        self._step_counter = 0

    # ---- state views ---------------------------------------------------------------------

    @property
    def history(self) -> tuple[HistoryRow, ...]:
        """The history records the next planner prompt will show, oldest first."""
        return tuple(self._rows)

    @property
    def turn_for_sit_active(self) -> bool:
        """True after a flagged turn of a sit sequence was executed (later flagged turns of
        the sequence are not verified)."""
        return self._turn_for_sit_verified

    @property
    def current_plan(self) -> tuple[str | None, int]:
        """The tracked mid-level goal and its age in steps."""
        return self._current_plan, self._plan_age

    # ---- Policy protocol -----------------------------------------------------------------

    def reset(self, episode_info: Mapping[str, Any]) -> None:
        """Start a new episode: clear history, plan and turn-for-sit state."""
        self._rows.clear()
        self._executed.clear()
        self._turn_for_sit_verified = False
        self._current_plan = None
        self._plan_age = 0
        self._step_counter = 0
        info = episode_info if isinstance(episode_info, Mapping) else {}
        instruction = info.get("instruction")
        self._instruction = instruction if isinstance(instruction, str) else None
        out = info.get("output_dir")
        if out is not None:
            self.output_dir = Path(out)

    def act(self, observation: np.ndarray, info: Mapping[str, Any]) -> Decision:
        """Plan, maybe verify, and return the one action to execute.

        Args:
            observation: the ego image, ``uint8 (H, W, 3)`` (448x448 in the benchmark).
            info: the env's public info (``instruction``, ``step``, ...).

        Returns:
            The Decision: final action, the planner's ``visible_state``, one Usage per real
            model call (retries included) and extras: ``mid_level_goal``, ``verifier``
            (``"accept"``, ``"replace"``, ``"skipped"`` after a planner failure,
            ``"failed_open"``), ``verifier_called``, ``verifier_route``, ``proposed``, the
            attempt counts, ``retries`` by cause, ``reply_recoveries`` and, when a call
            raised, ``failed_calls``.
        """
        goal_image = _goal_image(observation)  # image-goal navigation: Dict(rgb, goal_rgb)
        image = check_image(observation if goal_image is None else observation["rgb"])
        info = info if isinstance(info, Mapping) else {}
        instruction = info.get("instruction") or self._instruction
        if not isinstance(instruction, str) or not instruction.strip():
            raise ValueError(
                "PSVAgent needs the task text: info['instruction'] (or the episode info given "
                f"to reset) must be a non-empty string, got {instruction!r}"
            )
        self._instruction = instruction
        step = non_negative_int(info.get("step"), self._step_counter)
        self._step_counter = step + 1
        tell_step(self.model, step)

        if goal_image is None:
            prompt_version = self.prompt_version
            prompt = render_planner_prompt_v2(
                instruction, step, tuple(self._rows), version=self.prompt_version
            )
            planner_images: Any = image
        else:
            prompt_version = DEFAULT_IMAGEGOAL_PROMPT
            prompt = render_imagegoal_prompt(instruction, step, tuple(self._rows))
            planner_images = _both_images(self.model, image, goal_image)
        planner = self._runner.run(_PLANNER_STAGE, prompt, planner_images, self._parse_plan)
        if planner.failed:
            plan = self._fallback_plan()
            proposal, notes = FALLBACK_ACTION, []
        else:
            plan = planner.data or {}
            proposal, notes = planner.value
        self._apply_plan(plan)

        additional_info = plan.get("additional_info")
        additional_info = dict(additional_info) if isinstance(additional_info, Mapping) else {}
        turn_for_sit = proposal.skill is Skill.TURN and reference_flag(
            additional_info, "turn_for_sit"
        )
        gate = "not_requested"
        if turn_for_sit and self._turn_for_sit_verified:
            additional_info.pop("turn_for_sit", None)
            gate = "skipped_after_first_verified_turn"
        elif turn_for_sit:
            gate = "verify_first_turn"

        planner_record: dict[str, Any] = {
            "prompt_version": prompt_version,
            "prompt": prompt,
            "response": planner.final_text if planner.failed else planner.data,
            "attempts": planner.attempts,
            "retries": planner.retries,
            "recoveries": dict.fromkeys(planner.recoveries, 1),
            "proposed_action": str(proposal),
            "turn_for_sit_gate": gate,
            "plan": {"goal": self._current_plan, "age": self._plan_age},
        }
        if notes:
            planner_record["adjustments"] = list(notes)
        if planner.failed:
            planner_record["error"] = planner.error
            planner_record["fallback_action"] = str(FALLBACK_ACTION)
        if planner.failed_calls:
            planner_record["failed_calls"] = planner.failed_calls
        self._write(PLANNER_FILE, step, "percept_mid_low", planner_record)

        route = None if planner.failed else select_route_v2(proposal, additional_info)
        if goal_image is not None and route not in _IMAGEGOAL_ROUTES:
            route = None  # the other routes judge an object target
        final = proposal
        verdict = "skipped" if planner.failed else "accept"
        reply_verdict = ""
        reason = ""
        outcomes: list[StageOutcome] = [planner]
        if route is not None:
            verifier_prompt = render_verifier_prompt_v2(
                route,
                instruction=instruction,
                proposal=proposal,
                additional_info=additional_info,
                recent_actions=tuple(self._executed),
                version=self.verifier_version,
            )
            verifier = self._runner.run(
                _VERIFIER_STAGE, verifier_prompt, image, self._parse_verifier
            )
            outcomes.append(verifier)
            record: dict[str, Any] = {
                "verifier_version": self.verifier_version,
                "route": route,
                "prompt": verifier_prompt,
                "response": verifier.final_text if verifier.failed else verifier.data,
                "attempts": verifier.attempts,
                "retries": verifier.retries,
                "recoveries": dict.fromkeys(verifier.recoveries, 1),
                "proposed_action": str(proposal),
            }
            if verifier.failed:
                verdict = "failed_open"
                record["error"] = verifier.error
            else:
                read = read_verdict_v2(verifier.data or {}, proposal)
                verdict, final, reason = read.verdict, read.final, read.reason
                reply_verdict = str((verifier.data or {}).get("verdict") or "").strip().lower()
                record["reply_verdict"] = reply_verdict or None
                if read.notes:
                    record["notes"] = list(read.notes)
            if verifier.failed_calls:
                record["failed_calls"] = verifier.failed_calls
            record["verdict"] = verdict
            record["final_action"] = str(final)
            self._write(VERIFIER_FILE, step, "verifier", record)

        self._turn_for_sit_verified = turn_for_sit and final.skill is Skill.TURN
        if self._current_plan:
            self._plan_age += 1
        self._remember(step, plan, proposal, final, reply_verdict, reason)

        usage = tuple(u for outcome in outcomes for u in outcome.usage)
        extras: dict[str, Any] = {
            "agent_variant": "v2",
            "mid_level_goal": self._current_plan,
            "verifier": verdict,
            "verifier_called": route is not None,
            "verifier_route": route,
            "proposed": str(proposal),
            "planner_attempts": planner.attempts,
            "verifier_attempts": outcomes[1].attempts if len(outcomes) > 1 else 0,
            "retries": {
                cause: sum(outcome.retries[cause] for outcome in outcomes) for cause in RETRY_CAUSES
            },
            "reply_recoveries": sorted({name for o in outcomes for name in o.recoveries}),
        }
        failed_calls = [entry for outcome in outcomes for entry in outcome.failed_calls]
        if failed_calls:
            extras["failed_calls"] = failed_calls
        return Decision(
            action=final,
            visible_state=visible_state_text(plan),
            usage=usage,
            extras=extras,
        )

    # ---- state ---------------------------------------------------------------------------

    def _fallback_plan(self) -> dict[str, Any]:
        """The planner fields recorded in history for a step whose planner failed."""
        return {
            "visible_state": "",
            "mid_level_progress_analysis": (
                f"The planner gave no usable reply in {self.max_attempts} attempts; take one "
                "short step forward and plan again from the next picture."
            ),
            "mid_level_goal": self._current_plan or "Keep working towards the task.",
            "low_level_action_reasoning": "Recovery action after the planner's retries ran out.",
            "action_id": int(FALLBACK_ACTION.skill),
            "action_name": str(FALLBACK_ACTION),
            "additional_info": {"fallback": "walk_slow_after_retries"},
        }

    def _apply_plan(self, plan: Mapping[str, Any]) -> None:
        """Track the mid-level goal: a new text or an expired horizon restarts its age."""
        goal = str(plan.get("mid_level_goal") or self._current_plan or "").strip()
        goal = goal or _FINISHED_GOAL
        if (
            self._current_plan is None
            or goal != self._current_plan
            or self._plan_age >= self.plan_horizon_steps
        ):
            self._current_plan = goal
            self._plan_age = 0

    def _remember(
        self,
        step: int,
        plan: Mapping[str, Any],
        proposal: SkillCall,
        final: SkillCall,
        reply_verdict: str,
        reason: str,
    ) -> None:
        rejection = None
        if reply_verdict == "replace":
            rejection = f"Verifier replaced {action_text_v2(proposal)} with {action_text_v2(final)}"
            if reason.strip():
                rejection += f" because {reason.strip()}"
        self._rows.append(
            HistoryRow(
                step=step,
                visible_state=_as_text(plan.get("visible_state")),
                mid_level_progress_analysis=_as_text(plan.get("mid_level_progress_analysis")),
                mid_level_goal=_as_text(plan.get("mid_level_goal")),
                low_level_action_reasoning=_as_text(plan.get("low_level_action_reasoning")),
                action_name=str(plan.get("action_name") or executed_action_text_v2(final)).strip(),
                verifier_rejection=rejection,
            )
        )
        self._executed.append(executed_action_text_v2(final))

    def _write(self, pattern: str, step: int, stage: str, record: dict[str, Any]) -> None:
        if self.output_dir is None:
            return
        data = {"schema": _RECORD_SCHEMA, "stage": stage, "step": step, **record}
        write_json_atomic(self.output_dir / pattern.format(step=step), data)

    # ---- reply parsing -------------------------------------------------------------------

    def _parse_plan(self, text: str) -> Parsed:
        reply = read_reply_json(text, reader=self.reply_reader, max_chars=None)
        data = reply.data
        return Parsed(
            data,
            action_from_reply(data.get("action_id"), data.get("action_name")),
            reply.recoveries,
        )

    def _parse_verifier(self, text: str) -> Parsed:
        reply = read_reply_json(text, reader=self.reply_reader, max_chars=None)
        return Parsed(reply.data, reply.data, reply.recoveries)


# ---- helpers -----------------------------------------------------------------------------------


def _as_text(value: Any) -> str:
    """A planner field as history text: any falsy value (``None``, ``0``, ``false``, ``[]``)
    is empty, anything else its ``str``, stripped."""
    return str(value or "").strip()


def visible_state_text(plan: Mapping[str, Any]) -> str | None:
    """The planner's ``visible_state`` as the text the FindSR rule reads: ``str()`` of any
    truthy JSON value (a list or object is read as its Python text, as the reference
    does), ``None`` when the field is absent or falsy."""
    return str(plan.get("visible_state") or "") or None


def _goal_image(observation: Any) -> np.ndarray | None:
    """The goal picture of an image-goal observation (a mapping with ``"goal_rgb"``), else
    None."""
    if isinstance(observation, Mapping) and "goal_rgb" in observation:
        if "rgb" not in observation:
            raise ValueError(
                "PSVAgent: an image-goal observation needs 'rgb' beside 'goal_rgb', got keys "
                f"{sorted(observation)}"
            )
        return check_image(observation["goal_rgb"])
    return None


def _both_images(model: Any, image: np.ndarray, goal: np.ndarray) -> tuple[np.ndarray, ...]:
    """The current and the goal picture for one call, refused at once (not retried) when
    the transport sends one picture per call."""
    if not getattr(model, "multi_image", False):
        raise ValueError(
            f"PSVAgent: image-goal navigation sends two pictures per call, but the model "
            f"transport {type(model).__name__} sends one (multi_image is not set); use an "
            "OpenAI-compatible endpoint"
        )
    return (image, goal)


def _check_int(name: str, value: Any, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name}={value!r} is invalid: allowed an int >= {low}")


def make_psv_agent(
    model_config: str | os.PathLike[str], seed: int = 0, variant: str = "v2"
) -> PSVAgent | PSVAgentV1:
    """Entry-point factory for ``--agent psv`` and ``--agent psv:VARIANT``.

    Args:
        model_config: path of a JSON model config (``--model-config``).
        seed: accepted for interface uniformity; the agent is deterministic given the
            model's replies.
        variant: a key of :data:`PSV_VARIANTS` (``"v2"``, the default, ``"tolerant"`` or
            ``"v1"``).

    Raises:
        ValueError: an unknown variant, naming the known ones.
    """
    del seed
    if variant == "v2":
        return PSVAgent(model=Path(model_config))
    if variant == "tolerant":
        return PSVAgent(model=Path(model_config), reply_reader="tolerant")
    if variant == "v1":
        return PSVAgentV1(model=Path(model_config))
    raise ValueError(
        f"psv variant {variant!r} is unknown: allowed one of {sorted(PSV_VARIANTS)} "
        "(--agent psv, --agent psv:tolerant or --agent psv:v1)"
    )
