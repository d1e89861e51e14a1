"""The action schema: eight whole-body skills and the validated :class:`SkillCall`.

Every decision of a HumanClaw policy is one :class:`SkillCall`: a :class:`Skill` plus the few
parameters that skill takes. The motion generator turns it into 0.5 s of motion (15 frames at
30 Hz). This module owns the three public forms of a call and the range checks behind them:

* the **text form** used by language-model agents, e.g. ``Turn<left><30>``
  (:meth:`SkillCall.parse` / ``str(call)``);
* the **Gymnasium encoding**, a :class:`gymnasium.spaces.Dict` (:func:`action_space`,
  :meth:`SkillCall.to_action` / :meth:`SkillCall.from_action`), in which **every element of
  the space decodes to a valid SkillCall**, so random samples (``check_env``, exploration
  in RL libraries) never fail validation;
* the **JSON form** used by logs and the benchmark server
  (:meth:`SkillCall.to_dict` / :meth:`SkillCall.from_dict`).

Skills and parameters (ranges are inclusive; values outside them are rejected, never
clipped; clamping is the agent's business, not the environment's):

* 0 Walk forward: ``speed`` slow / normal / fast = 0.2 / 0.4 / 0.6 m per chunk;
  ``Walk<forward><normal>``.
* 1 Stop/Stand: no parameters; ends the episode (the active stop); ``Stop/Stand``.
* 2 Turn in place: ``direction`` left / right, ``angle_deg`` 10..120; ``Turn<left><30>``.
* 3 Climb upstairs: ``speed`` normal only; ``Climb upstairs<normal>``.
* 4 Sit down: ``height_m`` 0.15..0.85 (default 0.5); ``Sit down<0.45>``.
* 5 Step back: ``distance_m`` 0.1..0.6, facing kept; ``Step back<0.25>``.
* 6 Side step: ``direction`` left / right, ``distance_m`` 0.1..0.5, facing kept;
  ``Side step<right><0.25>``.
* 7 Walk downstairs: ``speed`` normal only; ``Walk downstairs<normal>``.

In the Gymnasium encoding each parameter entry has exactly the range of the one skill that
reads it: Step back and Side step have their own distance entries (``step_back_m`` and
``side_step_m``, both stored in :attr:`SkillCall.distance_m`), and ``speed`` is read by Walk
only (the stair skills' single speed needs no entry).

Degrees appear only here, at the text/action boundary; :attr:`SkillCall.condition` hands the
motion generator SI units (metres, radians) in the Y-up world convention.

Importing this module is cheap: Gymnasium is imported only when :func:`action_space` is
called.
"""

from __future__ import annotations

import enum
import math
import numbers
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pragma: no cover - typing only
    from gymnasium import spaces

__all__ = [
    "CLIMB_SPEEDS",
    "DIRECTIONS",
    "NUM_SKILLS",
    "SIDE_STEP_DISTANCE_RANGE_M",
    "SIT_DEFAULT_HEIGHT_M",
    "SIT_HEIGHT_RANGE_M",
    "SPEEDS",
    "STEP_BACK_DISTANCE_RANGE_M",
    "TURN_ANGLE_RANGE_DEG",
    "WALK_SPEED_M",
    "Skill",
    "SkillCall",
    "SkillCallError",
    "SkillCallParseError",
    "action_space",
]

# --------------------------------------------------------------------------------------
# Public constants (the motion generator and agents read these)
# --------------------------------------------------------------------------------------

NUM_SKILLS = 8
"""Number of skills; the ``skill`` entry of the action space is ``Discrete(NUM_SKILLS)``."""

SPEEDS: tuple[str, ...] = ("slow", "normal", "fast")
"""Speed words, in action-space index order (0 slow, 1 normal, 2 fast)."""

CLIMB_SPEEDS: tuple[str, ...] = ("normal",)
"""The only speed the two stair skills accept."""

DIRECTIONS: tuple[str, ...] = ("left", "right")
"""Direction words, in action-space index order (0 left, 1 right)."""

WALK_SPEED_M: dict[str, float] = {"slow": 0.2, "normal": 0.4, "fast": 0.6}
"""Forward distance (m) covered by one 0.5 s Walk chunk, per speed word."""

TURN_ANGLE_RANGE_DEG: tuple[float, float] = (10.0, 120.0)
"""Inclusive range of the Turn angle per chunk, in degrees."""

STEP_BACK_DISTANCE_RANGE_M: tuple[float, float] = (0.1, 0.6)
"""Inclusive range of the Step back distance per chunk, in metres."""

SIDE_STEP_DISTANCE_RANGE_M: tuple[float, float] = (0.1, 0.5)
"""Inclusive range of the Side step distance per chunk, in metres."""

SIT_HEIGHT_RANGE_M: tuple[float, float] = (0.15, 0.85)
"""Inclusive range of the Sit down target surface height, in metres."""

SIT_DEFAULT_HEIGHT_M = 0.5
"""Sit down height used when none is given."""

# Values written into action-space fields that the chosen skill does not use. They are
# ignored on decoding; fixed values keep ``to_action`` deterministic.
_NEUTRAL_SPEED = "normal"
_NEUTRAL_DIRECTION = "left"
_NEUTRAL_ANGLE_DEG = 30.0
_NEUTRAL_DISTANCE_M = 0.25
_NEUTRAL_HEIGHT_M = SIT_DEFAULT_HEIGHT_M

