"""No physics backend writes the state of :class:`~humanclaw_gym.physics.base.HalfPhysicsBase`.

The base declares what it owns (``physics.base.BASE_STATE``, and every option a backend
declares); its engine hooks return what they read (the realized state, the dynamic object
ids) and the base keeps it. An AST scan of every backend module (the built-ins, the docs'
worked example, the test suite's kinematic backend) finds any assignment to a base-owned
attribute: ``self.x = ...``, ``self.x[...] = ...``, ``self.x += ...``, ``del self.x``,
``setattr(self, "x", ...)``, ``np.copyto(self.x, ...)``, ``out=self.x`` and numpy's
in-place methods (``self.x.fill(...)``).
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from pathlib import Path

import pytest

from humanclaw_gym.backends import registry
from humanclaw_gym.physics import base as base_module
from humanclaw_gym.physics.base import BASE_OPTIONS, BASE_STATE, HalfPhysicsBase

PHYSICS_DIR = Path(base_module.__file__).parent
_IN_PLACE_METHODS = frozenset({"fill", "put", "sort", "resize", "setflags", "partition", "itemset"})


def _self_attr(node: ast.AST, names: frozenset[str]) -> str | None:
    """``x`` when ``node`` is ``self.x`` (or ``self.x[...]``, ``self.x.y``) with ``x`` in
    ``names``."""
    while isinstance(node, (ast.Subscript, ast.Attribute, ast.Starred)):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
        ):
            return node.attr if node.attr in names else None
        node = node.value
    return None


def _targets(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, (ast.Tuple, ast.List)):
        return [t for elt in node.elts for t in _targets(elt)]
    return [node]


def writes_of(source: str, names: frozenset[str]) -> list[tuple[int, str]]:
    """``(line, attribute)`` of every write of a ``names`` attribute of ``self`` in
    ``source`` (see the module docstring)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign):
            targets = [t for target in node.targets for t in _targets(target)]
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = _targets(node.target)
        elif isinstance(node, ast.Delete):
            targets = [t for target in node.targets for t in _targets(target)]
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in ("setattr", "__setattr__") and len(node.args) >= 2:
                obj, attr = node.args[-3] if len(node.args) >= 3 else node.args[0], node.args[1]
                if (
                    isinstance(obj, ast.Name)
                    and obj.id == "self"
                    and isinstance(attr, ast.Constant)
                    and attr.value in names
                ):
                    found.append((node.lineno, str(attr.value)))
            if name == "copyto" and node.args:
                targets.append(node.args[0])
            targets += [k.value for k in node.keywords if k.arg == "out"]
            if isinstance(func, ast.Attribute) and func.attr in _IN_PLACE_METHODS:
                targets.append(func.value)
        for target in targets:
            attr = _self_attr(target, names)
            if attr is not None:
                found.append((getattr(target, "lineno", getattr(node, "lineno", 0)), attr))
    return sorted(set(found))


def _backends_on_the_base() -> list[type]:
    out = []
    for entry in registry.entries("physics").values():
        try:
            cls = entry.load()
        except registry.BackendCapabilityError:  # an optional engine module missing
            continue
        if isinstance(cls, type) and issubclass(cls, HalfPhysicsBase):
            out.append(cls)
    return out


def _owned() -> frozenset[str]:
    """The base's state and every option any backend on the base declares."""
    options = {o.name for cls in _backends_on_the_base() for o in cls.options}
    return BASE_STATE | frozenset(options)


def test_the_scan_finds_every_kind_of_write() -> None:
    """The scanner itself: each way of writing a base-owned attribute is found (so the
    tests below fail if a backend module does any of them)."""
    bad = textwrap.dedent(
        """
        class Bad:
            def hook(self, scene, frame):
                self._scene = scene
                self._real_pos, other = frame[0:3], 1
                self._real_rot[0] = frame[3:7]
                self._episode += 1
                self._dynamic_ids: tuple = ()
                del self._episode_ready
                setattr(self, "pjsc_gains", None)
                np.copyto(self.max_torque_nm, 0.0)
                np.multiply(frame, 2.0, out=self._drive_map)
                self.body.links[0] = None
                self._real_rot.fill(0.0)
                self.solver_iterations = 3
                self._own = self._real_pos.copy()  # reading is fine
        """
    )
    got = {attr for _, attr in writes_of(bad, _owned())}
    assert got == {
        "_scene",
        "_real_pos",
        "_real_rot",
        "_episode",
        "_dynamic_ids",
        "_episode_ready",
        "pjsc_gains",
        "max_torque_nm",
        "_drive_map",
        "body",
        "solver_iterations",
    }


def test_the_declaration_is_what_the_base_writes() -> None:
    """``BASE_STATE`` names exactly the attributes base.py writes (a new field of the base
    is declared, a removed one undeclared); the shared options are among them."""
    source = Path(base_module.__file__).read_text()
    everything = frozenset(
        node.attr
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    )
    written = {attr for _, attr in writes_of(source, everything)}
    assert written == set(BASE_STATE)
    assert {o.name for o in BASE_OPTIONS} <= BASE_STATE


def _backend_modules() -> list[Path]:
    mods = {Path(inspect.getfile(cls)) for cls in _backends_on_the_base()}
    mods |= {p for p in PHYSICS_DIR.glob("*.py") if p.name != "base.py"}
    return sorted(mods)


@pytest.mark.parametrize("path", _backend_modules(), ids=lambda p: p.name)
def test_no_backend_module_writes_the_base_state(path: Path) -> None:
    writes = writes_of(path.read_text(), _owned())
    assert not writes, f"{path.name} writes the base's state at (line, attribute) {writes}"


def test_the_worked_and_test_backends_write_none_of_it() -> None:
    """The docs' worked example (docs/architecture.md) and the suite's own kinematic
    backend follow the same rule."""
    from test_extension_seams import KinematicPhysics
    from test_worked_examples import _example

    for name, source in (
        ("docs/architecture.md kinematic_physics.py", _example("kinematic_physics.py")),
        ("tests/test_extension_seams.py", inspect.getsource(KinematicPhysics)),
    ):
        writes = writes_of(source, _owned())
        assert not writes, f"{name} writes the base's state at (line, attribute) {writes}"


def test_the_base_keeps_a_copy_of_what_a_hook_returns() -> None:
    """The base copies the realized state a hook returns (a backend's reused buffers are
    never shared), and refuses a hook that returns none, naming it."""
    import numpy as np
    from test_extension_seams import KinematicPhysics

    from humanclaw_gym.scenes.spec import Part, Room, SceneObject, SceneSpec

    floor = SceneObject(1, "floor", "floor", (0.0, -0.05, 0.0), 0.0, (Part("box", (1, 0.05, 1)),))
    backend = KinematicPhysics()
    backend.build(SceneSpec("void", (Room(0, "hallway", (-1, -1), (1, 1)),), (floor,)))
    frame = np.zeros(75)
    frame[1] = 0.9
    backend.reset(frame)
    assert not np.shares_memory(backend._real_pos, frame)
    frame[1] = 5.0  # the caller's array changes: the base's copy does not
    assert backend.realized_frame()[1] == 0.9
    backend._step_engine = lambda row: None  # a hook that forgets to return
    with pytest.raises(TypeError, match=r"KinematicPhysics\._step_engine returned NoneType"):
        backend.step_frame(frame)
    backend._step_engine = lambda row: (row[0:3], np.zeros((3, 4)))
    with pytest.raises(ValueError, match=r"shapes \(3,\) and \(3, 4\): allowed \(3,\) and"):
        backend.step_frame(frame)
    backend.close()
    assert not backend._is_built()
