"""The PSV reference agent: planner, skill, verifier.

One decision of :class:`PSVAgent`:

1. **Planner** (always): one model call with the ego image and a versioned prompt
   (:mod:`humanclaw_agents.prompts`) holding the instruction, the step counter and a bounded
   semantic history. The JSON reply is turned into a proposed :class:`SkillCall` by
   :func:`action_from_fields`, which clamps numbers into the skill ranges.
2. **Verifier** (only on some routes, :func:`~humanclaw_agents.verifier.select_route`): a
   second call with the same image accepts the proposal or replaces it. Other proposals
   get an in-memory accept with no call and no log file.
3. Only the final action is returned (and executed by the episode loop).

Failures: every stage retries provider errors, unreadable JSON and invalid actions up to
``max_attempts`` times at the same state. If the planner still fails, the agent returns
``Walk<forward><slow>`` without a verifier call; if the verifier still fails, the
planner's proposal is executed (fail-open).

Files (when ``output_dir`` is given), one per logical stage and decision:
``step{NNN}_percept_mid_low.json`` and ``step{NNN}_verifier.json`` (only when the verifier
was called), each with the prompt, the final parsed reply, the number of attempts and an
``error`` field only when every attempt failed. Retry attempts live only in the returned
usage records.
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from humanclaw_agents.prompts import (
    DEFAULT_PROMPT_VERSION,
    HistoryItem,
    ResponseFormatError,
    extract_json_object,
    render_planner_prompt,
    resolve_prompt_version,
)
from humanclaw_agents.transports import ChatModel
from humanclaw_agents.verifier import (
    DEFAULT_VERIFIER_VERSION,
    check_replacement,
    info_flag,
    parse_verdict,
    render_verifier_prompt,
    resolve_verifier_version,
    select_route,
)
from humanclaw_gym.policy import Decision, Usage, estimate_tokens
from humanclaw_gym.skills import (
    DIRECTIONS,
    SIDE_STEP_DISTANCE_RANGE_M,
    SIT_DEFAULT_HEIGHT_M,
    SIT_HEIGHT_RANGE_M,
    SPEEDS,
    STEP_BACK_DISTANCE_RANGE_M,
    TURN_ANGLE_RANGE_DEG,
    Skill,
    SkillCall,
    SkillCallError,
)

__all__ = [
    "FALLBACK_ACTION",
    "PLANNER_FILE",
    "VERIFIER_FILE",
    "PSVAgent",
    "action_from_fields",
]

FALLBACK_ACTION = SkillCall.walk("slow")
"""Executed when the planner fails every attempt of a decision."""

PLANNER_FILE = "step{step:03d}_percept_mid_low.json"
VERIFIER_FILE = "step{step:03d}_verifier.json"

_RECORD_SCHEMA = "humanclaw_agents.stage_record/v1"
_PLANNER_STAGE = "planner"
_VERIFIER_STAGE = "verifier"
_DEFAULT_MAX_STEPS = 100
_DEFAULT_TURN_DEG = 30.0
_DEFAULT_STEP_BACK_M = 0.25
_DEFAULT_SIDE_STEP_M = 0.25
_NUMBER_RE = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_SPEED_SYNONYMS = {"medium": "normal", "moderate": "normal", "quick": "fast", "slowly": "slow"}
# additional_info keys read as parameter fallbacks, per SkillCall field.
_INFO_KEYS = {
    "speed": ("speed",),
    "direction": ("direction",),
    "angle_deg": ("angle_deg", "angle", "degrees"),
    "distance_m": ("distance_m", "distance", "meters", "metres"),
    "height_m": ("height_m", "height"),
}

_NUMERIC_SKILLS = (Skill.TURN, Skill.SIT, Skill.STEP_BACK, Skill.SIDE_STEP)

_T = TypeVar("_T")


# ---- action conversion -------------------------------------------------------------------------


def action_from_fields(
    action_id: Any,
    action_name: Any,
    additional_info: Mapping[str, Any] | None = None,
) -> tuple[SkillCall, list[str]]:
    """Turn a reply's ``action_id`` / ``action_name`` into a valid SkillCall, clamping numbers.

    The skill comes from ``action_id`` (int 0..7, or a digit string) and/or the name part
    of ``action_name`` (anything :meth:`Skill.from_name` accepts: ``"Turn"``,
    ``"Turn in place"``, ``"side_step"``...). When both name a skill they must agree.

    Parameters are read, in this order of preference, from:

    1. the ``<...>`` groups of ``action_name`` (``Turn<left><45>``, ``Sit down<0.45m>``):
       the words slow/normal/fast and left/right, and the first number (units such as
       ``deg`` or ``m`` are ignored);
    2. ``additional_info`` keys ``speed``, ``direction``, ``angle_deg`` (or ``angle``),
       ``distance_m`` (or ``distance``), ``height_m`` (or ``height``);
    3. defaults: speed normal, turn 30 degrees, sit 0.5 m, step back / side step 0.25 m.

    Numbers are clamped into the skill's range (turn 10..120 deg, sit 0.15..0.85 m, step
    back 0.1..0.6 m, side step 0.1..0.5 m; distances and angles use their magnitude). A
    Turn or Side step without a direction is an error, never guessed.

    Args:
        action_id: the reply's ``action_id``.
        action_name: the reply's ``action_name``.
        additional_info: the reply's ``additional_info`` object, if any.

    Returns:
        The SkillCall and a list of notes about every clamp or default applied.

    Raises:
        ResponseFormatError: the skill or a required parameter cannot be determined.
    """
    info = additional_info if isinstance(additional_info, Mapping) else {}
    name_text = action_name.strip() if isinstance(action_name, str) else ""
    if action_name is not None and not isinstance(action_name, str):
        raise ResponseFormatError(f"action_name={action_name!r} is invalid: allowed a string")
    head = name_text.split("<", 1)[0].strip()
    groups = [group.strip().lower() for group in re.findall(r"<([^<>]*)>", name_text)]

    id_skill = _skill_from_id(action_id)
    name_skill: Skill | None = None
    if head:
        try:
            name_skill = Skill.from_name(head)
        except SkillCallError:
            name_skill = None
            if id_skill is None:
                raise ResponseFormatError(
                    f"action_name={action_name!r} names no known skill and action_id is missing"
                ) from None
    if id_skill is not None and name_skill is not None and id_skill is not name_skill:
        raise ResponseFormatError(
            f"action_id={action_id!r} ({id_skill.text_name}) disagrees with "
            f"action_name={action_name!r} ({name_skill.text_name})"
        )
    skill = id_skill if id_skill is not None else name_skill
    if skill is None:
        raise ResponseFormatError("the reply names no action: action_id and action_name missing")

    notes: list[str] = []
    words = [word for group in groups for word in group.split()]
    numbers = [float(m) for group in groups for m in _NUMBER_RE.findall(group)]
    known_words = {*SPEEDS, *_SPEED_SYNONYMS, *DIRECTIONS, "forward"}
    unreadable = [
        group
        for group in groups
        if group and group not in known_words and not _NUMBER_RE.search(group)
    ]
    if unreadable and not numbers and skill in _NUMERIC_SKILLS:
        raise ResponseFormatError(
            f"action_name={action_name!r}: no number could be read from <{unreadable[0]}>"
        )

    if skill is Skill.WALK:
        return SkillCall.walk(_speed(words, info, notes)), notes
    if skill is Skill.STOP:
        return SkillCall.stop(), notes
    if skill is Skill.CLIMB_UP:
        return SkillCall.climb_up(), notes
    if skill is Skill.CLIMB_DOWN:
        return SkillCall.climb_down(), notes
    if skill is Skill.TURN:
        direction = _direction(skill, words, info)
        angle = _number("angle_deg", numbers, info, _DEFAULT_TURN_DEG, notes)
        angle = _clamp("angle_deg", abs(angle), TURN_ANGLE_RANGE_DEG, notes)
        return SkillCall.turn(direction, angle), notes
    if skill is Skill.SIT:
        height = _number("height_m", numbers, info, SIT_DEFAULT_HEIGHT_M, notes)
        return SkillCall.sit(_clamp("height_m", height, SIT_HEIGHT_RANGE_M, notes)), notes
    if skill is Skill.STEP_BACK:
        distance = _number("distance_m", numbers, info, _DEFAULT_STEP_BACK_M, notes)
        distance = _clamp("distance_m", abs(distance), STEP_BACK_DISTANCE_RANGE_M, notes)
        return SkillCall.step_back(distance), notes
    direction = _direction(skill, words, info)
    distance = _number("distance_m", numbers, info, _DEFAULT_SIDE_STEP_M, notes)
    distance = _clamp("distance_m", abs(distance), SIDE_STEP_DISTANCE_RANGE_M, notes)
    return SkillCall.side_step(direction, distance), notes


def _skill_from_id(action_id: Any) -> Skill | None:
    if action_id is None or (isinstance(action_id, str) and not action_id.strip()):
        return None
    value: Any = action_id
    if isinstance(value, str):
        value = value.strip()
        if not value.lstrip("+-").isdigit():
            raise ResponseFormatError(f"action_id={action_id!r} is invalid: allowed an int 0..7")
        value = int(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 7:
        raise ResponseFormatError(f"action_id={action_id!r} is invalid: allowed an int 0..7")
    return Skill(value)


def _info_value(info: Mapping[str, Any], field: str) -> Any:
    for key in _INFO_KEYS[field]:
        if info.get(key) is not None:
            return info[key]
    return None


def _speed(words: list[str], info: Mapping[str, Any], notes: list[str]) -> str:
    for word in words:
        word = _SPEED_SYNONYMS.get(word, word)
        if word in SPEEDS:
            return word
    raw = _info_value(info, "speed")
    if raw is not None:
        word = _SPEED_SYNONYMS.get(str(raw).strip().lower(), str(raw).strip().lower())
        if word not in SPEEDS:
            raise ResponseFormatError(f"speed={raw!r} is invalid: allowed one of {SPEEDS}")
        return word
    unknown = [word for word in words if word != "forward"]
    if unknown:
        notes.append(f"speed word <{unknown[0]}> not understood: used 'normal'")
    else:
        notes.append("speed missing: used 'normal'")
    return "normal"


def _direction(skill: Skill, words: list[str], info: Mapping[str, Any]) -> str:
    for word in words:
        if word in DIRECTIONS:
            return word
    raw = _info_value(info, "direction")
    if raw is not None and str(raw).strip().lower() in DIRECTIONS:
        return str(raw).strip().lower()
    raise ResponseFormatError(
        f"{skill.text_name} needs a direction: allowed one of {DIRECTIONS} "
        f"(e.g. {skill.text_name}<left><...>), got {raw!r}"
    )


def _number(
    field: str, numbers: list[float], info: Mapping[str, Any], default: float, notes: list[str]
) -> float:
    if numbers:
        value = numbers[0]
    else:
        raw = _info_value(info, field)
        if raw is None:
            notes.append(f"{field} missing: used {default:g}")
            return default
        try:
            if isinstance(raw, bool):
                raise ValueError
            value = float(raw)
        except (TypeError, ValueError):
            raise ResponseFormatError(f"{field}={raw!r} is invalid: allowed a number") from None
    if not math.isfinite(value):
        raise ResponseFormatError(f"{field}={value!r} is invalid: allowed a finite number")
    return value


def _clamp(field: str, value: float, bounds: tuple[float, float], notes: list[str]) -> float:
    low, high = bounds
    clamped = min(max(value, low), high)
    if clamped != value:
        notes.append(f"{field} {value:g} clamped to {clamped:g}")
    return clamped


# ---- stage plumbing ----------------------------------------------------------------------------


@dataclass
class _StageOutcome:
    """Result of one stage after all its attempts."""

    value: Any
    response: dict[str, Any] | None
    attempts: int
    usage: list[Usage]
    error: str | None


def _atomic_write_json(path: Path, data: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=2, ensure_ascii=False)
            handle.write("\n")
        os.replace(tmp_name, path)
    except BaseException:
        try:
            os.unlink(tmp_name)
        except OSError:
            pass
        raise


# ---- the agent ---------------------------------------------------------------------------------


class PSVAgent:
    """Planner-skill-verifier VLM agent implementing the :class:`~humanclaw_gym.policy.Policy`
    protocol.

    Args:
        model: a :class:`~humanclaw_agents.transports.ChatModel`, a model config object, or
            the path of a JSON model config (then the transport is built from it).
        output_dir: where the per-stage JSON records go; ``None`` writes nothing.
        prompt_version: planner prompt version (:data:`~humanclaw_agents.prompts.PLANNER_PROMPTS`).
        verifier_version: verifier version (:data:`~humanclaw_agents.verifier.VERIFIER_VERSIONS`).
        max_attempts: model calls per stage and decision before giving up (>= 1).
        history_size: semantic history items kept for the prompt (>= 0).

    Raises:
        ValueError: unknown versions or out-of-range counts.
    """

    def __init__(
        self,
        model: ChatModel | Any,
        output_dir: str | os.PathLike[str] | None = None,
        prompt_version: str = DEFAULT_PROMPT_VERSION,
        verifier_version: str = DEFAULT_VERIFIER_VERSION,
        max_attempts: int = 5,
        history_size: int = 10,
    ) -> None:
        resolve_prompt_version(prompt_version)
        resolve_verifier_version(verifier_version)
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
            raise ValueError(f"max_attempts={max_attempts!r} is invalid: allowed an int >= 1")
        if isinstance(history_size, bool) or not isinstance(history_size, int) or history_size < 0:
            raise ValueError(f"history_size={history_size!r} is invalid: allowed an int >= 0")
        self.model = _as_model(model)
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

    def __repr__(self) -> str:
        return (
            f"PSVAgent(model={self.model!r}, prompt_version={self.prompt_version!r}, "
            f"verifier_version={self.verifier_version!r})"
        )

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
        self._max_steps = _positive_int(info.get("max_steps"), _DEFAULT_MAX_STEPS)
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
        image = _check_image(observation)
        info = info if isinstance(info, Mapping) else {}
        instruction = info.get("instruction") or self._instruction
        if not isinstance(instruction, str) or not instruction.strip():
            raise ValueError(
                "PSVAgent needs the task text: info['instruction'] (or the episode info given "
                f"to reset) must be a non-empty string, got {instruction!r}"
            )
        self._instruction = instruction
        step = _non_negative_int(info.get("step"), self._step_counter)
        self._step_counter = step + 1
        max_steps = _positive_int(info.get("max_steps"), self._max_steps)
        history = tuple(self._history)

        planner_prompt = render_planner_prompt(
            self.prompt_version, instruction, step, max_steps, history
        )
        planner = self._run_stage(_PLANNER_STAGE, planner_prompt, image, self._parse_plan)
        usage = list(planner.usage)
        planner_record: dict[str, Any] = {
            "prompt_version": self.prompt_version,
            "prompt": planner_prompt,
            "response": planner.response,
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
                },
            )

        proposal, notes = planner.value
        response = planner.response or {}
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
            verifier_attempts = verifier.attempts
            record: dict[str, Any] = {
                "verifier_version": self.verifier_version,
                "route": route,
                "prompt": verifier_prompt,
                "response": verifier.response,
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

        goal = _text(response.get("mid_level_goal"))
        if goal:
            self._mid_level_goal = goal
        self._update_turn_for_sit(final, additional_info)
        self._remember(
            step,
            final,
            self._mid_level_goal,
            _text(response.get("mid_level_progress_analysis")),
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
            },
        )

    # ---- stages ------------------------------------------------------------------------

    def _run_stage(
        self,
        stage: str,
        prompt: str,
        image: np.ndarray,
        parse: Callable[[str], tuple[dict[str, Any], _T]],
    ) -> _StageOutcome:
        """Call the model up to ``max_attempts`` times until ``parse`` accepts a reply."""
        usage: list[Usage] = []
        error: str | None = None
        for attempt in range(1, self.max_attempts + 1):
            try:
                reply = self.model.respond(prompt, image, stage)
            except Exception as exc:  # noqa: BLE001 - any provider failure is one failed attempt
                usage.append(Usage(stage=stage, attempt=attempt, source="none"))
                error = f"attempt {attempt}: {type(exc).__name__}: {exc}"
                continue
            usage.append(_stamp_usage(reply, prompt, stage, attempt))
            try:
                response, value = parse(getattr(reply, "text", reply))
            except (ResponseFormatError, SkillCallError) as exc:
                error = f"attempt {attempt}: {type(exc).__name__}: {exc}"
                continue
            return _StageOutcome(value, response, attempt, usage, None)
        return _StageOutcome(None, None, self.max_attempts, usage, error)

    @staticmethod
    def _parse_plan(text: str) -> tuple[dict[str, Any], tuple[SkillCall, list[str]]]:
        data = extract_json_object(text)
        info = data.get("additional_info")
        if info is not None and not isinstance(info, Mapping):
            raise ResponseFormatError(
                f"planner field 'additional_info'={info!r} is invalid: allowed an object"
            )
        return data, action_from_fields(data.get("action_id"), data.get("action_name"), info)

    @staticmethod
    def _parse_verdict(
        text: str, proposal: SkillCall
    ) -> tuple[dict[str, Any], tuple[str, SkillCall]]:
        data = extract_json_object(text)
        verdict = parse_verdict(data)
        if verdict.verdict == "accept":
            return data, ("accept", proposal)
        replacement, _ = action_from_fields(
            verdict.action_id, verdict.action_name, verdict.additional_info
        )
        check_replacement(proposal, replacement)
        return data, ("replace", replacement)

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
        _atomic_write_json(self.output_dir / pattern.format(step=step), data)


# ---- helpers -----------------------------------------------------------------------------------


def _as_model(model: Any) -> ChatModel:
    from humanclaw_agents.model_config import (
        FilesystemQueueConfig,
        OpenAICompatibleConfig,
        load_model_config,
    )
    from humanclaw_agents.transports import build_model

    if isinstance(model, (str, os.PathLike)):
        return build_model(load_model_config(model))
    if isinstance(model, (OpenAICompatibleConfig, FilesystemQueueConfig)):
        return build_model(model)
    if not callable(getattr(model, "respond", None)):
        raise TypeError(
            "PSVAgent model must be a ChatModel (with respond(prompt, image_rgb, stage)), a "
            f"model config or a model config path; got {type(model).__name__}"
        )
    return model


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


def _check_image(observation: Any) -> np.ndarray:
    image = np.asarray(observation)
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
        raise ValueError(
            "PSVAgent observation must be a uint8 RGB image of shape (H, W, 3) "
            f"(448x448 in the benchmark), got dtype {image.dtype} and shape {image.shape}"
        )
    return image


def _text(value: Any) -> str:
    return " ".join(str(value).split()) if isinstance(value, str) else ""


def _non_negative_int(value: Any, default: int) -> int:
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= 0:
        return int(value)
    return default


def _positive_int(value: Any, default: int) -> int:
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value > 0:
        return int(value)
    return default


def make_psv_agent(model_config: str | os.PathLike[str], seed: int = 0) -> PSVAgent:
    """Entry-point factory for ``--agent psv``: build the transport from a JSON model config.

    ``seed`` is accepted for interface uniformity; the agent itself is deterministic given
    the model's replies.
    """
    del seed
    return PSVAgent(model=Path(model_config))