_PARAM_FIELDS = ("speed", "direction", "angle_deg", "distance_m", "height_m")
_WALK_WORD = "forward"


# --------------------------------------------------------------------------------------
# Skill
# --------------------------------------------------------------------------------------


class Skill(enum.IntEnum):
    """The eight whole-body skills; values are the upstream action ids."""

    WALK = 0
    STOP = 1
    TURN = 2
    CLIMB_UP = 3
    SIT = 4
    STEP_BACK = 5
    SIDE_STEP = 6
    CLIMB_DOWN = 7

    @property
    def display_name(self) -> str:
        """Human-readable name from the benchmark's action table, e.g. ``"Turn in place"``."""
        return _DISPLAY_NAMES[self]

    @property
    def text_name(self) -> str:
        """Name used in the text form, e.g. ``"Turn"`` in ``Turn<left><30>``."""
        return _TEXT_NAMES[self]

    @property
    def key(self) -> str:
        """Lower-case identifier used by the JSON form, e.g. ``"side_step"``."""
        return self.name.lower()

    @property
    def params(self) -> tuple[str, ...]:
        """Names of the :class:`SkillCall` fields this skill takes, in text order."""
        return tuple(slot for slot in _TEXT_SLOTS[self] if slot != _WALK_WORD)

    @classmethod
    def from_name(cls, name: str | int) -> Skill:
        """Look a skill up by a loose name or its id.

        Accepts the text name (``"Turn"``), the display name (``"Turn in place"``), the key
        (``"side_step"``), the upstream motion-skill name (``"step_climb_up"``), a few common
        synonyms (``"stop"``, ``"sit"``), or the id as an int or digit string. Case, ``_``,
        ``-`` and repeated spaces do not matter.

        Raises:
            SkillCallError: ``field="skill"`` when nothing matches.
        """
        if isinstance(name, Skill):
            return name
        if isinstance(name, (int, np.integer)) and not isinstance(name, (bool, np.bool_)):
            if 0 <= int(name) < NUM_SKILLS:
                return cls(int(name))
            raise SkillCallError("skill", name, _SKILL_ID_ALLOWED, reason="is not a skill id")
        if isinstance(name, str):
            norm = _normalize_name(name)
            if re.fullmatch(r"[0-9]+", norm) and int(norm) < NUM_SKILLS:
                return cls(int(norm))
            if norm in _NAME_ALIASES:
                return _NAME_ALIASES[norm]
            raise SkillCallError("skill", name, _SKILL_NAME_ALLOWED, reason="is not a skill name")
        raise SkillCallError(
            "skill", name, _SKILL_NAME_ALLOWED, reason="is neither a skill name nor an id"
        )


_DISPLAY_NAMES = {
    Skill.WALK: "Walk forward",
    Skill.STOP: "Stop/Stand",
    Skill.TURN: "Turn in place",
    Skill.CLIMB_UP: "Climb upstairs",
    Skill.SIT: "Sit down",
    Skill.STEP_BACK: "Step back",
    Skill.SIDE_STEP: "Side step",
    Skill.CLIMB_DOWN: "Walk downstairs",
}

_TEXT_NAMES = {
    Skill.WALK: "Walk",
    Skill.STOP: "Stop/Stand",
    Skill.TURN: "Turn",
    Skill.CLIMB_UP: "Climb upstairs",
    Skill.SIT: "Sit down",
    Skill.STEP_BACK: "Step back",
    Skill.SIDE_STEP: "Side step",
    Skill.CLIMB_DOWN: "Walk downstairs",
}

# The ``<...>`` slots of the text form, in order. ``_WALK_WORD`` is the literal "forward".
_TEXT_SLOTS: dict[Skill, tuple[str, ...]] = {
    Skill.WALK: (_WALK_WORD, "speed"),
    Skill.STOP: (),
    Skill.TURN: ("direction", "angle_deg"),
    Skill.CLIMB_UP: ("speed",),
    Skill.SIT: ("height_m",),
    Skill.STEP_BACK: ("distance_m",),
    Skill.SIDE_STEP: ("direction", "distance_m"),
    Skill.CLIMB_DOWN: ("speed",),
}

# Upstream motion-skill names and common synonyms, besides text/display names and keys.
_EXTRA_ALIASES: dict[Skill, tuple[str, ...]] = {
    Skill.WALK: ("walk_forward",),
    Skill.STOP: ("stop", "stand", "stop stand"),
    Skill.TURN: ("turn",),
    Skill.CLIMB_UP: ("climb up", "step_climb_up"),
    Skill.SIT: ("sit",),
    Skill.STEP_BACK: ("step_back",),
    Skill.SIDE_STEP: ("side_walk", "sidestep"),
    Skill.CLIMB_DOWN: ("climb down", "climb downstairs", "step_climb_down"),
}


def _normalize_name(name: str) -> str:
    text = re.sub(r"[_\-\s]+", " ", name.strip().lower())
    return re.sub(r"\s*/\s*", "/", text)


def _build_aliases() -> dict[str, Skill]:
    table: dict[str, Skill] = {}
    for skill in Skill:
        names = (skill.text_name, skill.display_name, skill.key, *_EXTRA_ALIASES[skill])
        for raw in names:
            norm = _normalize_name(raw)
            if table.get(norm, skill) is not skill:  # pragma: no cover - table sanity
                raise RuntimeError(f"skill alias {raw!r} is ambiguous")
            table[norm] = skill
    return table


