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

import json
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from humanclaw_agents.actions import action_from_reply, action_text_v2
from humanclaw_agents.prompts import (
    SYSTEM_FRAME,
    HistoryItem,
    ResponseFormatError,
    action_space_text,
    extract_json_object,
    format_history,
    skill_table,
)
from humanclaw_gym.skills import Skill, SkillCall

__all__ = [
    "DEFAULT_VERIFIER_VERSION",
    "REPLACEMENT_SKILLS",
    "ROUTES",
    "ROUTES_V2",
    "VERIFIER_VERSIONS",
    "RouteText",
    "VerdictV2",
    "VerifierVerdict",
    "VerifierVersion",
    "VerifierVersionV2",
    "check_replacement",
    "info_flag",
    "parse_verdict",
    "read_verdict_v2",
    "recent_actions_text",
    "reference_flag",
    "render_verifier_prompt",
    "render_verifier_prompt_v2",
    "resolve_verifier_version",
    "select_route",
    "select_route_v2",
]

DEFAULT_VERIFIER_VERSION = "v2"

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


VERIFIER_VERSIONS: dict[str, Any] = {
    "v1": VerifierVersion(header=_HEADER_V1, routes=_ROUTES_V1, footer=_FOOTER_V1),
}
"""Verifier versions by name: ``v1`` (:class:`VerifierVersion`) and ``v2``
(:class:`VerifierVersionV2`). Never edit a released version; add a new one."""


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
    if not isinstance(spec, VerifierVersion):
        raise ValueError(
            f"verifier_version={version!r} is rendered by render_verifier_prompt_v2, not "
            "render_verifier_prompt"
        )
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


# ---- v2: the reference agent's verifier ----------------------------------------------------------

ROUTES_V2: tuple[str, ...] = ("turn_for_sit", "stop_after_sit", "walk", "stop", "climb_up")
"""Routes of the v2 verifier, in the order :func:`select_route_v2` tries them."""

REPLACEMENT_SKILLS: tuple[Skill, ...] = (
    Skill.WALK,
    Skill.TURN,
    Skill.CLIMB_UP,
    Skill.STEP_BACK,
    Skill.SIDE_STEP,
    Skill.CLIMB_DOWN,
)
"""Skills the v2 verifier is offered as replacements: every skill but Stop/Stand and Sit."""

_PLACEHOLDER_ACTION = "<final action>"


def reference_flag(info: Mapping[str, Any] | None, name: str) -> bool:
    """The reference's reading of an ``additional_info`` flag: JSON ``true`` or the string
    ``"true"`` (any case, surrounding spaces ignored); ``1`` or ``"yes"`` are not flags."""
    if not isinstance(info, Mapping):
        return False
    value = info.get(name)
    if isinstance(value, bool):
        return value
    return isinstance(value, str) and value.strip().lower() == "true"


def select_route_v2(proposal: SkillCall, additional_info: Mapping[str, Any] | None) -> str | None:
    """The v2 verifier route of a proposal, or ``None`` for an in-memory accept.

    ``additional_info`` is the planner's object *after* the agent removed ``turn_for_sit``
    from a turn whose sequence was already verified, so only the first flagged turn of a
    sequence is routed. Stop/Stand goes to ``stop_after_sit`` only when flagged so (not
    merely because the previous action was a Sit).
    """
    skill = proposal.skill
    if skill is Skill.TURN and reference_flag(additional_info, "turn_for_sit"):
        return "turn_for_sit"
    if skill is Skill.STOP and reference_flag(additional_info, "stop_after_sit"):
        return "stop_after_sit"
    if skill is Skill.WALK:
        return "walk"
    if skill is Skill.STOP:
        return "stop"
    if skill is Skill.CLIMB_UP:
        return "climb_up"
    return None


