"""Turning a model's reply fields into a :class:`~humanclaw_gym.skills.SkillCall`.

Two rule sets, one per agent variant:

* :func:`action_from_reply` (``psv``, v2): the reference agent's rules. ``action_id`` wins
  over the name; without a readable id the skill is inferred from words in
  ``action_name``, and a name naming no skill becomes Stop/Stand. Parameters come from the
  ``<...>`` groups with the reference's defaults (slow walk, left 10 degree turn, left side
  step, 0.25 m steps, 0.5 m seat) and are clamped into the ranges. It never fails, so a
  reply that is a JSON object always gives an action.
* :func:`action_from_fields` (``psv:v1``): our earlier, strict rules. Id and name must
  agree, parameters may also come from ``additional_info``, defaults are a normal walk and
  30 degrees, and a reply without a usable skill or direction is an error (retried).

Both return the call and a list of notes, one per default or clamp applied.

:func:`action_text_v2` and :func:`executed_action_text_v2` write a call back as the ``psv``
agent shows it in prompts, with numbers rounded as the reference agent rounds them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from humanclaw_agents.replies import ResponseFormatError
from humanclaw_gym.skills import (
    DIRECTIONS,
    NUM_SKILLS,
    SIDE_STEP_DISTANCE_RANGE_M,
    SIT_DEFAULT_HEIGHT_M,
    SIT_HEIGHT_RANGE_M,
    SPEEDS,
    STEP_BACK_DISTANCE_RANGE_M,
    TURN_ANGLE_RANGE_DEG,
    Choice,
    Skill,
    SkillCall,
    SkillCallError,
)

__all__ = [
    "action_from_fields",
    "action_from_reply",
    "action_text_v2",
    "executed_action_text_v2",
]


# ---- v2: the reference agent's rules -----------------------------------------------------------

_REF_DEFAULT_SPEED = "slow"
_REF_DEFAULT_DIRECTION = "left"
_REF_DEFAULT_TURN_DEG = 10.0
_REF_DEFAULT_DISTANCE_M = 0.25
_REF_SIGNED_NUMBER_RE = re.compile(r"-?\d+(?:\.\d+)?")
_REF_NUMBER_RE = re.compile(r"\d+(?:\.\d+)?")


def _ref_groups(text: str) -> list[str]:
    """``re.findall(r"<([^>]+)>", text)`` in linear time (the regex rescans to the end of
    the text from every ``<`` without a later ``>``: minutes for a long reply)."""
    groups: list[str] = []
    position = 0
    while True:
        start = text.find("<", position)
        if start < 0:
            return groups
        end = text.find(">", start + 1)
        if end < 0:  # no later "<" has a ">" after it either
            return groups
        if end == start + 1:  # "<>": the group needs one character; try the next "<"
            position = start + 1
            continue
        groups.append(text[start + 1 : end])
        position = end + 1


def action_from_reply(action_id: Any, action_name: Any) -> tuple[SkillCall, list[str]]:
    """The reference agent's reading of ``action_id`` / ``action_name``; never fails.

    Skill:

    1. ``action_id`` read as an integer the way Python's ``int()`` reads it (``2``,
       ``2.0``, ``"2"``, ``True`` is 1; ``"2.0"`` and ``None`` are unreadable). A
       readable id wins over the name, even when they disagree; an id that is no
       registered skill gives Stop/Stand.
    2. Without a readable id, the first match in the lower-cased name, in this order:
       "downstairs" or "climb down" -> Walk downstairs; starts with "walk" -> Walk;
       "stop" or "stand" -> Stop/Stand; starts with "turn" -> Turn; "climb" -> Climb
       upstairs; "sit" -> Sit down; "step back" or starts with "back" -> Step back;
       "side step", "sidestep" or "side walk" -> Side step; the name of a skill registered
       on top of the built-in ones -> that skill; anything else -> Stop/Stand.

    Parameters (``<...>`` groups, lower-cased, spaces as ``_``):

    * Walk: the second group is the speed (``Walk<forward><fast>``); missing or unknown
      -> slow.
    * Turn: the first group is the direction (anything but "right" is left); the first
      signed number of the second group (or of the whole name when there is no second
      group) is the angle, clamped to 10..120 (so -90 becomes 10); none -> 10.
    * Sit down: the first number in the name, clamped to 0.15..0.85; none -> 0.5.
    * Step back: the first number in the name, clamped to 0.1..0.6; none -> 0.25.
    * Side step: right when "right" appears anywhere in the name, else left; the first
      number after the first group (or in the whole name), clamped to 0.1..0.5; none ->
      0.25.
    * A skill registered on top of the built-in ones: its text form in the name; if that
      does not parse, every parameter at its default (a word's first value, a number's
      low end).

    Args:
        action_id: the reply's ``action_id`` (any JSON value).
        action_name: the reply's ``action_name``, read as text; any falsy value (``None``,
            ``0``, ``0.0``, ``false``, ``""``, ``[]``, ``{}``) is an empty name, as in the
            reference (so ``action_id`` 4 with ``action_name`` 0 sits at the default 0.5 m,
            not at 0 clamped to 0.15 m).

    Returns:
        The SkillCall and one note per inference, default or clamp.
    """
    name = str(action_name or "").strip()
    notes: list[str] = []
    skill_id = _reference_id(action_id)
    if skill_id is None:
        skill_id = _reference_id_from_name(name)
        shown = Skill(skill_id).text_name
        if action_id is not None:
            notes.append(f"action_id={action_id!r} unreadable: skill read from the name")
        if int(skill_id) == int(Skill.STOP) and not _names_stop(name):
            notes.append(f"action_name={name!r} names no skill: read as {shown}")
    elif not 0 <= skill_id < len(Skill):
        notes.append(f"action_id={action_id!r} is no skill id: read as Stop/Stand")
        skill_id = int(Skill.STOP)
    skill = Skill(skill_id)
    groups = [g.strip().lower().replace(" ", "_") for g in _ref_groups(name)]

    if skill is Skill.WALK:
        speed = groups[1] if len(groups) >= 2 else None
        if speed is None:
            notes.append(f"walk speed (second <...> group) missing: used {_REF_DEFAULT_SPEED!r}")
            speed = _REF_DEFAULT_SPEED
        elif speed not in SPEEDS:
            notes.append(f"walk speed <{speed}> unknown: used {_REF_DEFAULT_SPEED!r}")
            speed = _REF_DEFAULT_SPEED
        return SkillCall.walk(speed), notes
    if skill is Skill.TURN:
        if not groups:
            notes.append(f"turn direction missing: used {_REF_DEFAULT_DIRECTION!r}")
        direction = "right" if groups and groups[0] == "right" else "left"
        source = groups[1] if len(groups) >= 2 else name
        angle = _first_number(_REF_SIGNED_NUMBER_RE, source)
        if angle is None:
            notes.append(f"turn angle missing: used {_REF_DEFAULT_TURN_DEG:g}")
            angle = _REF_DEFAULT_TURN_DEG
        angle = _ref_clamp("angle_deg", angle, TURN_ANGLE_RANGE_DEG, notes)
        return SkillCall.turn(direction, angle), notes
    if skill is Skill.CLIMB_UP:
        return SkillCall.climb_up(), notes
    if skill is Skill.CLIMB_DOWN:
        return SkillCall.climb_down(), notes
    if skill is Skill.SIT:
        height = _first_number(_REF_NUMBER_RE, name)
        if height is None:
            notes.append(f"sit height missing: used {SIT_DEFAULT_HEIGHT_M:g}")
            height = SIT_DEFAULT_HEIGHT_M
        return SkillCall.sit(_ref_clamp("height_m", height, SIT_HEIGHT_RANGE_M, notes)), notes
    if skill is Skill.STEP_BACK:
        distance = _first_number(_REF_NUMBER_RE, name)
        if distance is None:
            notes.append(f"step back distance missing: used {_REF_DEFAULT_DISTANCE_M:g}")
            distance = _REF_DEFAULT_DISTANCE_M
        distance = _ref_clamp("distance_m", distance, STEP_BACK_DISTANCE_RANGE_M, notes)
        return SkillCall.step_back(distance), notes
    if skill is Skill.SIDE_STEP:
        direction = "right" if ("right" in groups or "right" in name.lower()) else "left"
        if direction == "left" and "left" not in name.lower():
            notes.append(f"side step direction missing: used {_REF_DEFAULT_DIRECTION!r}")
        source = " ".join(groups[1:]) if len(groups) >= 2 else name
        distance = _first_number(_REF_NUMBER_RE, source)
        if distance is None:
            notes.append(f"side step distance missing: used {_REF_DEFAULT_DISTANCE_M:g}")
            distance = _REF_DEFAULT_DISTANCE_M
        distance = _ref_clamp("distance_m", distance, SIDE_STEP_DISTANCE_RANGE_M, notes)
        return SkillCall.side_step(direction, distance), notes
    if int(skill) >= NUM_SKILLS:  # a skill registered on top of the built-in ones
        return _registered_call(skill, name, notes), notes
    return SkillCall.stop(), notes


def _registered_call(skill: Skill, name: str, notes: list[str]) -> SkillCall:
    """A skill registered by a package of its own, read from its text form in ``name``;
    where that form does not parse (or names another skill), each parameter takes its
    default (a word's first value, a number's low end when it has none)."""
    try:
        call = SkillCall.parse(name)
    except SkillCallError:
        call = None
    if call is not None and call.skill is skill:
        return call
    params: dict[str, Any] = {}
    for param, rule in skill.spec.params.items():
        if rule.default is not None:
            params[param] = rule.default
        else:
            params[param] = rule.values[0] if isinstance(rule, Choice) else rule.low
    notes.append(f"action_name={name!r} is no {skill.text_name} form: used {params}")
    return SkillCall(skill, **params)


def action_text_v2(call: SkillCall) -> str:
    """The text form the ``psv`` agent shows for an action in prompts (the verifier's
    proposal, a replacement named in the history), rounded as the reference agent rounds
    it: the turn angle to a whole degree (Python's ``round``, halves to even:
    ``Turn<left><30.5>`` is shown as ``Turn<left><30>``), heights and distances to two
    decimals (``Sit down<0.456>`` as ``Sit down<0.46>``, ``Step back<0.1>`` as
    ``Step back<0.10>``). The executed action keeps its exact numbers."""
    skill = call.skill
    if skill is Skill.TURN:
        return f"Turn<{call.direction}><{round(float(call.angle_deg))}>"
    if skill is Skill.SIT:
        return f"Sit down<{float(call.height_m):.2f}>"
    if skill is Skill.STEP_BACK:
        return f"Step back<{float(call.distance_m):.2f}>"
    if skill is Skill.SIDE_STEP:
        return f"Side step<{call.direction}><{float(call.distance_m):.2f}>"
    return str(call)


#: Skills the reference agent writes with their id when it lists executed actions.
_TEXT_WITH_ID = (Skill.SIT, Skill.STEP_BACK, Skill.SIDE_STEP, Skill.CLIMB_DOWN)


def executed_action_text_v2(call: SkillCall) -> str:
    """How the ``psv`` agent lists an executed action (the verifier's recent actions after
    sitting, a history row whose planner gave no ``action_name``): :func:`action_text_v2`,
    prefixed ``"action id N: "`` for Sit down, Step back, Side step and Walk downstairs, as
    the reference agent lists them (``"action id 4: Sit down<0.46>"``)."""
    text = action_text_v2(call)
    if call.skill in _TEXT_WITH_ID:
        return f"action id {int(call.skill)}: {text}"
    return text


def _reference_id(action_id: Any) -> int | None:
    """``int(action_id)`` as Python reads it, or ``None`` when that raises."""
    if isinstance(action_id, bool):
        return int(action_id)
    if isinstance(action_id, int):
        return action_id
    if isinstance(action_id, float):
        return int(action_id) if math.isfinite(action_id) else None
    if isinstance(action_id, str):
        try:
            return int(action_id)
        except ValueError:
            return None
    return None


def _reference_id_from_name(name: str) -> int:
    lowered = name.lower()
    if "downstairs" in lowered or "climb down" in lowered:
        return int(Skill.CLIMB_DOWN)
    if lowered.startswith("walk"):
        return int(Skill.WALK)
    if _names_stop(lowered):
        return int(Skill.STOP)
    if lowered.startswith("turn"):
        return int(Skill.TURN)
    if "climb" in lowered:
        return int(Skill.CLIMB_UP)
    if "sit" in lowered:
        return int(Skill.SIT)
    if "step back" in lowered or lowered.startswith("back"):
        return int(Skill.STEP_BACK)
    if any(word in lowered for word in ("side step", "sidestep", "side walk")):
        return int(Skill.SIDE_STEP)
    try:  # a skill registered on top of the built-in ones, by its name
        registered = Skill.from_name(name.partition("<")[0])
    except SkillCallError:
        return int(Skill.STOP)
    return int(registered) if int(registered) >= NUM_SKILLS else int(Skill.STOP)


def _names_stop(name: str) -> bool:
    lowered = name.lower()
    return "stop" in lowered or "stand" in lowered


def _first_number(pattern: re.Pattern[str], text: str) -> float | None:
    match = pattern.search(text)
    return float(match.group(0)) if match else None


def _ref_clamp(field: str, value: float, bounds: tuple[float, float], notes: list[str]) -> float:
    low, high = bounds
    clamped = min(max(value, low), high)
    if clamped != value:
        notes.append(f"{field} {value:g} clamped to {clamped:g}")
    return clamped


# ---- v1: our earlier, strict rules -------------------------------------------------------------

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
