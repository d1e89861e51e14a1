"""Verifier routes of the PSV agent: when a second model call checks the planner's proposal.

Only a few proposals are worth a second look, because they are hard to undo or easy to get
wrong from one picture. :func:`select_route` picks the route:

==================  ===========================================================
route               when
==================  ===========================================================
``walk``            the proposal is Walk forward (is the way ahead clear?)
``stop``            the proposal is Stop/Stand (is the target really in reach?)
``climb_up``        the proposal is Climb upstairs (is there a step in front?)
``turn_for_sit``    the first Turn of a turn-for-sit sequence (close enough to sit?)
``stop_after_sit``  Stop/Stand right after sitting, or flagged ``stop_after_sit``
==================  ===========================================================

Every other proposal (a plain Turn, later turns of a turn-for-sit sequence, Sit down, Step
back, Side step, Walk downstairs) is accepted in memory with no call and no log.

The verifier answers ``{"verdict": "accept" | "replace", "action_id": ..., "action_name":
..., "reason": ...}``. A replacement of a Stop/Stand proposal must not be Stop/Stand: such a
reply is invalid and the stage is retried (:func:`check_replacement`).
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from humanclaw_agents.prompts import (
    HistoryItem,
    ResponseFormatError,
    extract_json_object,
    format_history,
    skill_table,
)
from humanclaw_gym.skills import Skill, SkillCall

__all__ = [
    "DEFAULT_VERIFIER_VERSION",
    "ROUTES",
    "VERIFIER_VERSIONS",
    "VerifierVerdict",
    "VerifierVersion",
    "check_replacement",
    "info_flag",
    "parse_verdict",
    "render_verifier_prompt",
    "resolve_verifier_version",
    "select_route",
]

DEFAULT_VERIFIER_VERSION = "v1"

ROUTES: tuple[str, ...] = ("walk", "stop", "climb_up", "turn_for_sit", "stop_after_sit")
"""Names of the verifier routes."""

_VERDICTS = ("accept", "replace")


def select_route(
    proposal: SkillCall,
    additional_info: Mapping[str, Any] | None,
    *,
    last_action: SkillCall | None,
    turn_for_sit_active: bool,
) -> str | None:
    """Choose the verifier route for a planner proposal, or ``None`` for no verifier call.

    Args:
        proposal: the planner's proposed action.
        additional_info: the planner's ``additional_info`` object (flags ``turn_for_sit``,
            ``stop_after_sit``).
        last_action: the action executed at the previous decision, if any.
        turn_for_sit_active: True while a turn-for-sit sequence is under way (its first
            turn was already executed); later turns of the sequence are not verified.

    Returns:
        One of :data:`ROUTES`, or ``None``.
    """
    info = additional_info if isinstance(additional_info, Mapping) else {}
    skill = proposal.skill
    if skill is Skill.WALK:
        return "walk"
    if skill is Skill.CLIMB_UP:
        return "climb_up"
    if skill is Skill.STOP:
        after_sit = info_flag(info, "stop_after_sit") or (
            last_action is not None and last_action.skill is Skill.SIT
        )
        return "stop_after_sit" if after_sit else "stop"
    if skill is Skill.TURN and info_flag(info, "turn_for_sit") and not turn_for_sit_active:
        return "turn_for_sit"
    return None


def info_flag(info: Mapping[str, Any] | None, name: str) -> bool:
    """True when ``info[name]`` is a true flag (``true``, ``1``, ``"true"``, ``"yes"``)."""
    if not isinstance(info, Mapping):
        return False
    value = info.get(name)
    if isinstance(value, str):
        return value.strip().lower() in ("true", "yes", "1")
    return bool(value) if isinstance(value, (bool, int)) else False


# ---- prompts -----------------------------------------------------------------------------------

_HEADER_V1 = """\
You double-check one decision of a humanoid body searching an indoor home. The attached \
picture is the body's own head-camera view right now (egocentric, 448x448 RGB); blue \
humanoid limbs in it belong to the body itself.