_NAME_ALIASES = _build_aliases()
_SKILL_ID_ALLOWED = f"an id 0..{NUM_SKILLS - 1}"
_SKILL_NAME_ALLOWED = (
    "one of " + ", ".join(repr(_TEXT_NAMES[s]) for s in Skill) + f" (or {_SKILL_ID_ALLOWED})"
)


# --------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------


class SkillCallError(ValueError):
    """A SkillCall (or one of its encodings) is invalid.

    Attributes:
        field: the offending field, e.g. ``"angle_deg"``; ``"text"`` for text-form errors.
        value: the offending value as given.
        allowed: human-readable description of what is allowed, e.g.
            ``"10 <= angle_deg <= 120"``.
        skill: the skill whose rules were violated, when known.
    """

    def __init__(
        self,
        field: str,
        value: Any,
        allowed: str,
        *,
        reason: str = "is out of range",
        skill: Skill | None = None,
        message: str | None = None,
    ) -> None:
        self.field = field
        self.value = value
        self.allowed = allowed
        self.skill = skill
        if message is None:
            message = f"SkillCall.{field}={value!r} {reason}: allowed {allowed}"
            if skill is not None:
                message += f" ({skill.text_name})"
        super().__init__(message)

    def __reduce__(self) -> tuple[Any, ...]:
        # Keep the attributes across pickling (process pools, Ray).
        return (
            _rebuild_error,
            (type(self), self.field, self.value, self.allowed, self.skill, str(self)),
        )


class SkillCallParseError(SkillCallError):
    """The text form of a SkillCall could not be parsed (``field`` is always ``"text"``).

    Attributes:
        param: the parameter the problem is about (e.g. ``"angle_deg"``), or ``None`` when
            the problem is the shape of the text or the skill name.
    """

    def __init__(
        self,
        text: Any,
        detail: str,
        allowed: str,
        *,
        skill: Skill | None = None,
        param: str | None = None,
        message: str | None = None,
    ) -> None:
        self.param = param
        if message is None:
            message = f"SkillCall.text={text!r} is invalid: {detail}: allowed {allowed}"
        super().__init__("text", text, allowed, skill=skill, message=message)

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            _rebuild_error,
            (type(self), self.field, self.value, self.allowed, self.skill, str(self), self.param),
        )


def _rebuild_error(
    cls: type[SkillCallError],
    field: str,
    value: Any,
    allowed: str,
    skill: Skill | None,
    message: str,
    param: str | None = None,
) -> SkillCallError:
    error = cls.__new__(cls)
    ValueError.__init__(error, message)
    error.field = field
    error.value = value
    error.allowed = allowed
    error.skill = skill
    if issubclass(cls, SkillCallParseError):
        error.param = param  # type: ignore[attr-defined]
    return error


# --------------------------------------------------------------------------------------
# Per-skill parameter rules
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Choice:
    values: tuple[str, ...]
    default: str | None = None

    def allowed(self, field: str) -> str:
        return " | ".join(repr(v) for v in self.values)


@dataclass(frozen=True)
class _Range:
    low: float
    high: float
    default: float | None = None

    def allowed(self, field: str) -> str:
        return f"{_format_number(self.low)} <= {field} <= {_format_number(self.high)}"


_RULES: dict[Skill, dict[str, _Choice | _Range]] = {
    Skill.WALK: {"speed": _Choice(SPEEDS, default="normal")},
    Skill.STOP: {},
    Skill.TURN: {"direction": _Choice(DIRECTIONS), "angle_deg": _Range(*TURN_ANGLE_RANGE_DEG)},
    Skill.CLIMB_UP: {"speed": _Choice(CLIMB_SPEEDS, default="normal")},
    Skill.SIT: {"height_m": _Range(*SIT_HEIGHT_RANGE_M, default=SIT_DEFAULT_HEIGHT_M)},
    Skill.STEP_BACK: {"distance_m": _Range(*STEP_BACK_DISTANCE_RANGE_M)},
    Skill.SIDE_STEP: {
        "direction": _Choice(DIRECTIONS),
        "distance_m": _Range(*SIDE_STEP_DISTANCE_RANGE_M),
    },
    Skill.CLIMB_DOWN: {"speed": _Choice(CLIMB_SPEEDS, default="normal")},
}


def _format_number(value: float) -> str:
    """Shortest exact text for a finite float: ``30.0 -> "30"``, ``0.45 -> "0.45"``."""
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))


def _as_float(field: str, value: Any, skill: Skill, allowed: str) -> float:
    """Convert a real scalar to a Python float (no range check). Rejects bools and non-reals."""
    if isinstance(value, (bool, np.bool_)):
        raise SkillCallError(field, value, allowed, reason="is a bool, not a number", skill=skill)
    if not isinstance(value, numbers.Real):
        raise SkillCallError(field, value, allowed, reason="is not a real number", skill=skill)
    try:
        if isinstance(value, (np.float16, np.float32)):
            # Read narrow floats as the decimal they print as, so float32(0.6) means 0.6 and
            # not 0.6000000238 (which would fall outside an inclusive upper bound of 0.6).
            result = float(str(value))
        else:
            result = float(value)
    except OverflowError:  # e.g. a huge Python int
        result = math.inf
    if not math.isfinite(result):
        raise SkillCallError(field, result, allowed, reason="is not finite", skill=skill)
    return result


