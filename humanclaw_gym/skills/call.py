"""The validated :class:`SkillCall` and its three public forms.

* the **text form** used by language-model agents, e.g. ``Turn<left><30>``
  (:meth:`SkillCall.parse` / ``str(call)``);
* the **Gymnasium encoding**, a :class:`gymnasium.spaces.Dict` (:func:`action_space`,
  :meth:`SkillCall.to_action` / :meth:`SkillCall.from_action`), in which **every element of
  the space decodes to a valid SkillCall**;
* the **JSON form** used by logs and the benchmark server
  (:meth:`SkillCall.to_dict` / :meth:`SkillCall.from_dict`).

All three are derived from the skill table (:mod:`humanclaw_gym.skills.catalog`); nothing
here is specific to one skill.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from humanclaw_gym.skills.catalog import (
    SIT_DEFAULT_HEIGHT_M,
    Skill,
    action_fields,
    skill_id_allowed,
    skill_name_allowed,
)
from humanclaw_gym.skills.errors import (
    SkillCallError,
    SkillCallParseError,
    SkillCallTypeError,
    clip,
    shown,
)
from humanclaw_gym.skills.spec import PARAM_FIELDS, WALK_WORD, Choice, Range, format_number

if TYPE_CHECKING:  # pragma: no cover - typing only
    from gymnasium import spaces

__all__ = ["SkillCall", "action_space"]


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
    rules = skill.spec.params
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
    if isinstance(rule, Choice):
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
                    f"a Skill or an int id 0..{len(Skill) - 1}",
                    reason="is not a Skill",
                )
            skill = Skill.from_name(int(skill))
            object.__setattr__(self, "skill", skill)
        for field in PARAM_FIELDS:
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
        return self.skill.spec.terminal

    @property
    def is_motion(self) -> bool:
        """True for every skill except Stop/Stand."""
        return not self.skill.spec.terminal

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
        return self.skill.spec.condition(self.params)

    # ---- text form ------------------------------------------------------------------

    def __str__(self) -> str:
        parts = [self.skill.text_name]
        for slot in self.skill.spec.slots:
            if slot == WALK_WORD:
                parts.append(f"<{WALK_WORD}>")
                continue
            value = getattr(self, slot)
            parts.append(f"<{value if isinstance(value, str) else format_number(value)}>")
        return "".join(parts)

    def __repr__(self) -> str:
        # Reads like the helper call that rebuilds it; fixed single-choice words (the
        # stairs' "normal") are not helper arguments.
        args = ", ".join(
            f"{name}={value!r}"
            for name, value in self.params.items()
            if not (
                isinstance(rule := self.skill.spec.params[name], Choice) and len(rule.values) == 1
            )
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
            raise SkillCallParseError(text, "the skill name is missing", skill_name_allowed())
        try:
            skill = Skill.from_name(name)
        except SkillCallError:
            raise SkillCallParseError(
                text, f"unknown skill name {shown(name)}", skill_name_allowed()
            ) from None
        slots = skill.spec.slots
        usage = skill.spec.usage()
        if len(raw_params) != len(slots):
            raise SkillCallParseError(
                text,
                f"{skill.text_name} takes {len(slots)} <...> parameter(s), got {len(raw_params)}",
                usage,
                skill=skill,
            )
        kwargs: dict[str, Any] = {}
        for slot, raw in zip(slots, raw_params, strict=True):
            if slot == WALK_WORD:
                if raw.lower() != WALK_WORD:
                    raise SkillCallParseError(
                        text, f"expected <{WALK_WORD}>, got <{clip(raw)}>", usage, skill=skill
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
                message=f"SkillCall.text={shown(text)} is invalid: {detail}",
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
        reads = {key: field for field, key in self.skill.spec.action_keys.items()}
        out: dict[str, Any] = {"skill": np.int64(int(self.skill))}
        for entry in action_fields():
            field = reads.get(entry.key)
            value = entry.neutral if field is None else getattr(self, field)
            if isinstance(entry.rule, Choice):
                out[entry.key] = np.int64(entry.rule.values.index(value))
            else:
                out[entry.key] = np.array([value], dtype=np.float64)
        return out

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
        keys = ("skill", *(entry.key for entry in action_fields()))
        unknown = [key for key in action if key not in keys]
        if unknown:
            raise SkillCallError(
                "action",
                unknown[0],
                "keys " + ", ".join(keys),
                reason="has an unknown key",
            )
        if "skill" not in action:
            raise SkillCallError("skill", None, skill_id_allowed(), reason="is missing")
        skill = Skill(_decode_index("skill", action["skill"], len(Skill), skill_id_allowed()))
        legends = {entry.key: entry.index_meaning for entry in action_fields()}
        kwargs: dict[str, Any] = {}
        for field, key in skill.spec.action_keys.items():
            rule = skill.spec.params[field]
            allowed = rule.allowed(key)
            if key not in action:
                raise SkillCallError(key, None, allowed, reason="is missing", skill=skill)
            raw = action[key]
            if isinstance(rule, Range):
                kwargs[field] = _decode_number(skill, key, raw, rule)
            else:  # a word: an index into the rule's words
                index = _decode_index(key, raw, len(rule.values), legends[key])
                kwargs[field] = rule.values[index]
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
            raise SkillCallError("skill", None, skill_name_allowed(), reason="is missing")
        skill = Skill.from_name(data["skill"])
        for key in data:
            if key != "skill" and key not in PARAM_FIELDS:
                raise SkillCallError(
                    "dict",
                    key,
                    "keys skill, " + ", ".join(PARAM_FIELDS),
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
            SkillCallTypeError: for any other type (a :class:`SkillCallError` that is also a
                ``TypeError``).
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
        allowed = (
            "a SkillCall, its text form (str, e.g. 'Turn<left><30>'), its JSON form (dict "
            "with a str 'skill') or its action-space encoding (dict with an int 'skill')"
        )
        raise SkillCallTypeError(
            "action",
            value,
            allowed,
            message=f"SkillCall action {shown(value)} of type {type(value).__name__} is not "
            f"an action: allowed {allowed}",
        )


# --------------------------------------------------------------------------------------
# Helpers for parse / from_action
# --------------------------------------------------------------------------------------


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


def _parse_param(text: str, skill: Skill, slot: str, raw: str, usage: str) -> Any:
    rule = skill.spec.params[slot]
    if isinstance(rule, Choice):
        word = raw.lower()
        if word not in rule.values:
            raise SkillCallParseError(
                text,
                f"{slot} word <{clip(raw)}> is not accepted",
                usage,
                skill=skill,
                param=slot,
            )
        return word
    if _NONFINITE_RE.match(raw):
        raise SkillCallParseError(
            text, f"{slot}=<{clip(raw)}> is not finite", usage, skill=skill, param=slot
        )
    if not _NUMBER_RE.match(raw):
        raise SkillCallParseError(
            text,
            f"{slot}=<{clip(raw)}> is not a plain decimal number",
            usage,
            skill=skill,
            param=slot,
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


def _decode_number(skill: Skill, key: str, value: Any, rule: Range) -> float:
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

    Custom skills registered with :func:`~humanclaw_gym.skills.register_skill` widen
    ``skill`` and may append entries.

    Returns:
        A new :class:`gymnasium.spaces.Dict` (keys in the order above).
    """
    from gymnasium import spaces

    entries: dict[str, spaces.Space] = {"skill": spaces.Discrete(len(Skill))}
    for entry in action_fields():
        rule = entry.rule
        if isinstance(rule, Choice):
            entries[entry.key] = spaces.Discrete(len(rule.values))
        else:
            entries[entry.key] = spaces.Box(rule.low, rule.high, shape=(1,), dtype=np.float64)
    return spaces.Dict(entries, seed=seed, sort_keys=False)
