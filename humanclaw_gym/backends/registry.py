"""Lazy registry of backends and the resolver that checks capabilities before building.

A registration records a factory *path* (``"module:Class"``) and nothing else about it:
the class itself declares what it can do in its ``capabilities`` attribute (a
:class:`~humanclaw_gym.backends.protocols.PhysicsCapabilities`,
:class:`~humanclaw_gym.backends.protocols.RenderCapabilities` or
:class:`~humanclaw_gym.backends.protocols.MotionCapabilities` whose ``name`` is the
registered name), the one source of that record. Registering imports nothing; the class's
module is imported the first time its capabilities are read (by :func:`resolve`). Backend
modules import their engine (pybullet, MuJoCo, moderngl, torch) only when an instance is
built, so reading capabilities starts no simulator, GL context or model. :func:`resolve`
compares what a config needs (render modes, skills, part shapes, scene features, contact
queries, a body mesh) against them and raises :class:`BackendCapabilityError` naming the
backend and the missing capability before anything is built.

Third-party backends register the same way::

    from humanclaw_gym.backends import registry
    registry.register_physics("mysim", "mypkg.sim:MySim")  # MySim.capabilities.name == "mysim"
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

from humanclaw_gym.backends.protocols import (
    MotionCapabilities,
    PhysicsCapabilities,
    RenderBackendUnavailable,
    RenderCapabilities,
)
from humanclaw_gym.image_sizes import EGO_SIZE_PX

__all__ = [
    "BackendCapabilityError",
    "BackendEntry",
    "ResolvedBackends",
    "check_renderer_name",
    "create",
    "create_renderer",
    "entries",
    "entry",
    "register_motion",
    "register_physics",
    "register_render",
    "render_choices",
    "resolve",
]

Kind = Literal["physics", "render", "motion"]


class BackendCapabilityError(ValueError):
    """A configuration asks for something a backend does not declare (or an unknown backend)."""


_RECORDS = {
    "physics": PhysicsCapabilities,
    "render": RenderCapabilities,
    "motion": MotionCapabilities,
}


@dataclass(frozen=True)
class BackendEntry:
    """One registered backend: its kind, name, factory path and description; its
    :attr:`capabilities` are read from the factory when first asked for."""

    kind: Kind
    name: str
    target: str
    description: str = ""
    in_auto: bool = True

    def load(self) -> Any:
        """Import and return the factory (class or function)."""
        return _import_target(self.target)

    @cached_property
    def capabilities(self) -> Any:
        """The factory's own ``capabilities`` record (its module is imported once).

        Raises:
            BackendCapabilityError: the factory has no record of this kind, or its ``name``
                is not the registered name.
        """
        factory = _import_target(self.target)
        record = getattr(factory, "capabilities", None)
        wanted = _RECORDS[self.kind]
        if not isinstance(record, wanted):
            raise BackendCapabilityError(
                f"{self.kind} backend {self.name!r} ({self.target}) declares no capabilities: "
                f"give the class a `capabilities = {wanted.__name__}(name={self.name!r}, ...)`"
            )
        if record.name != self.name:
            raise BackendCapabilityError(
                f"{self.kind} backend {self.name!r} ({self.target}) declares capabilities "
                f"named {record.name!r}; register it under that name or rename the record"
            )
        return record


def _import_target(target: str) -> Any:
    module_name, _, attr = target.partition(":")
    return getattr(importlib.import_module(module_name), attr)


_REGISTRY: dict[Kind, dict[str, BackendEntry]] = {"physics": {}, "render": {}, "motion": {}}


def _register(kind: Kind, name: str, target: str, description: str, in_auto: bool = True) -> None:
    if not isinstance(name, str) or not isinstance(target, str) or ":" not in target:
        raise ValueError(
            f"register_{kind}(name, 'module:Class', description): got name={name!r}, "
            f"target={target!r}"
        )
    if not isinstance(description, str):
        raise TypeError(
            f"register_{kind}: description must be a str, got {type(description).__name__}; "
            "capabilities are not passed: the class declares them (`capabilities = ...`)"
        )
    if name == "auto":
        raise ValueError("'auto' is reserved (it picks the first available renderer)")
    _REGISTRY[kind][name] = BackendEntry(kind, name, target, description, in_auto)


def register_physics(name: str, target: str, description: str = "") -> None:
    """Register a physics backend class by ``"module:Class"`` path (nothing is imported
    here); the class declares its :class:`PhysicsCapabilities` named ``name``."""
    _register("physics", name, target, description)


def register_render(name: str, target: str, description: str = "", in_auto: bool = False) -> None:
    """Register a render backend class by ``"module:Class"`` path (nothing is imported
    here); the class declares its :class:`RenderCapabilities` named ``name``.

    ``in_auto=True`` makes ``renderer="auto"`` try it, after the renderers registered
    before it (the built-ins: moderngl, then tiny)."""
    _register("render", name, target, description, in_auto)


def register_motion(name: str, target: str, description: str = "") -> None:
    """Register a motion generator class by ``"module:Class"`` path (nothing is imported
    here); the class declares its :class:`MotionCapabilities` named ``name``."""
    _register("motion", name, target, description)


def entries(kind: Kind) -> dict[str, BackendEntry]:
    """A copy of the registered backends of one kind."""
    return dict(_REGISTRY[kind])


def entry(kind: Kind, name: str) -> BackendEntry:
    """The registered backend ``name`` of ``kind``.

    Raises:
        BackendCapabilityError: unknown name (the registered ones are listed).
    """
    try:
        return _REGISTRY[kind][name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY[kind])) or "none"
        raise BackendCapabilityError(
            f"unknown {kind} backend {name!r}; registered: {known}"
        ) from None


def create(kind: Kind, name: str, **kwargs: Any) -> Any:
    """Import and instantiate a registered backend."""
    return entry(kind, name).load()(**kwargs)


def render_choices() -> tuple[str, ...]:
    """Accepted ``renderer`` values: ``"auto"`` and every registered render backend."""
    return ("auto", *_REGISTRY["render"])


def _auto_render_names() -> list[str]:
    return [name for name, e in _REGISTRY["render"].items() if e.in_auto]


def check_renderer_name(name: str) -> None:
    """Raise :class:`BackendCapabilityError` unless ``name`` is ``"auto"`` or registered."""
    if name != "auto":
        entry("render", name)


def create_renderer(
    name: str = "auto", candidates: Iterable[BackendEntry] | None = None
) -> tuple[Any, str, str]:
    """Build a render backend, falling back for ``"auto"``.

    Args:
        name: ``"auto"`` (the first of the auto renderers that can start) or a registered
            name.
        candidates: the entries to try in order (default: from ``name``); the env passes
            the ones :func:`resolve` kept.

    Returns:
        ``(renderer, registry name, reason)``: the reason says what was tried and why this
        one runs (for ``backend_info`` and ``humanclaw doctor``).

    Raises:
        BackendCapabilityError: unknown name.
        RuntimeError: no candidate could start (every reason listed).
    """
    if candidates is None:
        names = _auto_render_names() if name == "auto" else [name]
        candidates = [entry("render", n) for n in names]
    reasons: list[str] = []
    for candidate in candidates:
        try:
            renderer = candidate.load()()
        except RenderBackendUnavailable as exc:
            reasons.append(f"{candidate.name} unavailable: {exc}")
            continue
        chosen = (
            f"{candidate.name} requested"
            if name != "auto"
            else f"auto: {candidate.name} is the first available"
        )
        return renderer, candidate.name, "; ".join(reasons + [chosen])
    raise RuntimeError("no render backend could be created: " + "; ".join(reasons))


@dataclass(frozen=True)
class ResolvedBackends:
    """The backends a config resolved to (names are registry keys; ``render`` may list
    fallbacks in order, e.g. ``("moderngl", "tiny")`` for ``"auto"``)."""

    physics: BackendEntry
    render: tuple[BackendEntry, ...]
    motion: BackendEntry


def _missing(required: Iterable[str], available: Iterable[str]) -> list[str]:
    have = set(available)
    return sorted(r for r in required if r not in have)


def resolve(
    *,
    physics: str,
    render: str,
    motion: str,
    render_modes: Iterable[str] = ("rgb",),
    skills: Iterable[int] | None = None,
    part_shapes: Iterable[str] = ("box", "cylinder", "sphere"),
    scene_features: Iterable[str] = (),
    need_contacts: bool = False,
    need_ray_cast: bool = False,
    image_size: int = EGO_SIZE_PX,
    need_body_mesh: bool = False,
) -> ResolvedBackends:
    """Check a configuration against declared capabilities; nothing is built.

    ``skills`` are the skill ids the motion generator must generate (default: every
    registered skill, see :func:`humanclaw_gym.skills.register_skill`).
    ``need_body_mesh`` asks for a renderer that draws a triangle mesh as the humanoid
    (``RenderCapabilities.body_mesh``; the env's ``body_model_dir`` option). With
    ``render="auto"`` renderers lacking a capability are skipped, otherwise refused.

    Raises:
        BackendCapabilityError: naming the backend and each missing capability.
    """
    problems: list[str] = []
    phys = entry("physics", physics)
    caps: PhysicsCapabilities = phys.capabilities
    for shape in _missing(part_shapes, caps.part_shapes):
        problems.append(f"physics backend {physics!r} cannot collide part shape {shape!r}")
    for feature in _missing(scene_features, caps.scene_features):
        problems.append(f"physics backend {physics!r} does not support scene feature {feature!r}")
    if need_contacts and not caps.contacts:
        problems.append(f"physics backend {physics!r} has no contact queries (needed by metrics)")
    if need_ray_cast and not caps.ray_cast:
        problems.append(f"physics backend {physics!r} has no ray casts (needed by metrics)")

    render_names = _auto_render_names() if render == "auto" else [render]
    render_entries = []
    for name in render_names:
        rentry = entry("render", name)
        rcaps: RenderCapabilities = rentry.capabilities
        missing = _missing(render_modes, rcaps.modes)
        missing += [f"part shape {s!r}" for s in _missing(part_shapes, rcaps.part_shapes)]
        if image_size > rcaps.max_size:
            missing.append(f"image size {image_size} (max {rcaps.max_size})")
        if need_body_mesh and not rcaps.body_mesh:
            missing.append("body mesh (needed to draw the SMPL-X body of body_model_dir)")
        if missing:
            if render != "auto":
                for m in missing:
                    problems.append(f"render backend {name!r} lacks capability {m}")
            continue
        render_entries.append(rentry)
    if render == "auto" and not render_entries:
        wanted = f"modes {sorted(render_modes)}" + (" and a body mesh" if need_body_mesh else "")
        problems.append(f"no render backend supports {wanted}")

    mot = entry("motion", motion)
    mcaps: MotionCapabilities = mot.capabilities
    from humanclaw_gym.skills import Skill

    wanted = [int(s) for s in Skill] if skills is None else skills
    for skill in sorted(set(wanted) - set(mcaps.skills)):
        problems.append(f"motion generator {motion!r} cannot generate skill {Skill(skill).name}")
    if problems:
        raise BackendCapabilityError("; ".join(problems))
    return ResolvedBackends(physics=phys, render=tuple(render_entries), motion=mot)


def _register_defaults() -> None:
    register_physics(
        "pybullet",
        "humanclaw_gym.physics.pybullet_backend:PybulletHalfPhysics",
        "pybullet DIRECT, half-physics frame contract, Y-up gravity",
    )
    register_physics(
        "mujoco",
        "humanclaw_gym.physics.mujoco_backend:MujocoHalfPhysics",
        "MuJoCo, the same half-physics frame contract, native ball-joint drives (mujoco extra)",
    )
    register_render(
        "moderngl",
        "humanclaw_gym.render.moderngl_backend:ModernglRenderer",
        "moderngl on a headless EGL context (Mesa llvmpipe on CPU)",
        in_auto=True,
    )
    register_render(
        "tiny",
        "humanclaw_gym.render.tiny_backend:TinyRenderer",
        "pybullet TinyRenderer (CPU software rasteriser), the fallback when EGL is unavailable",
        in_auto=True,
    )
    register_motion(
        "procedural",
        "humanclaw_gym.motion.procedural:ProceduralMotionGenerator",
        "procedural skill synthesizer (gait cycles, turns, steps, sit, stairs)",
    )
    register_motion(
        "flow",
        "humanclaw_gym.motion.flow.generator:FlowMotionGenerator",
        "learned flow-matching MotionDiT with per-skill control branches (torch extra)",
    )
    register_motion(
        "paper",
        "humanclaw_gym.motion.paper.generator:PaperMotion",
        "the paper's MotionDiT and eight skill branches from the release's weights (torch extra)",
    )


_register_defaults()
