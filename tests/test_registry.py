"""The one registry of tasks, skills, sensors, trackers, backends and agents."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from humanclaw_gym import registry
from humanclaw_gym.registry import RegistryError


@pytest.fixture
def clean():
    added: list[tuple[str, str]] = []
    yield added
    for kind, name in added:
        registry.unregister(kind, name)


def test_decorator_registers_where_defined_and_returns_the_object(clean):
    @registry.register_task("reg_test_task", description="a test task")
    class MyTask:
        pass

    clean.append(("task", "reg_test_task"))
    entry = registry.get("task", "reg_test_task")
    assert entry.load() is MyTask
    assert entry.description == "a test task"
    assert entry.source == "code"
    assert entry.where.endswith(
        ":test_decorator_registers_where_defined_and_returns_the_object.<locals>.MyTask"
    )


def test_lazy_target_imports_nothing_until_loaded(clean):
    registry.register("sensor", "reg_lazy", "json:JSONDecoder", description="lazy")
    clean.append(("sensor", "reg_lazy"))
    entry = registry.get("sensor", "reg_lazy")
    assert entry.obj is None and entry.target == "json:JSONDecoder"
    import json

    assert entry.load() is json.JSONDecoder
    assert registry.load("sensor", "reg_lazy") is json.JSONDecoder


def test_order_is_registration_order(clean):
    for n in ("reg_b", "reg_a", "reg_c"):
        registry.register("tracker", n, object())
        clean.append(("tracker", n))
    ours = [n for n in registry.names("tracker") if n.startswith("reg_")]
    assert ours == ["reg_b", "reg_a", "reg_c"]


def test_taken_name_needs_replace(clean):
    registry.register("motion", "reg_taken", "json:dumps")
    clean.append(("motion", "reg_taken"))
    registry.register("motion", "reg_taken", "json:dumps")  # same target: no-op
    with pytest.raises(RegistryError, match="already registered"):
        registry.register("motion", "reg_taken", "json:loads")
    registry.register("motion", "reg_taken", "json:loads", replace=True)
    assert registry.get("motion", "reg_taken").target == "json:loads"


@pytest.mark.parametrize(
    ("kind", "name", "target", "match"),
    [
        ("nope", "x", "json:dumps", "unknown registry kind"),
        ("task", "", "json:dumps", "invalid"),
        ("task", "auto", "json:dumps", "invalid"),
        ("task", "has space", "json:dumps", "invalid"),
        ("task", 5, "json:dumps", "invalid"),
        ("task", "x", "json.dumps", "module:attr"),
        ("task", "x", "json:", "module:attr"),
    ],
)
def test_bad_registrations_are_refused_in_one_line(kind, name, target, match):
    with pytest.raises(RegistryError, match=match) as info:
        registry.register(kind, name, target)
    assert "\n" not in str(info.value)


def test_unknown_name_lists_the_registered_ones(clean):
    registry.register("agent", "reg_known", "json:dumps")
    clean.append(("agent", "reg_known"))
    with pytest.raises(RegistryError, match="unknown agent 'reg_missing'.*reg_known"):
        registry.get("agent", "reg_missing")


def test_unimportable_target_names_the_entry(clean):
    registry.register("render", "reg_broken", "no_such_module_xyz:Thing")
    registry.register("render", "reg_noattr", "json:NoSuchThing")
    clean.extend([("render", "reg_broken"), ("render", "reg_noattr")])
    with pytest.raises(RegistryError, match="render 'reg_broken': cannot import"):
        registry.load("render", "reg_broken")
    with pytest.raises(RegistryError, match="has no attribute 'NoSuchThing'"):
        registry.load("render", "reg_noattr")


def test_entry_points_register_lazily_and_code_wins(tmp_path):
    """A distribution's entry points join the kind on first read; a code registration of
    the same name wins. Run in a subprocess so the installed metadata is fresh."""
    dist = tmp_path / "regdemo-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: regdemo\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[humanclaw_gym.tasks]\nep_task = json:JSONEncoder\nshadowed = json:JSONDecoder\n"
    )
    code = textwrap.dedent(
        """
        import sys, json
        from humanclaw_gym import registry
        registry.register_task("shadowed", "json:dumps")
        e = registry.get("task", "ep_task")
        assert e.source == "entry point" and e.load() is json.JSONEncoder, e
        assert registry.get("task", "shadowed").target == "json:dumps"
        print("ok")
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={"PYTHONPATH": str(tmp_path), "PATH": ""},
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_describe_lists_every_kind_without_importing(clean):
    registry.register("physics", "reg_desc", "no_such_module_xyz:Sim", description="d")
    clean.append(("physics", "reg_desc"))
    listing = registry.describe()
    assert list(listing) == list(registry.KINDS)
    row = next(r for r in listing["physics"] if r["name"] == "reg_desc")
    assert row == {
        "name": "reg_desc",
        "where": "no_such_module_xyz:Sim",
        "source": "code",
        "description": "d",
    }
