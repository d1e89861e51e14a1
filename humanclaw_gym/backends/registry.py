"""The backends' view of the one registry, and the resolver that checks capabilities before
building.

Physics, render and motion backends are entries of :mod:`humanclaw_gym.registry` (kinds
``"physics"``, ``"render"`` and ``"motion"``), registered there like everything else a user
can add: lazily by path, by an object, with a decorator where the class is defined, or by an
installed package's entry points (groups ``humanclaw_gym.physics``,
``humanclaw_gym.renderers`` and ``humanclaw_gym.motion``). This module keeps the backends'
own API on top of it: :func:`register_physics` / :func:`register_render` /
:func:`register_motion`, :func:`entries` / :func:`entry` (as :class:`BackendEntry` views) and
:func:`resolve`.

A registration records where the class is and nothing else about it: the class itself
declares what it can do in its ``capabilities`` attribute (a
:class:`~humanclaw_gym.backends.protocols.PhysicsCapabilities`,
:class:`~humanclaw_gym.backends.protocols.RenderCapabilities` or
:class:`~humanclaw_gym.backends.protocols.MotionCapabilities` whose ``name`` is the
registered name), the one source of that record, read from the class every time it is
asked for. Registering by path imports nothing; the class's module is imported the first
time its capabilities are read (by :func:`resolve`). Backend modules import their engine
(pybullet, MuJoCo, moderngl, torch) only when an instance is built, so reading capabilities
starts no simulator, GL context or model. :func:`resolve` compares what a config needs
(render modes, part shapes, scene features, contact queries, a body mesh) against them and
raises :class:`BackendCapabilityError` naming the backend and the missing capability
before anything is built. Which skills a motion generator executes is checked per call,
at the step that asks for one (:meth:`MotionCapabilities.check_call`), not here.

Third-party backends register the same way::

    from humanclaw_gym.backends import registry
    registry.register_physics("mysim", "mypkg.sim:MySim")  # MySim.capabilities.name == "mysim"

    @registry.register_physics("mysim2")  # or where the class is defined
    class MySim2(HalfPhysicsBase):
        capabilities = PhysicsCapabilities(name="mysim2")
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from humanclaw_gym import registry as _registry
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
    """One registered backend, as the backends see an entry of :mod:`humanclaw_gym.registry`:
    its kind, name, where it comes from (``module:Class``), description and, for renderers,
    whether ``renderer="auto"`` tries it; its :attr:`capabilities` are read from the class
    whenever they are asked for."""

    kind: Kind
    name: str
    target: str
    description: str = ""
    in_auto: bool = True
    source: str = "code"
    registration: _registry.Registration | None = field(default=None, compare=False, repr=False)

    @classmethod
    def of(cls, registration: _registry.Registration) -> BackendEntry:
        """The view of one registry entry."""
        return cls(
            kind=registration.kind,  # type: ignore[arg-type]
            name=registration.name,
            target=registration.where,
            description=registration.description,
            in_auto=bool(registration.meta.get("in_auto", registration.kind != "render")),
            source=registration.source,
            registration=registration,
        )

    def load(self) -> Any:
        """The factory (class or function); a lazy entry's module is imported now, once.

        Raises:
            BackendCapabilityError: the module cannot be imported or lacks the class.
        """
        try:
            if self.registration is not None:
                return self.registration.load()
            return _registry.Registration(self.kind, self.name, self.target).load()
        except _registry.RegistryError as exc:
            raise BackendCapabilityError(f"{self.kind} backend {exc}") from exc

    @property
    def capabilities(self) -> Any:
        """The factory's own ``capabilities`` record (its module is imported once).

        Raises:
            BackendCapabilityError: the factory has no record of this kind, or its ``name``
                is not the registered name.
        """
        record = getattr(self.load(), "capabilities", None)
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


def _register(
    kind: Kind, name: str, target: Any, description: Any, **meta: Any
) -> Callable[[Any], Any] | None:
    if not isinstance(description, str):
        raise TypeError(
            f"register_{kind}: description must be a str, got {type(description).__name__}; "
            "capabilities are not passed: the class declares them (`capabilities = ...`)"
        )
    if isinstance(target, str) and ":" not in target:
        raise ValueError(
            f"register_{kind}(name, 'module:Class', description): got name={name!r}, "
            f"target={target!r}"
        )
    return _registry.register(kind, name, target, description=description, replace=True, **meta)


def register_physics(name: str, target: Any = None, description: str = "") -> Any:
    """Register a physics backend class: by ``"module:Class"`` path (nothing is imported
    here), the class itself, or as a decorator above it (``@register_physics("mysim")``).
    The class declares its :class:`PhysicsCapabilities` named ``name``."""
    return _register("physics", name, target, description)


def register_render(
    name: str, target: Any = None, description: str = "", in_auto: bool = False
) -> Any:
    """Register a render backend class (a path, the class, or as a decorator); the class
    declares its :class:`RenderCapabilities` named ``name``.

    ``in_auto=True`` makes ``renderer="auto"`` try it, after the renderers registered
    before it (the built-ins: moderngl, then tiny)."""
    return _register("render", name, target, description, in_auto=bool(in_auto))


def register_motion(name: str, target: Any = None, description: str = "") -> Any:
    """Register a motion generator class (a path, the class, or as a decorator); the class
    declares its :class:`MotionCapabilities` named ``name``."""
    return _register("motion", name, target, description)


def entries(kind: Kind) -> dict[str, BackendEntry]:
    """The registered backends of one kind, in registration order (entry points included)."""
    return {name: BackendEntry.of(r) for name, r in _registry.entries(kind).items()}


def entry(kind: Kind, name: str) -> BackendEntry:
    """The registered backend ``name`` of ``kind``.

    Raises:
        BackendCapabilityError: unknown name (the registered ones are listed).
    """
    try:
        return BackendEntry.of(_registry.get(kind, name))
    except _registry.RegistryError:
        known = ", ".join(sorted(_registry.names(kind))) or "none"
        raise BackendCapabilityError(
            f"unknown {kind} backend {name!r}; registered: {known}"
        ) from None


def create(kind: Kind, name: str, **kwargs: Any) -> Any:
    """Import and instantiate a registered backend."""
    return entry(kind, name).load()(**kwargs)


def render_choices() -> tuple[str, ...]:
    """Accepted ``renderer`` values: ``"auto"`` and every registered render backend."""
    return ("auto", *_registry.names("render"))


def _auto_render_names() -> list[str]:
    return [name for name, e in entries("render").items() if e.in_auto]


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

    ``skills``: skills (members, ids or names) the motion generator must execute, checked
    now; None (default) checks none here: a call the generator cannot execute is refused
    at the step that asks for it (:meth:`MotionCapabilities.check_call`), so registering a
    skill never keeps an env with another generator from running the skills it has.
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
    if skills is not None:
        from humanclaw_gym.skills import Skill

        for skill in sorted({Skill.from_name(s) for s in skills}):
            if not mcaps.executes(skill):
                problems.append(f"motion generator {motion!r} cannot generate skill {skill.name}")
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