def _validate_param(skill: Skill, field: str, value: Any) -> Any:
    """Return the canonical value of one parameter of ``skill`` or raise SkillCallError."""
    rules = _RULES[skill]
    rule = rules.get(field)
    if rule is None:
        if value is not None:
            takes = ", ".join(rules) if rules else "no parameters"
            raise SkillCallError(
                field,
                value,
                f"None; this skill takes {takes}",
                reason="is not a parameter of this skill",
                skill=skill,
            )
        return None
    allowed = rule.allowed(field)
    if value is None:
        if rule.default is None:
            raise SkillCallError(field, None, allowed, reason="is required", skill=skill)
        return rule.default
    if isinstance(rule, _Choice):
        if not isinstance(value, str):
            raise SkillCallError(field, value, allowed, reason="is not a string", skill=skill)
        if value not in rule.values:
            raise SkillCallError(field, value, allowed, reason="is not accepted", skill=skill)
        return rule.values[rule.values.index(value)]  # the plain-str constant
    number = _as_float(field, value, skill, allowed)
    if not rule.low <= number <= rule.high:
        raise SkillCallError(field, number, allowed, reason="is out of range", skill=skill)
    return number


# --------------------------------------------------------------------------------------
# SkillCall
# --------------------------------------------------------------------------------------

_PARAM_RE = re.compile(r"<([^<>]*)>\s*")
_NUMBER_RE = re.compile(r"^[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$")
_NONFINITE_RE = re.compile(r"^[+-]?(?:nan|inf|infinity)$", re.IGNORECASE)


