"""Lazy registry of backends and the resolver that checks capabilities before building.

A registration records a factory *path* (``"module:Class"``) and the capability record;
nothing is imported until :func:`create` runs. :func:`resolve` compares what a config needs
(render modes, skills, part shapes, scene features, contact queries, a body mesh) against
the declared capabilities and raises :class:`BackendCapabilityError` naming the backend and
the missing capability before any simulator, GL context or model is created.

Third-party backends register the same way::

    from humanclaw_gym.backends import registry
    registry.register_physics("mysim", "mypkg.sim:MySim", PhysicsCapabilities(name="mysim"))
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from humanclaw_gym.backends.protocols import (
    MotionCapabilities,
    PhysicsCapabilities,
    RenderCapabilities,
)

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


@dataclass(frozen=True)
class BackendEntry:
    """One registered backend: its kind, name, factory path and capabilities."""

    kind: Kind
    name: str
    target: str
    capabilities: Any
    description: str = ""
    in_auto: bool = True

    def load(self) -> Any:
        """Import and return the factory (class or function)."""
        module_name, _, attr = self.target.partition(":")
        module = importlib.import_module(module_name)
        return getattr(module, attr)


_REGISTRY: dict[Kind, dict[str, BackendEntry]] = {"physics": {}, "render": {}, "motion": {}}


def _register(
    kind: Kind, name: str, target: str, capabilities: Any, description: str, in_auto: bool = True
) -> None:
    if ":" not in target:
        raise ValueError(f"backend target must look like 'module:Attr', got {target!r}")
    if capabilities.name != name:
        raise ValueError(f"capabilities.name {capabilities.name!r} differs from name {name!r}")
    if name == "auto":
        raise ValueError("'auto' is reserved (it picks the first available renderer)")
    _REGISTRY[kind][name] = BackendEntry(kind, name, target, capabilities, description, in_auto)


def register_physics(
    name: str, target: str, capabilities: PhysicsCapabilities, description: str = ""
) -> None:
    """Register a physics backend factory (no import happens here)."""
    _register("physics", name, target, capabilities, description)


def register_render(
    name: str,
    target: str,
    capabilities: RenderCapabilities,
    description: str = "",
    in_auto: bool = False,
) -> None:
    """Register a render backend factory (no import happens here).

    ``in_auto=True`` makes ``renderer="auto"`` try it, after the renderers registered
    before it (the built-ins: moderngl, then tiny)."""
    _register("render", name, target, capabilities, description, in_auto)


def register_motion(
    name: str, target: str, capabilities: MotionCapabilities, description: str = ""
) -> None:
    """Register a motion generator factory (no import happens here)."""
    _register("motion", name, target, capabilities, description)


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
    from humanclaw_gym.render.errors import RenderBackendUnavailable

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
    image_size: int = 448,
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
        PhysicsCapabilities(
            name="pybullet", part_shapes=frozenset({"box", "cylinder", "sphere", "mesh"})
        ),
        "pybullet DIRECT, half-physics frame contract, Y-up gravity",
    )
    register_physics(
        "mujoco",
        "humanclaw_gym.physics.mujoco_backend:MujocoHalfPhysics",
        # no triangle meshes: MuJoCo collides a mesh as its convex hull, which would fill
        # the rooms of an imported (HSSD) home; scenes with mesh parts are refused
        PhysicsCapabilities(name="mujoco", part_shapes=frozenset({"box", "cylinder", "sphere"})),
        "MuJoCo, the same half-physics frame contract, native ball-joint drives (mujoco extra)",
    )
    register_render(
        "moderngl",
        "humanclaw_gym.render.moderngl_backend:ModernglRenderer",
        RenderCapabilities(
            name="moderngl",
            modes=frozenset({"rgb", "instance", "depth"}),
            part_shapes=frozenset({"box", "cylinder", "sphere", "capsule", "mesh"}),
            body_mesh=True,
        ),
        "moderngl on a headless EGL context (Mesa llvmpipe on CPU)",
        in_auto=True,
    )
    register_render(
        "tiny",
        "humanclaw_gym.render.tiny_backend:TinyRenderer",
        RenderCapabilities(
            name="tiny",
            modes=frozenset({"rgb", "instance", "depth"}),
            part_shapes=frozenset({"box", "cylinder", "sphere", "capsule", "mesh"}),
            body_mesh=True,
        ),
        "pybullet TinyRenderer (CPU software rasteriser), the fallback when EGL is unavailable",
        in_auto=True,
    )
    register_motion(
        "procedural",
        "humanclaw_gym.motion.procedural:ProceduralMotionGenerator",
        MotionCapabilities(name="procedural"),
        "procedural skill synthesizer (gait cycles, turns, steps, sit, stairs)",
    )
    register_motion(
        "flow",
        "humanclaw_gym.motion.flow.generator:FlowMotionGenerator",
        MotionCapabilities(name="flow", batched=True),
        "learned flow-matching MotionDiT with per-skill control branches (torch extra)",
    )
    register_motion(
        "paper",
        "humanclaw_gym.motion.paper.generator:PaperMotion",
        MotionCapabilities(name="paper", batched=True),
        "the paper's MotionDiT and eight skill branches from the release's weights (torch extra)",
    )


_register_defaults()