def recent_actions_text(actions: Sequence[str]) -> str:
    """Executed actions with runs folded: ``"Turn<left><30> x2; Sit down<0.45> x3"``;
    ``"none"`` when there are none."""
    runs: list[list[Any]] = []
    for action in actions:
        text = " ".join(str(action).split())
        if not text:
            continue
        if runs and runs[-1][0] == text:
            runs[-1][1] += 1
        else:
            runs.append([text, 1])
    return "; ".join(f"{text} x{count}" for text, count in runs) or "none"


@dataclass(frozen=True)
class RouteText:
    """The route-specific parts of a v2 verifier prompt.

    Attributes:
        rules: bullet lines appended to the common rules.
        questions: numbered questions (``$speed`` is the proposed walk speed).
        schema: the route's answer fields before ``verdict`` / ``reason`` / final action,
            as ``(key, description)`` pairs.
        compact_actions: list the replacement skills on one line (the sitting routes).
    """

    rules: str
    questions: str
    schema: tuple[tuple[str, str], ...]
    compact_actions: bool = False


_V2_COMMON_RULES = """\
What to do:
- Judge only the proposed action, using the current picture.
- If the proposed action is appropriate, keep it.
- If it is not, replace it with one final action from the list above.
- Give the final action in its exact action_name form.
"""

_V2_ROUTES: dict[str, RouteText] = {
    "walk": RouteText(
        rules="""\
- Walk: look at the lane straight ahead. Accept Walk<forward> when that lane is clear \
enough and walking moves the current plan forward.
- Walk: replace Walk<forward> when the lane runs straight into a wall, a closed door, \
furniture or another obstacle close by; use a Turn towards the clearest open side lane you \
can see, or a Side step towards the clear side. When the target is an object, the body has \
to end up touching it.
""",
        questions="""\
1. What is in the lane straight ahead?
2. How far away, in metres, is the nearest object or obstacle in that lane?
3. Would Walk<forward><$speed> for the next 0.5 seconds make the humanoid bump into \
anything it could avoid?
4. If this walk is not right, which final action should it be?""",
        schema=(
            ("lane_checked", '"forward"'),
            ("lane_observation", '"<what is in the lane you checked>"'),
            ("nearest_obstacle_distance_m", "<number>"),
            ("unnecessary_collision", "true | false"),
        ),
    ),
    "stop": RouteText(
        rules="""\
- Stop/Stand: first work out what the high-level goal is and whether it is fully done, for \
example whether the humanoid is close enough to the target. Accept Stop/Stand only when the \
whole goal is done; otherwise replace it with one final action from the list (not \
Stop/Stand) that keeps making progress towards the goal.
""",
        questions="""\
1. What is the high-level goal of the instruction, and is it a navigation goal or an \
interaction with the environment?
2. Is the goal fully done according to the current picture? Give the reason either way.
3. For navigation: has the target been found, how far away is it, and is the body touching \
it (about zero distance)?
4. For an interaction: has the interaction been completed?
5. If the goal is done, accept Stop/Stand; otherwise choose one other skill from the list \
(not Stop/Stand) that best continues towards the goal.""",
        schema=(
            ("high_level_goal", '"<the goal the instruction states>"'),
            ("goal_type", '"navigation" | "environment_interaction"'),
            ("goal_completed", "true | false"),
            ("completion_reason", '"<short reason why goal_completed is true or false>"'),
            ("navigation_target_found", "true | false | null"),
            ("estimated_distance_to_target_m", "<number or null>"),
            ("touching_or_zero_distance", "true | false | null"),
            ("interaction_completed", "true | false | null"),
        ),
    ),
    "climb_up": RouteText(
        rules="""\
- Climb upstairs: accept only when the first riser or the next step up is at the feet or \
directly ahead and the humanoid faces the direction of the stairs, or when the humanoid is \
already on the stairs with steps rising ahead.
- Climb upstairs: when no riser or step up is at the feet or directly ahead, replace it \
with the smallest Walk or Turn that fits the current plan.
""",
        questions="""\
1. Roughly what angle, in degrees, does the visible stair or riser edge make with the \
horizontal of the picture?
2. Does the humanoid face the stairs from the front or from the side?
3. How far from the feet, in metres, is the first stair or riser?
4. Which range of angles counts as facing the stairs from the front?""",
        schema=(
            ("riser_edge_angle_deg_from_horizontal", "<number>"),
            ("facing_stairs", '"front" | "side"'),
            ("first_riser_distance_m", "<number>"),
            ("front_facing_angle_range_deg", '"<angle range>"'),
        ),
    ),
    "turn_for_sit": RouteText(
        rules="""\
- turn_for_sit: accept the turn only when the surface to sit on touches the body (zero \
distance) and this Turn rotates the body away from it, so that it ends up behind the body \
ready for Sit down.
- Replace the turn when any distance to the surface is left; keep moving towards it \
instead.
""",
        questions="""\
1. Does the surface to sit on touch the body (zero distance), or is there still distance \
to cover?
2. Does this Turn rotate the body away so that the target ends up behind it for Sit down?
3. Should the Turn be accepted, or replaced with a move that continues towards the target?""",
        schema=(
            ("sitting_target_zero_distance", 'true | false | "unclear"'),
            ("turn_is_for_sit_setup", "true | false"),
        ),
        compact_actions=True,
    ),
    "stop_after_sit": RouteText(
        rules="""\
- stop_after_sit: accept when the picture shows the backs of the blue legs resting on the \
object, not floating or unsupported.
- Do not replace Stop/Stand only because the body posture is hard to judge from the ego \
view.
""",
        questions="""\
1. Is there clear evidence that sitting failed?
2. Does the picture show the backs of the blue legs resting on the object rather than \
floating or unsupported?
3. Should Stop/Stand be accepted or replaced?""",
        schema=(
            ("clear_sit_failure", "true | false"),
            ("back_of_legs_contacting_object", 'true | false | "unclear"'),
        ),
        compact_actions=True,
    ),
}