Task: $instruction
Decision $step of at most $max_steps.

The planner looked at the same picture and wrote:
- what it sees: $visible_state
- its current sub-goal: $mid_level_goal
- its reasoning: $reasoning
- proposed action: $proposal

Recent decisions (oldest first):
$history

"""

_ROUTES_V1 = {
    "walk": """\
Check the proposed walk. One Walk stride moves the body 0.2, 0.4 or 0.6 m straight ahead \
(slow, normal, fast). Accept when the floor straight ahead is free for that distance and \
walking forward serves the sub-goal. Replace it when an obstacle, wall or piece of \
furniture is in the way (a turn or side step that clears it is usually better), when a \
slower stride is safer close to furniture, or when the target is already within arm's \
reach so walking on would bump into it.
""",
    "stop": """\
Check the proposed Stop/Stand. Stopping ends the episode at once and cannot be undone. \
Accept only when the target named in the task is clearly in the picture and right in \
front of the body, within about 20 cm (arm's reach). Otherwise replace Stop/Stand with \
the single skill that best brings the body closer to the target or brings it into view; \
the replacement must not be Stop/Stand.
""",
    "climb_up": """\
Check the proposed Climb upstairs. Accept only when a stair step rises directly in front \
of the feet and the body faces it squarely. Otherwise replace it with a skill that lines \
the body up with the stairs or continues the search.
""",
    "turn_for_sit": """\
The planner wants to begin turning its back towards the seat, to sit down on the target \
afterwards. Accept when the target seat is right next to the body (within roughly half a \
metre) so that turning now leaves it behind the body, ready to sit on. Replace the turn \
with an approach skill (for example a slow walk or a side step) when the seat is still \
too far away or off to one side.
""",
    "stop_after_sit": """\
The body has just sat down and the planner now wants Stop/Stand, which ends the episode. \
Accept when the view shows the body seated on the target named in the task (for example \
the seat's surface or edge right under or beside the thighs). If the body missed the seat \
or sits on something else, replace Stop/Stand with the skill that fixes it (stand up by \
stepping away, reposition, sit again with a better height estimate); the replacement must \
not be Stop/Stand.
""",
}

_FOOTER_V1 = """
Skills you may use for a replacement:
$skills

Answer with a single JSON object and nothing else (no markdown):
{"verdict": "accept" or "replace", "action_id": <skill id>, "action_name": "<text form with \
parameters, e.g. Side step<left><0.25>>", "reason": "<one sentence>"}
For "accept", repeat the proposed action in action_id and action_name.
"""


@dataclass(frozen=True)
class VerifierVersion:
    """One self-contained verifier version: a shared header, one text per route, a footer."""

    header: str
    routes: Mapping[str, str]
    footer: str

    def __post_init__(self) -> None:
        missing = [route for route in ROUTES if route not in self.routes]
        if missing:
            raise ValueError(f"verifier version lacks route(s) {missing}: needs all of {ROUTES}")


VERIFIER_VERSIONS: dict[str, VerifierVersion] = {
    "v1": VerifierVersion(header=_HEADER_V1, routes=_ROUTES_V1, footer=_FOOTER_V1),
}
"""Verifier versions by name. Never edit a released version; add a new one."""


def resolve_verifier_version(version: str) -> VerifierVersion:
    """Return a verifier version.

    Raises:
        ValueError: unknown version, naming the known ones.
    """
    try:
        return VERIFIER_VERSIONS[version]
    except (KeyError, TypeError):
        raise ValueError(
            f"verifier_version={version!r} is unknown: allowed one of {sorted(VERIFIER_VERSIONS)}"
        ) from None


def render_verifier_prompt(
    version: str,
    route: str,
    *,
    instruction: str,
    step: int,
    max_steps: int,
    proposal: SkillCall,
    planner: Mapping[str, Any],
    history: Sequence[HistoryItem | Mapping[str, Any]],
) -> str:
    """Compose the verifier prompt of one route.

    Args:
        version: key of :data:`VERIFIER_VERSIONS`.
        route: one of :data:`ROUTES`.
        instruction: the task text.
        step: 0-based decision index.
        max_steps: the episode's decision limit.
        proposal: the planner's proposed action.
        planner: the planner's parsed reply (``visible_state``, ``mid_level_goal``,
            ``low_level_action_reasoning`` are shown).
        history: the same bounded semantic history the planner saw.

    Returns:
        The complete prompt text (the image is attached separately).
    """
    spec = resolve_verifier_version(version)
    if route not in ROUTES:
        raise ValueError(f"route={route!r} is unknown: allowed one of {ROUTES}")
    template = spec.header + spec.routes[route] + spec.footer
    return string.Template(template).substitute(
        instruction=str(instruction).strip(),
        step=int(step),
        max_steps=int(max_steps),
        visible_state=_field_text(planner, "visible_state"),
        mid_level_goal=_field_text(planner, "mid_level_goal"),
        reasoning=_field_text(planner, "low_level_action_reasoning"),
        proposal=str(proposal),
        history=format_history(history),
        skills=skill_table(),
    )


def _field_text(planner: Mapping[str, Any], name: str) -> str:
    value = planner.get(name) if isinstance(planner, Mapping) else None
    text = " ".join(str(value).split()) if value not in (None, "") else ""
    return text or "(not given)"


# ---- replies -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class VerifierVerdict:
    """A verifier reply, checked for shape only (the action is converted by the agent).

    Attributes:
        verdict: ``"accept"`` or ``"replace"``.
        action_id: the replacement's id as given (None if absent).
        action_name: the replacement's text form as given (None if absent).
        reason: the verifier's one-sentence reason ("" if absent).
        additional_info: any ``additional_info`` object in the reply (parameter fallback).
    """

    verdict: str
    action_id: Any = None
    action_name: str | None = None
    reason: str = ""
    additional_info: Mapping[str, Any] = field(default_factory=dict)


def parse_verdict(text: str | Mapping[str, Any]) -> VerifierVerdict:
    """Read a verifier reply (its text, or the JSON object already extracted from it).

    Raises:
        ResponseFormatError: not a JSON object, a verdict other than accept/replace, or a
            replace without ``action_id`` / ``action_name``.
    """
    data = text if isinstance(text, Mapping) else extract_json_object(text)
    verdict = data.get("verdict")
    if isinstance(verdict, str):
        verdict = verdict.strip().lower()
    if verdict not in _VERDICTS:
        raise ResponseFormatError(
            f"verifier field 'verdict'={data.get('verdict')!r} is invalid: allowed one of "
            f"{_VERDICTS}"
        )
    action_id = data.get("action_id")
    action_name = data.get("action_name")
    if action_name is not None and not isinstance(action_name, str):
        raise ResponseFormatError(
            f"verifier field 'action_name'={action_name!r} is invalid: allowed a string"
        )
    if verdict == "replace" and action_id in (None, "") and not (action_name or "").strip():
        raise ResponseFormatError(
            "verifier verdict 'replace' needs the replacement in 'action_id' and/or 'action_name'"
        )
    extra = data.get("additional_info")
    return VerifierVerdict(
        verdict=verdict,
        action_id=action_id,
        action_name=action_name,
        reason=str(data.get("reason") or ""),
        additional_info=dict(extra) if isinstance(extra, Mapping) else {},
    )


def check_replacement(proposal: SkillCall, replacement: SkillCall) -> None:
    """Reject replacements the routes forbid.

    Raises:
        ResponseFormatError: the proposal is Stop/Stand and so is the replacement.
    """
    if proposal.skill is Skill.STOP and replacement.skill is Skill.STOP:
        raise ResponseFormatError(
            "verifier replaced Stop/Stand with Stop/Stand: a replacement for Stop/Stand must "
            "be another skill (or the verdict must be 'accept')"
        )
