"""One registry for everything a user can add: tasks, skills, sensors, metric trackers,
physics / render / motion backends and agents.

Every extension point of the package registers here, the same way:

* **where the thing is defined**, with the kind's decorator::

      from humanclaw_gym.registry import register_task

      @register_task("my_task")
      class MyTask: ...

* **lazily, by path** (nothing is imported until the entry is first loaded; the built-in
  backends register so, so that reading the registry starts no simulator)::

      from humanclaw_gym.registry import register

      register("physics", "mysim", "mypkg.sim:MySim", description="my engine")

* **by an installed package's entry points**: a distribution that declares
  ``[project.entry-points."humanclaw_gym.tasks"] my_task = "mypkg.task:MyTask"`` registers
  ``my_task`` as a lazy entry the first time the kind is read (:data:`ENTRY_POINT_GROUPS`
  lists the group of each kind). A name registered in code wins over an entry point of the
  same name.

A registration records the name, the object or its ``"module:attr"`` path, a one-line
description, where it came from (:class:`Source`) and free keyword metadata the kind's own
module reads (a renderer's ``in_auto``, say). What a registered thing *can do* is never
recorded here: the thing declares it itself (a backend's ``capabilities``, a task's
``spec``, a tracker's ``spec``, a skill's ``SkillSpec``), so the record cannot drift from
it. The kind's own module checks that declaration when it loads the entry.

Entries keep their registration order (the built-in trackers, for example, are registered
in the order of the paper's table, which is the order of a metrics.json file).
``humanclaw doctor`` lists every entry (:func:`describe`).

This module imports nothing of the package, so every part of it may register here.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

__all__ = [
    "ENTRY_POINT_GROUPS",
    "KINDS",
    "Registration",
    "RegistryError",
    "Source",
    "describe",
    "entries",
    "get",
    "load",
    "names",
    "register",
    "register_agent",
    "register_motion",
    "register_physics",
    "register_render",
    "register_sensor",
    "register_skill_entry",
    "register_task",
    "register_tracker",
    "unregister",
]

#: The kinds of things that can be registered, in the order ``humanclaw doctor`` lists them.
KINDS: tuple[str, ...] = (
    "task",
    "skill",
    "sensor",
    "tracker",
    "physics",
    "render",
    "motion",
    "agent",
)

#: The entry-point group an installed package uses to register each kind.
ENTRY_POINT_GROUPS: Mapping[str, str] = {
    "task": "humanclaw_gym.tasks",
    "skill": "humanclaw_gym.skills",
    "sensor": "humanclaw_gym.sensors",
    "tracker": "humanclaw_gym.trackers",
    "physics": "humanclaw_gym.physics",
    "render": "humanclaw_gym.renderers",
    "motion": "humanclaw_gym.motion",
    "agent": "humanclaw_gym.policies",
}

Source = Literal["code", "entry point"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
_TARGET = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*:[A-Za-z_][A-Za-z0-9_.]*")

T = TypeVar("T")


class RegistryError(ValueError):
    """A registration or lookup that cannot be done (unknown kind or name, a bad path, a
    name taken, an entry whose target cannot be imported); the message names it."""


@dataclass(frozen=True)
class Registration:
    """One registered thing.

    Attributes:
        kind: one of :data:`KINDS`.
        name: its registered name (what configs, ``gym.make(task=...)`` and the command
            line use).
        target: ``"module:attr"`` of a lazy entry, else ``None``.
        obj: the registered object itself (eager entries), else ``None`` until loaded.
        description: one line for listings.
        source: ``"code"`` or ``"entry point"``.
        meta: keyword metadata the kind's own module reads (never what the thing can do).
    """

    kind: str
    name: str
    target: str | None = None
    obj: Any = None
    description: str = ""
    source: Source = "code"
    meta: Mapping[str, Any] = field(default_factory=dict)

    @property
    def where(self) -> str:
        """The ``module:attr`` it comes from (for lazy and eager entries alike)."""
        if self.target is not None:
            return self.target
        module = getattr(self.obj, "__module__", None) or type(self.obj).__module__
        qual = getattr(self.obj, "__qualname__", None) or type(self.obj).__qualname__
        return f"{module}:{qual}"

    def load(self) -> Any:
        """The registered object (a lazy entry's module is imported now, once).

        Raises:
            RegistryError: the target cannot be imported or has no such attribute.
        """
        if self.obj is not None or self.target is None:
            return self.obj
        cached = _LOADED.get((self.kind, self.name, self.target))
        if cached is not None:
            return cached
        module_name, _, attr = self.target.partition(":")
        try:
            obj: Any = importlib.import_module(module_name)
        except ImportError as exc:
            raise RegistryError(
                f"{self.kind} {self.name!r}: cannot import {module_name!r} ({exc})"
            ) from exc
        for part in attr.split("."):
            try:
                obj = getattr(obj, part)
            except AttributeError:
                raise RegistryError(
                    f"{self.kind} {self.name!r}: {module_name!r} has no attribute {attr!r}"
                ) from None
        _LOADED[(self.kind, self.name, self.target)] = obj
        return obj


_REGISTRY: dict[str, dict[str, Registration]] = {kind: {} for kind in KINDS}
_LOADED: dict[tuple[str, str, str], Any] = {}
_ENTRY_POINTS_READ: set[str] = set()

#: The package's modules that register the built-in entries of a kind where they are
#: defined; each is imported (by name: this module imports nothing of the package) before
#: the kind is first read, so listings hold the built-ins whatever was imported before.
_BUILTIN_MODULES: Mapping[str, tuple[str, ...]] = {
    "task": ("humanclaw_gym.tasks",),
    "sensor": ("humanclaw_gym.sensors",),
    "tracker": ("humanclaw_gym.metrics.trackers",),
}
_BUILTINS_READ: set[str] = set()


def _read_builtins(kind: str) -> None:
    if kind in _BUILTINS_READ:
        return
    _BUILTINS_READ.add(kind)
    for module in _BUILTIN_MODULES.get(kind, ()):
        importlib.import_module(module)


def _check_kind(kind: str) -> None:
    if kind not in _REGISTRY:
        raise RegistryError(f"unknown registry kind {kind!r}; kinds: {', '.join(KINDS)}")


def _check_name(kind: str, name: Any) -> None:
    if not isinstance(name, str) or not _NAME.fullmatch(name) or name == "auto":
        raise RegistryError(
            f"{kind} name {name!r} is invalid: a non-empty identifier-like string (letters, "
            "digits, '_', '.', '-'), not 'auto'"
        )


def _add(registration: Registration, replace: bool) -> None:
    table = _REGISTRY[registration.kind]
    old = table.get(registration.name)
    if old is not None and not replace and old.source == "code":
        if (old.target, old.obj) != (registration.target, registration.obj):
            raise RegistryError(
                f"{registration.kind} {registration.name!r} is already registered "
                f"({old.where}); pass replace=True to replace it"
            )
    table[registration.name] = registration


def register(
    kind: str,
    name: str,
    target: Any = None,
    *,
    description: str = "",
    replace: bool = False,
    **meta: Any,
) -> Any:
    """Register ``name`` of ``kind``.

    Three forms:

    * ``register(kind, name, "module:attr")``: a lazy entry, nothing imported;
    * ``register(kind, name, obj)``: the object itself;
    * ``@register(kind, name)`` above a class or function: a decorator that registers it and
      returns it unchanged.

    Registering the same target twice under one name is a no-op; another target under a
    taken name needs ``replace=True``.

    Raises:
        RegistryError: an unknown kind, an invalid name or path, a name taken.
    """
    _check_kind(kind)
    _check_name(kind, name)
    if not isinstance(description, str):
        raise RegistryError(f"{kind} {name!r}: description must be a str")
    if target is None:

        def decorator(obj: T) -> T:
            _add(Registration(kind, name, None, obj, description, "code", dict(meta)), replace)
            return obj

        return decorator
    if isinstance(target, str):
        if not _TARGET.fullmatch(target):
            raise RegistryError(
                f"{kind} {name!r}: target {target!r} must be 'module:attr' (e.g. 'mypkg.sim:MySim')"
            )
        _add(Registration(kind, name, target, None, description, "code", dict(meta)), replace)
        return None
    _add(Registration(kind, name, None, target, description, "code", dict(meta)), replace)
    return target


def unregister(kind: str, name: str) -> None:
    """Remove an entry (tests, and undoing a user registration); unknown names are ignored."""
    _check_kind(kind)
    _REGISTRY[kind].pop(name, None)


def _read_entry_points(kind: str) -> None:
    _read_builtins(kind)
    if kind in _ENTRY_POINTS_READ:
        return
    _ENTRY_POINTS_READ.add(kind)
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUPS[kind]):
        if ep.name in _REGISTRY[kind] or not _NAME.fullmatch(ep.name):
            continue  # a registration in code wins; a malformed name is not a name
        if not _TARGET.fullmatch(ep.value.replace(" ", "")):
            continue
        _REGISTRY[kind][ep.name] = Registration(
            kind, ep.name, ep.value.replace(" ", ""), None, "", "entry point", {}
        )


def entries(kind: str) -> dict[str, Registration]:
    """A copy of the entries of ``kind`` in registration order (entry points included)."""
    _check_kind(kind)
    _read_entry_points(kind)
    return dict(_REGISTRY[kind])


def names(kind: str) -> tuple[str, ...]:
    """The registered names of ``kind``, in registration order."""
    return tuple(entries(kind))


def get(kind: str, name: str) -> Registration:
    """The entry ``name`` of ``kind``.

    Raises:
        RegistryError: unknown kind or name (the registered names are listed).
    """
    _check_kind(kind)
    table = _REGISTRY[kind]
    if name not in table:
        _read_entry_points(kind)
    try:
        return table[name]
    except (KeyError, TypeError):
        known = ", ".join(table) or "none"
        raise RegistryError(f"unknown {kind} {name!r}; registered: {known}") from None


def load(kind: str, name: str) -> Any:
    """The registered object ``name`` of ``kind`` (imported now if lazy)."""
    return get(kind, name).load()


def describe() -> dict[str, list[dict[str, str]]]:
    """Every entry of every kind, for listings (``humanclaw doctor``): name, where it
    comes from (``module:attr``), source and description. Imports nothing."""
    return {
        kind: [
            {
                "name": r.name,
                "where": r.where,
                "source": r.source,
                "description": r.description,
            }
            for r in entries(kind).values()
        ]
        for kind in KINDS
    }


def _kind_decorator(kind: str) -> Callable[..., Any]:
    def register_kind(
        name: str, target: Any = None, *, description: str = "", replace: bool = False, **meta: Any
    ) -> Any:
        return register(kind, name, target, description=description, replace=replace, **meta)

    register_kind.__name__ = f"register_{kind}"
    register_kind.__qualname__ = register_kind.__name__
    register_kind.__doc__ = (
        f"Register a {kind}: ``register_{kind}(name, 'module:attr')``, "
        f"``register_{kind}(name, obj)`` or ``@register_{kind}(name)`` (see :func:`register`)."
    )
    return register_kind


register_task = _kind_decorator("task")
register_sensor = _kind_decorator("sensor")
register_tracker = _kind_decorator("tracker")
register_physics = _kind_decorator("physics")
register_render = _kind_decorator("render")
register_motion = _kind_decorator("motion")
register_agent = _kind_decorator("agent")
#: Skills are added through :func:`humanclaw_gym.skills.register_skill` (which checks the
#: ``SkillSpec`` and gives the skill its id); it records the skill here with this function.
register_skill_entry = _kind_decorator("skill")