_V2_TEMPLATE = (
    SYSTEM_FRAME
    + """

You check one proposed action before it is executed:
$proposal

The current picture is attached. It is your main evidence.

$actions

$rules
Input:
$input_json

Questions:
$questions

Answer with exactly this JSON object:
$schema
"""
)


@dataclass(frozen=True)
class VerifierVersionV2:
    """A v2-family verifier version: common rules, one :class:`RouteText` per route and the
    prompt template."""

    common_rules: str
    routes: Mapping[str, RouteText]
    template: str

    def __post_init__(self) -> None:
        missing = [route for route in ROUTES_V2 if route not in self.routes]
        if missing:
            raise ValueError(f"verifier version lacks route(s) {missing}: needs all of {ROUTES_V2}")


VERIFIER_VERSIONS["v2"] = VerifierVersionV2(_V2_COMMON_RULES, _V2_ROUTES, _V2_TEMPLATE)


def render_verifier_prompt_v2(
    route: str,
    *,
    instruction: str,
    proposal: SkillCall,
    additional_info: Mapping[str, Any] | None = None,
    recent_actions: Sequence[str] | None = None,
    version: str = "v2",
) -> str:
    """Compose the v2 verifier prompt of one route.

    The verifier sees only what the reference's verifier sees: the picture (attached
    separately), the task, the proposed action, the planner's ``additional_info`` when it
    is not empty and, on the ``stop_after_sit`` route, the recent executed actions. It does
    not see the planner's visible state, reasoning or history.

    Args:
        route: one of :data:`ROUTES_V2`.
        instruction: the task text.
        proposal: the planner's proposed action (shown by
            :func:`~humanclaw_agents.actions.action_text_v2`: ``Turn<left><30.5>`` as
            ``Turn<left><30>``, ``Sit down<0.456>`` as ``Sit down<0.46>``).
        additional_info: the planner's ``additional_info`` (after the turn-for-sit gate).
        recent_actions: executed actions as text, oldest first (used on ``stop_after_sit``
            only; the agent passes :func:`~humanclaw_agents.actions.executed_action_text_v2`).
        version: a v2-family key of :data:`VERIFIER_VERSIONS`.

    Returns:
        The complete prompt text.
    """
    spec = resolve_verifier_version(version)
    if not isinstance(spec, VerifierVersionV2):
        raise ValueError(
            f"verifier_version={version!r} is rendered by render_verifier_prompt, not "
            "render_verifier_prompt_v2"
        )
    if route not in ROUTES_V2:
        raise ValueError(f"route={route!r} is unknown: allowed one of {ROUTES_V2}")
    text = spec.routes[route]
    shown = action_text_v2(proposal)  # numbers rounded as the reference shows them
    payload: dict[str, Any] = {"task": str(instruction).strip(), "proposed_action": shown}
    info = dict(additional_info) if isinstance(additional_info, Mapping) else {}
    if info:
        payload["additional_info"] = info
    if route == "stop_after_sit":
        payload["recent_actions"] = recent_actions_text(recent_actions or ())
    if text.compact_actions:
        actions = "Skills you may choose: " + action_space_text(REPLACEMENT_SKILLS, style="compact")
    else:
        actions = "Skills for the next 0.5 seconds:\n" + action_space_text(
            REPLACEMENT_SKILLS, style="brief"
        )
    ids = sorted({int(skill) for skill in REPLACEMENT_SKILLS} | {int(proposal.skill)})
    final_name = '"<final action>"'
    if route == "stop":
        final_name = '"<final action; with verdict replace, not Stop/Stand>"'
    fields = [
        *text.schema,
        ("verdict", '"accept" | "replace"'),
        ("reason", '"<short reason>"'),
        ("final_action_id", " | ".join(str(i) for i in ids)),
        ("final_action_name", final_name),
    ]
    schema = "{\n" + ",\n".join(f'  "{key}": {value}' for key, value in fields) + "\n}"
    questions = string.Template(text.questions).safe_substitute(speed=proposal.speed or "slow")
    return string.Template(spec.template).substitute(
        proposal=shown,
        actions=actions.rstrip(),
        rules=spec.common_rules + text.rules,
        input_json=json.dumps(payload, ensure_ascii=False, indent=2),
        questions=questions,
        schema=schema,
    )