@dataclass(frozen=True, repr=False)
class SkillCall:
    """One validated skill call: the unit of decision of a HumanClaw policy.

    Construct it with the per-skill helpers (:meth:`walk`, :meth:`stop`, :meth:`turn`,
    :meth:`climb_up`, :meth:`sit`, :meth:`step_back`, :meth:`side_step`,
    :meth:`climb_down`), from text (:meth:`parse`), from the Gymnasium encoding
    (:meth:`from_action`), from JSON (:meth:`from_dict`), or directly. Validation happens
    in the constructor, so every instance is valid:

    * a parameter the skill does not take must be ``None``;
    * a parameter the skill requires must be given; ``None`` picks the documented default
      where there is one (Walk and the stair skills: speed ``"normal"``; Sit: height 0.5 m);
    * numbers must be finite reals (``bool`` is rejected) inside the inclusive per-skill
      range; they are never clipped and are stored as Python ``float``;
    * words must match exactly (``"left"``, not ``"Left"``); only :meth:`parse` is lenient.

    Attributes:
        skill: which of the eight skills.
        speed: ``"slow"`` / ``"normal"`` / ``"fast"`` for Walk (0.2 / 0.4 / 0.6 m per
            chunk); the stair skills accept only ``"normal"``.
        direction: ``"left"`` / ``"right"`` for Turn and Side step.
        angle_deg: Turn angle per chunk, 10..120 degrees.
        distance_m: Step back 0.1..0.6 m, Side step 0.1..0.5 m (always positive; the
            direction word gives the side).
        height_m: Sit down target surface height, 0.15..0.85 m.

    Raises:
        SkillCallError: naming the field, the value and what is allowed.
    """

    skill: Skill
    speed: str | None = None
    direction: str | None = None
    angle_deg: float | None = None
    distance_m: float | None = None
    height_m: float | None = None

    def __post_init__(self) -> None:
        skill = self.skill
        if not isinstance(skill, Skill):
            if isinstance(skill, (bool, np.bool_)) or not isinstance(skill, (int, np.integer)):
                raise SkillCallError(
                    "skill",
                    skill,
                    f"a Skill or an int id 0..{NUM_SKILLS - 1}",
                    reason="is not a Skill",
                )
            skill = Skill.from_name(int(skill))
            object.__setattr__(self, "skill", skill)
        for field in _PARAM_FIELDS:
            value = _validate_param(skill, field, getattr(self, field))
            object.__setattr__(self, field, value)

    # ---- convenience constructors ---------------------------------------------------

    @classmethod
    def walk(cls, speed: str = "normal") -> SkillCall:
        """Walk forward one chunk: 0.2 / 0.4 / 0.6 m for ``"slow"`` / ``"normal"`` / ``"fast"``."""
        return cls(Skill.WALK, speed=speed)

    @classmethod
    def stop(cls) -> SkillCall:
        """Stop/Stand: the active stop that ends the episode."""
        return cls(Skill.STOP)

    @classmethod
    def turn(cls, direction: str, angle_deg: float) -> SkillCall:
        """Turn in place by ``angle_deg`` (10..120) to the ``"left"`` or ``"right"``."""
        return cls(Skill.TURN, direction=direction, angle_deg=angle_deg)

    @classmethod
    def climb_up(cls) -> SkillCall:
        """Climb one stair step up (speed is always ``"normal"``)."""
        return cls(Skill.CLIMB_UP, speed="normal")

    @classmethod
    def sit(cls, height_m: float = SIT_DEFAULT_HEIGHT_M) -> SkillCall:
        """Sit down on a surface ``height_m`` (0.15..0.85) above the floor."""
        return cls(Skill.SIT, height_m=height_m)

    @classmethod
    def step_back(cls, distance_m: float) -> SkillCall:
        """Step back ``distance_m`` (0.1..0.6) while keeping the facing direction."""
        return cls(Skill.STEP_BACK, distance_m=distance_m)

    @classmethod
    def side_step(cls, direction: str, distance_m: float) -> SkillCall:
        """Side step ``distance_m`` (0.1..0.5) to the ``"left"`` or ``"right"``, keep facing."""
        return cls(Skill.SIDE_STEP, direction=direction, distance_m=distance_m)

    @classmethod
    def climb_down(cls) -> SkillCall:
        """Walk one stair step down (speed is always ``"normal"``)."""
        return cls(Skill.CLIMB_DOWN, speed="normal")

    # ---- derived views --------------------------------------------------------------

    @property
    def is_stop(self) -> bool:
        """True for Stop/Stand, the only skill that produces no motion."""
        return self.skill is Skill.STOP

    @property
    def is_motion(self) -> bool:
        """True for every skill except Stop/Stand."""
        return self.skill is not Skill.STOP

    @property
    def params(self) -> dict[str, str | float]:
        """The parameters this skill takes, by field name (canonical values)."""
        return {field: getattr(self, field) for field in self.skill.params}

    @property
    def condition(self) -> dict[str, float]:
        """Numeric conditioning for the motion generator, in SI units (a new dict each call).

        Sign convention (world frame is Y-up, the body faces its local forward axis):

        * Walk: ``{"distance_m": d}``, forward distance of the chunk (> 0).
        * Stop/Stand: ``{}``.
        * Turn: ``{"angle_rad": a}``, rotation about +Y; **left is positive**
          (counter-clockwise seen from above), right is negative.
        * Climb upstairs / Walk downstairs: ``{"stair_steps": +1.0}`` / ``{"stair_steps": -1.0}``.
        * Sit down: ``{"height_m": h}``, target surface height above the floor.
        * Step back: ``{"distance_m": d}``, backward distance (> 0), facing kept.
        * Side step: ``{"lateral_m": s}``, **left is positive**, right negative, facing kept.
        """
        skill = self.skill
        if skill is Skill.WALK:
            return {"distance_m": WALK_SPEED_M[self.speed]}  # type: ignore[index]
        if skill is Skill.STOP:
            return {}
        if skill is Skill.TURN:
            sign = 1.0 if self.direction == "left" else -1.0
            return {"angle_rad": sign * math.radians(self.angle_deg)}  # type: ignore[arg-type]
        if skill is Skill.CLIMB_UP:
            return {"stair_steps": 1.0}
        if skill is Skill.CLIMB_DOWN:
            return {"stair_steps": -1.0}
        if skill is Skill.SIT:
            return {"height_m": self.height_m}  # type: ignore[dict-item]
        if skill is Skill.STEP_BACK:
            return {"distance_m": self.distance_m}  # type: ignore[dict-item]
        sign = 1.0 if self.direction == "left" else -1.0
        return {"lateral_m": sign * self.distance_m}  # type: ignore[operator]

    # ---- text form ------------------------------------------------------------------

    def __str__(self) -> str:
        parts = [self.skill.text_name]
        for slot in _TEXT_SLOTS[self.skill]:
            if slot == _WALK_WORD:
                parts.append(f"<{_WALK_WORD}>")
                continue
            value = getattr(self, slot)
            parts.append(f"<{value if isinstance(value, str) else _format_number(value)}>")
        return "".join(parts)

    def __repr__(self) -> str:
        # Reads like the helper call that rebuilds it; fixed single-choice words (the
        # stairs' "normal") are not helper arguments.
        args = ", ".join(
            f"{name}={value!r}"
            for name, value in self.params.items()
            if not (isinstance(rule := _RULES[self.skill][name], _Choice) and len(rule.values) == 1)
        )
        return f"SkillCall.{self.skill.key}({args})"

    @classmethod
    def parse(cls, text: str) -> SkillCall:
        """Parse the text form, e.g. ``"Turn<left><30>"`` or ``"Sit down<0.45>"``.

        Lenient about surrounding whitespace, spaces inside the brackets, letter case of
        names and words, and skill-name spellings (see :meth:`Skill.from_name`, which also
        accepts the id: ``"2<left><30>"``). Strict about everything else: the number of
        ``<...>`` parameters, the words, and the numbers (plain decimals, finite, inside
        the skill's range). ``parse(str(call)) == call`` for every valid call and
        ``str(parse(text)) == text`` for every text ``str`` produces.

        Raises:
            TypeError: ``text`` is not a str.
            SkillCallParseError: (a :class:`SkillCallError` with ``field="text"``) saying
                what is wrong.
        """
        if not isinstance(text, str):
            raise TypeError(f"SkillCall.parse expects a str, got {type(text).__name__}")
        grammar = "Name<param>...<param>, e.g. 'Turn<left><30>'"
        if not text.strip():
            raise SkillCallParseError(text, "the text is empty", grammar)
        split = _split_text(text)
        if split is None:
            raise SkillCallParseError(
                text, "it is not of the form name followed by <...> parameters", grammar
            )
        name, raw_params = split
        if not name:
            raise SkillCallParseError(text, "the skill name is missing", _SKILL_NAME_ALLOWED)
        try:
            skill = Skill.from_name(name)
        except SkillCallError:
            raise SkillCallParseError(
                text, f"unknown skill name {name!r}", _SKILL_NAME_ALLOWED
            ) from None
        slots = _TEXT_SLOTS[skill]
        usage = _text_usage(skill)
        if len(raw_params) != len(slots):
            raise SkillCallParseError(
                text,
                f"{skill.text_name} takes {len(slots)} <...> parameter(s), got {len(raw_params)}",
                usage,
                skill=skill,
            )
        kwargs: dict[str, Any] = {}
        for slot, raw in zip(slots, raw_params, strict=True):
            if slot == _WALK_WORD:
                if raw.lower() != _WALK_WORD:
                    raise SkillCallParseError(
                        text, f"expected <{_WALK_WORD}>, got <{raw}>", usage, skill=skill
                    )
                continue
            kwargs[slot] = _parse_param(text, skill, slot, raw, usage)
        try:
            return cls(skill, **kwargs)
        except SkillCallError as error:
            detail = str(error).removeprefix("SkillCall.")
            raise SkillCallParseError(
                text,
                detail,
                error.allowed,
                skill=skill,
                param=error.field,
                message=f"SkillCall.text={text!r} is invalid: {detail}",
            ) from error

    # ---- Gymnasium encoding ---------------------------------------------------------

    @classmethod
    def action_space(cls, seed: int | None = None) -> spaces.Dict:
        """The Gymnasium action space; see :func:`action_space`."""
        return action_space(seed)

    def to_action(self) -> dict[str, Any]:
        """Encode as an element of :func:`action_space`.

        ``action_space().contains(call.to_action())`` holds for every valid call, and
        ``SkillCall.from_action(call.to_action()) == call`` exactly.

        Returns:
            ``{"skill": int64, "speed": int64, "direction": int64, "angle_deg": float64[1],
            "step_back_m": float64[1], "side_step_m": float64[1], "height_m": float64[1]}``.
            :attr:`distance_m` goes to ``step_back_m`` for Step back and to ``side_step_m``
            for Side step. Entries the skill does not read hold fixed neutral values (speed
            normal, direction left, angle 30, distances 0.25, height 0.5); the stair skills
            write their speed "normal" but :meth:`from_action` does not read it.
        """
        skill = self.skill
        speed = self.speed if self.speed is not None else _NEUTRAL_SPEED
        direction = self.direction if self.direction is not None else _NEUTRAL_DIRECTION
        angle = self.angle_deg if self.angle_deg is not None else _NEUTRAL_ANGLE_DEG
        step_back = self.distance_m if skill is Skill.STEP_BACK else _NEUTRAL_DISTANCE_M
        side_step = self.distance_m if skill is Skill.SIDE_STEP else _NEUTRAL_DISTANCE_M
        height = self.height_m if self.height_m is not None else _NEUTRAL_HEIGHT_M
        return {
            "skill": np.int64(int(skill)),
            "speed": np.int64(SPEEDS.index(speed)),
            "direction": np.int64(DIRECTIONS.index(direction)),
            "angle_deg": np.array([angle], dtype=np.float64),
            "step_back_m": np.array([step_back], dtype=np.float64),
            "side_step_m": np.array([side_step], dtype=np.float64),
            "height_m": np.array([height], dtype=np.float64),
        }

    @classmethod
    def from_action(cls, action: Mapping[str, Any]) -> SkillCall:
        """Decode an element of :func:`action_space` (or any equivalent mapping).

        Every element of the space decodes to a valid call: each entry's Box is exactly the
        range of the one skill that reads it. Which entries each skill reads:

        * Walk: ``speed``; Stop/Stand and the stair skills: nothing (the stairs' only speed
          is "normal", so ``speed`` is ignored for them);
        * Turn: ``direction``, ``angle_deg``; Sit down: ``height_m``;
        * Step back: ``step_back_m``; Side step: ``direction``, ``side_step_m`` (both
          become :attr:`distance_m`).

        Each entry may be a Python number, a numpy scalar, or a 0-d / 1-element numpy array
        (or list); discrete entries must be integers, continuous ones integer or float
        (float16/32 values are read as the decimal they print as). Entries the skill does
        not read may be missing or hold anything, but unknown keys are rejected. Mappings
        built by hand are still validated: a value outside the entry's range (e.g.
        ``side_step_m=0.55``) raises, naming the action key.

        Raises:
            TypeError: ``action`` is not a mapping.
            SkillCallError: naming the action key (``field``) for a missing, malformed,
                unknown or out-of-range entry.
        """
        if not isinstance(action, Mapping):
            raise TypeError(
                f"SkillCall.from_action expects a mapping like action_space().sample(), "
                f"got {type(action).__name__}"
            )
        unknown = [key for key in action if key not in _ACTION_FIELDS]
        if unknown:
            raise SkillCallError(
                "action",
                unknown[0],
                "keys " + ", ".join(_ACTION_FIELDS),
                reason="has an unknown key",
            )
        if "skill" not in action:
            raise SkillCallError("skill", None, _SKILL_ID_ALLOWED, reason="is missing")
        skill = Skill(_decode_index("skill", action["skill"], NUM_SKILLS, _SKILL_ID_ALLOWED))
        kwargs: dict[str, Any] = {}
        for field, key in _ACTION_READS[skill].items():
            rule = _RULES[skill][field]
            allowed = rule.allowed(key)
            if key not in action:
                raise SkillCallError(key, None, allowed, reason="is missing", skill=skill)
            raw = action[key]
            if isinstance(rule, _Range):
                kwargs[field] = _decode_number(skill, key, raw, rule)
            else:  # speed (Walk) or direction: an index into the rule's words
                meaning = _SPEED_INDEX if field == "speed" else _DIRECTION_INDEX
                kwargs[field] = rule.values[_decode_index(key, raw, len(rule.values), meaning)]
        return cls(skill, **kwargs)

    # ---- JSON form ------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form, e.g. ``{"skill": "turn", "direction": "left", "angle_deg": 30.0}``.

        Only the parameters the skill takes are present; ``skill`` is :attr:`Skill.key`.
        """
        return {"skill": self.skill.key, **self.params}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SkillCall:
        """Inverse of :meth:`to_dict`.

        ``skill`` may be any name :meth:`Skill.from_name` accepts, or the int id. Keys other
        than ``skill`` and the skill's own parameters are rejected.

        Raises:
            TypeError: ``data`` is not a mapping.
            SkillCallError: naming the offending key.
        """
        if not isinstance(data, Mapping):
            raise TypeError(f"SkillCall.from_dict expects a mapping, got {type(data).__name__}")
        if "skill" not in data:
            raise SkillCallError("skill", None, _SKILL_NAME_ALLOWED, reason="is missing")
        skill = Skill.from_name(data["skill"])
        for key in data:
            if key != "skill" and key not in _PARAM_FIELDS:
                raise SkillCallError(
                    "dict",
                    key,
                    "keys skill, " + ", ".join(_PARAM_FIELDS),
                    reason="has an unknown key",
                )
        kwargs = {key: value for key, value in data.items() if key != "skill"}
        return cls(skill, **kwargs)

    # ---- coercion -------------------------------------------------------------------

    @classmethod
    def coerce(cls, value: Any) -> SkillCall:
        """Turn any accepted action form into a SkillCall.

        Accepts a SkillCall (returned as is), its text form (:meth:`parse`), the JSON form
        (a mapping whose ``skill`` is a str, :meth:`from_dict`) or the Gymnasium encoding (a
        mapping whose ``skill`` is an integer, :meth:`from_action`).

        Raises:
            TypeError: for any other type.
            SkillCallError: when the value has an accepted type but is invalid.
        """
        if isinstance(value, SkillCall):
            return value
        if isinstance(value, str):
            return cls.parse(value)
        if isinstance(value, Mapping):
            if isinstance(value.get("skill"), str):
                return cls.from_dict(value)
            return cls.from_action(value)
        raise TypeError(
            "expected a SkillCall, its text form (str, e.g. 'Turn<left><30>'), its JSON form "
            "(dict with a str 'skill') or its action-space encoding (dict with an int 'skill'); "
            f"got {type(value).__name__}"
        )


# --------------------------------------------------------------------------------------
# Helpers for parse / from_action
# --------------------------------------------------------------------------------------

_ACTION_FIELDS = (
    "skill",
    "speed",
    "direction",
    "angle_deg",
    "step_back_m",
    "side_step_m",
    "height_m",
)

# Per skill: the SkillCall fields read from the action dict, and the key each is read from.
# A skill parameter absent here has a single allowed value (the stairs' speed "normal")
# that the constructor fills in, so no sample can make it invalid.
_ACTION_READS: dict[Skill, dict[str, str]] = {
    Skill.WALK: {"speed": "speed"},
    Skill.STOP: {},
    Skill.TURN: {"direction": "direction", "angle_deg": "angle_deg"},
    Skill.CLIMB_UP: {},
    Skill.SIT: {"height_m": "height_m"},
    Skill.STEP_BACK: {"distance_m": "step_back_m"},
    Skill.SIDE_STEP: {"direction": "direction", "distance_m": "side_step_m"},
    Skill.CLIMB_DOWN: {},
}
_SPEED_INDEX = "0 slow, 1 normal, 2 fast"
_DIRECTION_INDEX = "0 left, 1 right"


def _split_text(text: str) -> tuple[str, list[str]] | None:
    """``" Turn <left>< 30 > "`` -> ``("Turn", ["left", "30"])``; None if malformed.

    Linear time: a hand-rolled scan instead of one backtracking regex, since the text
    may come from a model and be arbitrarily long.
    """
    body = text.strip()
    start = body.find("<")
    if start < 0:
        start = len(body)
    name = body[:start].strip()
    if ">" in name:
        return None
    params: list[str] = []
    pos = start
    while pos < len(body):
        match = _PARAM_RE.match(body, pos)
        if match is None:
            return None
        params.append(match.group(1).strip())
        pos = match.end()
    return name, params


def _text_usage(skill: Skill) -> str:
    """E.g. ``"Turn<left|right><10..120>"``."""
    parts = [skill.text_name]
    for slot in _TEXT_SLOTS[skill]:
        if slot == _WALK_WORD:
            parts.append(f"<{_WALK_WORD}>")
            continue
        rule = _RULES[skill][slot]
        if isinstance(rule, _Choice):
            parts.append("<" + "|".join(rule.values) + ">")
        else:
            parts.append(f"<{_format_number(rule.low)}..{_format_number(rule.high)}>")
    return "".join(parts)


def _parse_param(text: str, skill: Skill, slot: str, raw: str, usage: str) -> Any:
    rule = _RULES[skill][slot]
    if isinstance(rule, _Choice):
        word = raw.lower()
        if word not in rule.values:
            raise SkillCallParseError(
                text,
                f"{slot} word <{raw}> is not accepted",
                usage,
                skill=skill,
                param=slot,
            )
        return word
    if _NONFINITE_RE.match(raw):
        raise SkillCallParseError(
            text, f"{slot}=<{raw}> is not finite", usage, skill=skill, param=slot
        )
    if not _NUMBER_RE.match(raw):
        raise SkillCallParseError(
            text, f"{slot}=<{raw}> is not a plain decimal number", usage, skill=skill, param=slot
        )
    return float(raw)


def _scalar_array(value: Any) -> np.ndarray | None:
    """0-d array for a numpy scalar / 0-d / 1-element array or list; None if not such."""
    if isinstance(value, (np.ndarray, np.generic, list, tuple)):
        try:
            array = np.asarray(value)
        except (ValueError, TypeError):
            return None
        if array.ndim <= 1 and array.size == 1:
            return array.reshape(())
    return None


def _decode_index(field: str, value: Any, count: int, allowed: str) -> int:
    allowed_text = f"an integer in 0..{count - 1} ({allowed})"
    if isinstance(value, bool):
        raise SkillCallError(field, value, allowed_text, reason="is a bool, not an integer")
    if isinstance(value, int):
        index = value
    else:
        array = _scalar_array(value)
        if array is None or array.dtype.kind not in "iu":
            raise SkillCallError(
                field,
                value,
                allowed_text,
                reason="is not an integer scalar or 1-element integer array",
            )
        index = int(array)
    if not 0 <= index < count:
        raise SkillCallError(field, value, allowed_text, reason="is out of range")
    return index


def _decode_real(skill: Skill, field: str, value: Any, allowed: str) -> Any:
    if isinstance(value, (bool, np.bool_)):
        raise SkillCallError(field, value, allowed, reason="is a bool, not a number", skill=skill)
    if isinstance(value, (int, float)):
        return value
    array = _scalar_array(value)
    if array is None or array.dtype.kind not in "iuf":
        raise SkillCallError(
            field,
            value,
            allowed,
            reason="is not a real scalar or 1-element real array",
            skill=skill,
        )
    return array[()]  # numpy scalar


def _decode_number(skill: Skill, key: str, value: Any, rule: _Range) -> float:
    """Read a continuous action entry and check it against ``rule``, naming ``key``."""
    allowed = rule.allowed(key)
    number = _as_float(key, _decode_real(skill, key, value, allowed), skill, allowed)
    if not rule.low <= number <= rule.high:
        raise SkillCallError(key, number, allowed, reason="is out of range", skill=skill)
    return number


def action_space(seed: int | None = None) -> spaces.Dict:
    """The Gymnasium action space of the HumanClaw environments.

    ``Dict`` with, in this order:

    * ``skill``: ``Discrete(8)``, the :class:`Skill` id;
    * ``speed``: ``Discrete(3)``, 0 slow, 1 normal, 2 fast (Walk only; the stair skills
      always use normal and ignore it);
    * ``direction``: ``Discrete(2)``, 0 left, 1 right (Turn, Side step);
    * ``angle_deg``: ``Box(10, 120, (1,), float64)`` (Turn);
    * ``step_back_m``: ``Box(0.1, 0.6, (1,), float64)`` (Step back);
    * ``side_step_m``: ``Box(0.1, 0.5, (1,), float64)`` (Side step);
    * ``height_m``: ``Box(0.15, 0.85, (1,), float64)`` (Sit down).

    Every element of this space decodes to a valid :class:`SkillCall` with
    :meth:`SkillCall.from_action`: each entry is read by one skill only and its bounds are
    exactly that skill's range, so ``SkillCall.from_action(space.sample())`` never raises
    and random-action tools (``gymnasium.utils.env_checker.check_env``, RL exploration)
    work unchanged. float64 keeps the round trip ``SkillCall.from_action(call.to_action())
    == call`` exact.

    Args:
        seed: optional seed for the space's sampler.

    Returns:
        A new :class:`gymnasium.spaces.Dict` (keys in the order above).
    """
    from gymnasium import spaces

    def box(low: float, high: float) -> spaces.Box:
        return spaces.Box(low=low, high=high, shape=(1,), dtype=np.float64)

    return spaces.Dict(
        {
            "skill": spaces.Discrete(NUM_SKILLS),
            "speed": spaces.Discrete(len(SPEEDS)),
            "direction": spaces.Discrete(len(DIRECTIONS)),
            "angle_deg": box(*TURN_ANGLE_RANGE_DEG),
            "step_back_m": box(*STEP_BACK_DISTANCE_RANGE_M),
            "side_step_m": box(*SIDE_STEP_DISTANCE_RANGE_M),
            "height_m": box(*SIT_HEIGHT_RANGE_M),
        },
        seed=seed,
        sort_keys=False,
    )
