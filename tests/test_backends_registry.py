"""The backend registry: one source per capability record (the class), lazy loading."""

from __future__ import annotations

import subprocess
import sys

import pytest

from humanclaw_gym.backends import registry
from humanclaw_gym.backends.protocols import (
    MotionCapabilities,
    PhysicsCapabilities,
    RenderCapabilities,
)
from humanclaw_gym.backends.registry import BackendCapabilityError

_RECORDS = {
    "physics": PhysicsCapabilities,
    "render": RenderCapabilities,
    "motion": MotionCapabilities,
}


@pytest.mark.parametrize("kind", sorted(_RECORDS))
def test_every_registered_entry_reads_its_capabilities_from_its_class(kind: str) -> None:
    entries = registry.entries(kind)
    assert entries
    for name, entry in entries.items():
        cls = entry.load()
        assert entry.capabilities is cls.capabilities, name
        assert isinstance(entry.capabilities, _RECORDS[kind]) and entry.capabilities.name == name


def test_the_procedural_record_is_its_planner_table() -> None:
    from humanclaw_gym.motion import procedural
    from humanclaw_gym.skills import skill_specs

    caps = registry.entry("motion", "procedural").capabilities
    assert caps.motion_keys == frozenset(procedural._PLANNERS)
    planned = {s.id for s in skill_specs() if s.terminal or s.motion_key in procedural._PLANNERS}
    assert caps.skills == frozenset(planned) == frozenset(range(len(skill_specs())))


@pytest.mark.parametrize("kind", sorted(_RECORDS))
def test_registering_imports_no_backend(kind: str) -> None:
    """Registration records a path only: importing the registry imports no backend module
    and no engine; capabilities are read from the classes when first needed."""
    script = (
        "import sys\n"
        "from humanclaw_gym.backends import registry\n"
        f"mods = [e.target.split(':')[0] for e in registry.entries({kind!r}).values()]\n"
        "print(sorted(m for m in mods if m in sys.modules))\n"
        "print(sorted(m for m in ('pybullet', 'mujoco', 'moderngl', 'torch') if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["[]", "[]"]


@pytest.fixture
def scratch_registry(monkeypatch):
    """The registry as it is, restored after the test (its registrations do not leak)."""
    from humanclaw_gym import registry as the_registry

    copy = {k: dict(v) for k, v in the_registry._REGISTRY.items()}
    monkeypatch.setattr(the_registry, "_REGISTRY", copy)


class NoRecord:
    """A backend class that declares nothing."""


class MisnamedRecord:
    capabilities = PhysicsCapabilities(name="other")


class RenderRecordOnPhysics:
    capabilities = RenderCapabilities(name="render-record")


def test_a_class_without_its_own_record_is_refused_when_resolved(scratch_registry) -> None:
    registry.register_physics("no-record", f"{__name__}:NoRecord")
    with pytest.raises(BackendCapabilityError, match="'no-record'.*declares no capabilities"):
        registry.resolve(physics="no-record", render="tiny", motion="procedural")
    registry.register_physics("misnamed", f"{__name__}:MisnamedRecord")
    with pytest.raises(BackendCapabilityError, match="'misnamed'.*named 'other'"):
        registry.resolve(physics="misnamed", render="tiny", motion="procedural")
    registry.register_physics("render-record", f"{__name__}:RenderRecordOnPhysics")
    with pytest.raises(BackendCapabilityError, match="PhysicsCapabilities"):
        registry.resolve(physics="render-record", render="tiny", motion="procedural")


def test_a_second_record_cannot_be_passed_at_registration(scratch_registry) -> None:
    with pytest.raises(TypeError, match="the class declares them"):
        registry.register_physics(
            "two-records", f"{__name__}:MisnamedRecord", PhysicsCapabilities(name="two-records")
        )
    assert "two-records" not in registry.entries("physics")
    with pytest.raises(ValueError, match="'module:Class'"):
        registry.register_render("bad-target", "no_colon_here")
