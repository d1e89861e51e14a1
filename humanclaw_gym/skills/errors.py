"""Errors of the action schema: :class:`SkillCallError`, :class:`SkillCallParseError`,
:class:`SkillCallTypeError` and :class:`SkillNotExecutableError`."""

from __future__ import annotations

from typing import Any, Protocol

__all__ = [
    "SHOWN_CHARS",
    "SkillCallError",
    "SkillCallParseError",
    "SkillCallTypeError",
    "SkillNotExecutableError",
    "clip",
    "shown",
]

SHOWN_CHARS = 80
"""At most this many characters of an offending value are echoed in an error message (an
action text can come from a model and be arbitrarily long); the exception's ``value``
attribute keeps the whole value."""


class _NamedSkill(Protocol):
    """What an error needs of the skill it names (a
    :class:`humanclaw_gym.skills.catalog.Skill`, which this module, imported by the
    catalog, does not import): its text name."""

    @property
    def text_name(self) -> str: ...


def clip(text: str, limit: int = SHOWN_CHARS) -> str:
    """``text`` itself, or its first ``limit`` characters and how long it was."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text)} characters)"


def shown(value: Any, limit: int = SHOWN_CHARS) -> str:
    """``repr(value)`` for an error message, cut to about ``limit`` characters.

    An integer too long for ``repr`` (Python refuses to convert more than 4,300 digits) is
    shown by its sign and number of digits."""
    if isinstance(value, (str, bytes)) and len(value) > limit:
        return f"{value[:limit]!r}... ({len(value)} characters)"
    try:
        text = repr(value)
    except ValueError:  # an int past the interpreter's digit limit (or a failing __repr__)
        if isinstance(value, int):
            digits = int(value.bit_length() * 0.30103) + 1  # log10(2): about the digits
            return f"<an integer of about {digits} digits>"
        return f"<a {type(value).__name__} that cannot be shown>"
    return clip(text, limit)


class SkillCallError(ValueError):
    """A SkillCall (or one of its encodings) is invalid.

    Attributes:
        field: the offending field, e.g. ``"angle_deg"``; ``"text"`` for text-form errors.
        value: the offending value as given (the message shows at most
            :data:`SHOWN_CHARS` characters of it).
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
        skill: _NamedSkill | None = None,
        message: str | None = None,
    ) -> None:
        self.field = field
        self.value = value
        self.allowed = allowed
        self.skill = skill
        if message is None:
            message = f"SkillCall.{field}={shown(value)} {reason}: allowed {allowed}"
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
        skill: _NamedSkill | None = None,
        param: str | None = None,
        message: str | None = None,
    ) -> None:
        self.param = param
        if message is None:
            message = f"SkillCall.text={shown(text)} is invalid: {detail}: allowed {allowed}"
        super().__init__("text", text, allowed, skill=skill, message=message)

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            _rebuild_error,
            (type(self), self.field, self.value, self.allowed, self.skill, str(self), self.param),
        )


class SkillCallTypeError(SkillCallError, TypeError):
    """An action of a type that is no form of a SkillCall (``42``, ``None``, a list, ...).

    Both a :class:`SkillCallError` (so one ``except SkillCallError`` catches every invalid
    action) and a ``TypeError`` (the usual Python signal for a wrong type). ``field`` is
    ``"action"``; ``value`` the object given.
    """


class SkillNotExecutableError(SkillCallError):
    """A valid SkillCall that the env's motion generator cannot execute (a skill registered
    with :func:`~humanclaw_gym.skills.register_skill` whose motion the generator does not
    declare, e.g. a new skill with the learned ``flow`` generator).

    Raised by the step that asks for it, before anything changes (the episode goes on);
    ``field`` is ``"skill"``, ``value`` the call's text form, ``allowed`` the skills the
    generator executes and :attr:`generator` its registry name.
    """

    def __init__(
        self,
        call: Any,
        generator: str,
        allowed: str,
        *,
        skill: Any = None,
        message: str | None = None,
    ) -> None:
        self.generator = generator
        if message is None:
            message = (
                f"SkillCall.skill={shown(str(call))} cannot be executed by motion generator "
                f"{generator!r}: allowed {allowed}"
            )
        super().__init__("skill", str(call), allowed, skill=skill, message=message)

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            _rebuild_not_executable,
            (self.value, self.generator, self.allowed, self.skill, str(self)),
        )


def _rebuild_not_executable(
    call: str, generator: str, allowed: str, skill: Any, message: str
) -> SkillNotExecutableError:
    return SkillNotExecutableError(call, generator, allowed, skill=skill, message=message)


def _rebuild_error(
    cls: type[SkillCallError],
    field: str,
    value: Any,
    allowed: str,
    skill: _NamedSkill | None,
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