@dataclass(frozen=True)
class VerdictV2:
    """How the v2 agent read a verifier reply.

    Attributes:
        verdict: ``"replace"`` when a replacement was read and executed, else ``"accept"``.
        final: the action to execute.
        reason: the verifier's reason ("" if absent).
        notes: how the reply was read (a verdict other than accept/replace, a missing or
            placeholder replacement kept the proposal, defaults of the replacement).
    """

    verdict: str
    final: SkillCall
    reason: str = ""
    notes: tuple[str, ...] = ()


def read_verdict_v2(data: Mapping[str, Any], proposal: SkillCall) -> VerdictV2:
    """The reference's reading of a verifier reply; never fails.

    A missing ``verdict`` means accept, and so does any verdict other than ``"replace"``.
    A replace is executed only when ``final_action_name`` is a non-empty text without the
    ``<final action>`` placeholder; it is read by
    :func:`~humanclaw_agents.actions.action_from_reply` together with ``final_action_id``
    (so even Stop/Stand or Sit, which the prompt does not offer, are executed when the
    verifier names them). Otherwise the proposal is kept.
    """
    raw = data.get("verdict")
    verdict = str(raw or "accept").strip().lower()
    reason = str(data.get("reason") or "")
    notes: list[str] = []
    if verdict not in ("accept", "replace"):
        notes.append(f"verdict={raw!r} read as accept")
    name = str(data.get("final_action_name") or "").strip()
    if verdict != "replace":
        return VerdictV2("accept", proposal, reason, tuple(notes))
    if not name or _PLACEHOLDER_ACTION in name:
        notes.append(f"replace without a readable final_action_name ({name!r}): proposal kept")
        return VerdictV2("accept", proposal, reason, tuple(notes))
    final, action_notes = action_from_reply(data.get("final_action_id"), name)
    notes.extend(action_notes)
    return VerdictV2("replace", final, reason, tuple(notes))
