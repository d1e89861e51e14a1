"""The first PSV agent, kept as the ``psv:v1`` variant so that earlier results reproduce.

Its behaviour is frozen: prompt ``v1`` (task, "decision N of at most M", a short history of
executed actions and goals, stop about 20 cm from the target), verifier ``v1`` (sees the
planner's text and history; Stop after any Sit is checked; Stop/Sit allowed as
replacements; an unreadable replacement is retried), strict action reading
(:func:`~humanclaw_agents.actions.action_from_fields`, invalid replies are retried),
:func:`~humanclaw_agents.prompts.extract_json_object` for replies, and immediate retries.
The default agent is :class:`humanclaw_agents.psv.PSVAgent`; ``docs/agents.md`` compares
the two with the reference release.

Files (when ``output_dir`` is given), one per logical stage and decision:
``step{NNN}_percept_mid_low.json`` and ``step{NNN}_verifier.json`` (only when the verifier
was called), each with the prompt, the final parsed reply, the number of attempts and an
``error`` field only when every attempt failed.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from humanclaw_agents.actions import action_from_fields
from humanclaw_agents.prompts import (
    HistoryItem,
    ResponseFormatError,
    extract_json_object,
    render_planner_prompt,
    resolve_prompt_version,
)
from humanclaw_agents.replies import DEFAULT_MAX_REPLY_CHARS
from humanclaw_agents.stages import (
    MAX_RETRY_AFTER_S,
    PLANNER_FILE,
    VERIFIER_FILE,
    Parsed,
    StageAgent,
    StageOutcome,
    StageRunner,
    as_model,
    check_image,
    non_negative_int,
    positive_int,
    tell_step,
    text_field,
    write_json_atomic,
)
from humanclaw_agents.transports import ChatModel
from humanclaw_agents.verifier import (
    check_replacement,
    info_flag,
    parse_verdict,
    render_verifier_prompt,
    resolve_verifier_version,
    select_route,
)
from humanclaw_gym.policy import Decision
from humanclaw_gym.skills import Skill, SkillCall

__all__ = ["FALLBACK_ACTION", "PSVAgentV1"]

FALLBACK_ACTION = SkillCall.walk("slow")
"""Executed when the planner fails every attempt of a decision."""

_RECORD_SCHEMA = "humanclaw_agents.stage_record/v1"
_PLANNER_STAGE = "planner"
_VERIFIER_STAGE = "verifier"
_DEFAULT_MAX_STEPS = 100
_V1_PROMPTS = frozenset({"v1"})
_V1_VERIFIERS = frozenset({"v1"})


class PSVAgentV1(StageAgent):
    """Our first PSV agent (``--agent psv:v1``), kept unchanged so that earlier results
    reproduce. :class:`~humanclaw_agents.psv.PSVAgent` is the default, reference-faithful
    agent; ``docs/agents.md`` lists every difference.

    Args:
        model: a :class:`~humanclaw_agents.transports.ChatModel`, a model config object, or
            the path of a JSON model config (then the transport is built from it).
        output_dir: where the per-stage JSON records go; ``None`` writes nothing.
        prompt_version: planner prompt version (:data:`~humanclaw_agents.prompts.PLANNER_PROMPTS`).
        verifier_version: verifier version (:data:`~humanclaw_agents.verifier.VERIFIER_VERSIONS`).
        max_attempts: model calls per stage and decision before giving up (>= 1).
        history_size: semantic history items kept for the prompt (>= 0).
        max_reply_chars: longer replies are failed attempts, unread (``None``: no limit).
        max_retry_after_s: the longest ``Retry-After`` of a 429/503 answer waited for
            (retries are otherwise immediate).

    Raises:
        ValueError: unknown versions or out-of-range counts.
    """

    def __init__(
        self,
        model: ChatModel | Any,
        output_dir: str | os.PathLike[str] | None = None,
        prompt_version: str = "v1",
        verifier_version: str = "v1",
        max_attempts: int = 5,
        history_size: int = 10,
        max_reply_chars: int | None = DEFAULT_MAX_REPLY_CHARS,
        max_retry_after_s: float = MAX_RETRY_AFTER_S,
    ) -> None:
        resolve_prompt_version(prompt_version)
        resolve_verifier_version(verifier_version)
        if prompt_version not in _V1_PROMPTS or verifier_version not in _V1_VERIFIERS:
            raise ValueError(
                f"PSVAgentV1 runs prompt_version in {sorted(_V1_PROMPTS)} and verifier_version "
                f"in {sorted(_V1_VERIFIERS)}, got {prompt_version!r} / {verifier_version!r} "
                "(use PSVAgent for the v2 prompts)"
            )
        if isinstance(history_size, bool) or not isinstance(history_size, int) or history_size < 0:
            raise ValueError(f"history_size={history_size!r} is invalid: allowed an int >= 0")
        self._runner = StageRunner(
            as_model(model),
            max_attempts,
            max_retry_after_s=max_retry_after_s,
            max_reply_chars=max_reply_chars,
        )
        self.model = self._runner.model
        self.output_dir = Path(output_dir) if output_dir is not None else None
        self.prompt_version = prompt_version
        self.verifier_version = verifier_version
        self.max_attempts = max_attempts
        self.history_size = history_size
        self._history: deque[HistoryItem] = deque(maxlen=history_size)
        self._instruction: str | None = None
        self._max_steps = _DEFAULT_MAX_STEPS
        self._last_action: SkillCall | None = None
        self._turn_for_sit_active = False
        self._mid_level_goal = ""
        self._step_counter = 0

    # ---- Policy protocol ---------------------------------------------------------------

    @property
    def history(self) -> tuple[HistoryItem, ...]:
        """The bounded semantic history, oldest first."""
        return tuple(self._history)

    @property
    def turn_for_sit_active(self) -> bool:
        """True while a turn-for-sit sequence is under way (its first turn is done)."""
        return self._turn_for_sit_active

    def reset(self, episode_info: Mapping[str, Any]) -> None:
        """Start a new episode: clear history, plan and turn-for-sit state."""
        self._history.clear()
        self._last_action = None
        self._turn_for_sit_active = False
        self._mid_level_goal = ""
        self._step_counter = 0
        info = episode_info if isinstance(episode_info, Mapping) else {}
        instruction = info.get("instruction")
        self._instruction = instruction if isinstance(instruction, str) else None
        self._max_steps = positive_int(info.get("max_steps"), _DEFAULT_MAX_STEPS)
        # The episode loop passes the rollout directory; per-stage records go there.
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
            model call (retries included) and extras ``mid_level_goal``, ``verifier``
            (``"accept"``, ``"replace"``, ``"skipped"`` or ``"failed_open"``),
            ``verifier_called``, ``proposed`` and the attempt counts.
        """
        image = check_image(observation)
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
        max_steps = positive_int(info.get("max_steps"), self._max_steps)
        history = tuple(self._history)

        planner_prompt = render_planner_prompt(
            self.prompt_version, instruction, step, max_steps, history
        )
        planner = self._run_stage(_PLANNER_STAGE, planner_prompt, image, self._parse_plan)
        usage = list(planner.usage)
        planner_record: dict[str, Any] = {
            "prompt_version": self.prompt_version,
            "prompt": planner_prompt,
            "response": planner.data,
            "attempts": planner.attempts,
        }

        if planner.value is None:
            final = FALLBACK_ACTION
            planner_record["fallback_action"] = str(final)
            planner_record["error"] = planner.error
            self._write(PLANNER_FILE, step, "percept_mid_low", planner_record)
            self._update_turn_for_sit(final, {})
            self._remember(step, final, self._mid_level_goal, "planner failed; safety walk", None)
            return Decision(
                action=final,
                visible_state=None,
                usage=tuple(usage),
                extras={
                    "mid_level_goal": self._mid_level_goal or None,
                    "verifier": "skipped",
                    "verifier_called": False,
                    "verifier_route": None,
                    "proposed": None,
                    "planner_attempts": planner.attempts,
                    "verifier_attempts": 0,
                    **_failed_calls(planner),
                },
            )

        proposal, notes = planner.value
        response = planner.data or {}
        additional_info = response.get("additional_info")
        additional_info = additional_info if isinstance(additional_info, Mapping) else {}
        planner_record["proposed_action"] = str(proposal)
        if notes:
            planner_record["adjustments"] = notes
        self._write(PLANNER_FILE, step, "percept_mid_low", planner_record)

        route = select_route(
            proposal,
            additional_info,
            last_action=self._last_action,
            turn_for_sit_active=self._turn_for_sit_active,
        )
        final = proposal
        verdict = "accept"
        verifier_attempts = 0
        verifier_outcomes: list[StageOutcome] = []
        if route is not None:
            verifier_prompt = render_verifier_prompt(
                self.verifier_version,
                route,
                instruction=instruction,
                step=step,
                max_steps=max_steps,
                proposal=proposal,
                planner=response,
                history=history,
            )
            verifier = self._run_stage(
                _VERIFIER_STAGE,
                verifier_prompt,
                image,
                lambda text: self._parse_verdict(text, proposal),
            )
            usage.extend(verifier.usage)
            verifier_outcomes.append(verifier)
            verifier_attempts = verifier.attempts
            record: dict[str, Any] = {
                "verifier_version": self.verifier_version,
                "route": route,
                "prompt": verifier_prompt,
                "response": verifier.data,
                "attempts": verifier.attempts,
                "proposed_action": str(proposal),
            }
            if verifier.value is None:
                verdict = "failed_open"
                record["error"] = verifier.error
            else:
                verdict, replacement = verifier.value
                if verdict == "replace":
                    final = replacement
            record["verdict"] = verdict
            record["final_action"] = str(final)
            self._write(VERIFIER_FILE, step, "verifier", record)

        goal = text_field(response.get("mid_level_goal"))
        if goal:
            self._mid_level_goal = goal
        self._update_turn_for_sit(final, additional_info)
        self._remember(
            step,
            final,
            self._mid_level_goal,
            text_field(response.get("mid_level_progress_analysis")),
            str(proposal) if final != proposal else None,
        )
        visible_state = response.get("visible_state")
        return Decision(
            action=final,
            visible_state=visible_state if isinstance(visible_state, str) else None,
            usage=tuple(usage),
            extras={
                "mid_level_goal": self._mid_level_goal or None,
                "verifier": verdict,
                "verifier_called": route is not None,
                "verifier_route": route,
                "proposed": str(proposal),
                "planner_attempts": planner.attempts,
                "verifier_attempts": verifier_attempts,
                **_failed_calls(planner, *verifier_outcomes),
            },
        )

    # ---- stages ------------------------------------------------------------------------

    def _run_stage(
        self, stage: str, prompt: str, image: np.ndarray, parse: Callable[[str], Parsed]
    ) -> StageOutcome:
        """Up to ``max_attempts`` calls, retried at once (no back-off in v1)."""
        return self._runner.run(stage, prompt, image, parse)

    @staticmethod
    def _parse_plan(text: str) -> Parsed:
        data = extract_json_object(text)
        info = data.get("additional_info")
        if info is not None and not isinstance(info, Mapping):
            raise ResponseFormatError(
                f"planner field 'additional_info'={info!r} is invalid: allowed an object"
            )
        value = action_from_fields(data.get("action_id"), data.get("action_name"), info)
        return Parsed(data, value)

    @staticmethod
    def _parse_verdict(text: str, proposal: SkillCall) -> Parsed:
        data = extract_json_object(text)
        verdict = parse_verdict(data)
        if verdict.verdict == "accept":
            return Parsed(data, ("accept", proposal))
        replacement, _ = action_from_fields(
            verdict.action_id, verdict.action_name, verdict.additional_info
        )
        check_replacement(proposal, replacement)
        return Parsed(data, ("replace", replacement))

    # ---- state -------------------------------------------------------------------------

    def _update_turn_for_sit(self, final: SkillCall, additional_info: Mapping[str, Any]) -> None:
        if final.skill is not Skill.TURN:
            self._turn_for_sit_active = False
        elif info_flag(additional_info, "turn_for_sit"):
            self._turn_for_sit_active = True

    def _remember(
        self,
        step: int,
        action: SkillCall,
        goal: str,
        note: str,
        replaced: str | None,
    ) -> None:
        self._last_action = action
        if self.history_size == 0:
            return
        self._history.append(
            HistoryItem(
                step=step,
                action=str(action),
                mid_level_goal=goal,
                progress_note=note,
                replaced=replaced,
            )
        )

    def _write(self, pattern: str, step: int, stage: str, record: dict[str, Any]) -> None:
        if self.output_dir is None:
            return
        data = {"schema": _RECORD_SCHEMA, "stage": stage, "step": step, **record}
        write_json_atomic(self.output_dir / pattern.format(step=step), data)


def _failed_calls(*outcomes: StageOutcome) -> dict[str, Any]:
    """``{"failed_calls": [...]}`` when a call raised in these stages, else ``{}``."""
    calls = [entry for outcome in outcomes for entry in outcome.failed_calls]
    return {"failed_calls": calls} if calls else {}
