"""A backend declares its constructor keywords once; what a configuration names is read once.

* The physics backends on the shared base declare their keywords in one table
  (``options``): the constructor's signature, the env's ``physics_options`` check, the
  ``contract()`` record and forward replay all read it, and the values are kept by the base
  (the backends' constructors take ``**options`` and write none of them).
* Making and resetting an env with ``body_asset=`` reads the body folder once
  (``load_body_asset`` counted), further envs of the process not at all while the folder is
  unchanged, and again once it changed.
"""

from __future__ import annotations

import inspect
import os
from pathlib import Path

import gymnasium as gym
import pytest

import humanclaw_gym  # noqa: F401  (registers the env)
from humanclaw_gym.backends import registry
from humanclaw_gym.backends.config import BackendConfig
from humanclaw_gym.body import asset as asset_module
from humanclaw_gym.body.asset_cache import cached_body_asset, clear_body_asset_cache
from humanclaw_gym.body.synthetic import write_synthetic_body_asset
from humanclaw_gym.physics.base import BASE_OPTIONS, HalfPhysicsBase, PhysicsOption
from humanclaw_gym.replay.forward import _tuning_kwargs

ENV_ID = "HumanClawFindNavInteract-v0"


def _physics_on_the_base() -> list[tuple[str, type]]:
    out = []
    for name, entry in registry.entries("physics").items():
        try:
            cls = entry.load()
        except registry.BackendCapabilityError:  # an optional engine module missing
            continue
        if isinstance(cls, type) and issubclass(cls, HalfPhysicsBase):
            out.append((name, cls))
    return out


@pytest.mark.parametrize("name,cls", _physics_on_the_base())
def test_a_backend_declares_its_keywords_once(name: str, cls: type) -> None:
    declared = cls.options
    assert all(isinstance(o, PhysicsOption) for o in declared)
    # the shared keywords first (a backend changes only their defaults), then its own
    assert [o.name for o in declared[: len(BASE_OPTIONS)]] == [o.name for o in BASE_OPTIONS]
    # the constructor takes **options: the signature is made from the declaration
    own = inspect.signature(cls.__init__).parameters
    assert [p.kind for p in own.values()][1:] == [inspect.Parameter.VAR_KEYWORD]
    params = inspect.signature(cls).parameters
    assert list(params) == [o.name for o in declared]
    assert all(params[o.name].default is o.default or params[o.name].default == o.default
               for o in declared)  # fmt: skip
    # the env's check names exactly the declared keywords
    with pytest.raises(ValueError, match="not accepted") as refused:
        BackendConfig(physics=name, physics_options={"no_such_option": 1}).check()
    assert str([o.name for o in declared]) in str(refused.value)
    if name == "mujoco":
        pytest.importorskip("mujoco")
    backend = cls(solver_iterations=7)
    try:
        # the base keeps every declared value under its name; contract() records them and
        # forward replay rebuilds the backend from the recorded ones
        for option in declared:
            assert hasattr(backend, option.name), option.name
        assert backend.solver_iterations == 7
        contract = backend.contract()
        recorded = [o.name for o in declared if o.recorded]
        assert set(recorded) <= set(contract)
        assert sorted(_tuning_kwargs(cls, contract)) == sorted(recorded)
        rebuilt = cls(**_tuning_kwargs(cls, contract))
        assert rebuilt.contract() == contract
    finally:
        backend.close()
    with pytest.raises(TypeError, match=r"unexpected keyword arguments \['stiffness'\]"):
        cls(stiffness=1)


def test_an_option_a_backend_adds_is_checked_kept_and_recorded() -> None:
    pytest.importorskip("mujoco")
    from humanclaw_gym.physics.mujoco_backend import MujocoHalfPhysics

    extra = [
        o.name for o in MujocoHalfPhysics.options if o.name not in {b.name for b in BASE_OPTIONS}
    ]
    assert extra == ["target_ramp"]
    held = MujocoHalfPhysics(target_ramp=False)
    assert held.target_ramp is False and held.contract()["target_ramp"] is False
    assert MujocoHalfPhysics().solver_iterations == 20  # its own default of a shared one
    with pytest.raises(TypeError, match="target_ramp must be a bool"):
        MujocoHalfPhysics(target_ramp=1)


# ----------------------------------------------------------------------------------------
# a body asset is read once
# ----------------------------------------------------------------------------------------
@pytest.fixture
def counted_reads(monkeypatch):
    """The folders ``load_body_asset`` reads, in order (the cache starts empty)."""
    reads: list[str] = []
    real = asset_module.load_body_asset

    def counting(path):
        reads.append(os.fspath(path))
        return real(path)

    clear_body_asset_cache()
    monkeypatch.setattr(asset_module, "load_body_asset", counting)
    yield reads
    clear_body_asset_cache()


def test_an_env_reads_its_body_asset_once(tmp_path: Path, counted_reads: list[str]) -> None:
    body = write_synthetic_body_asset(tmp_path / "merged")
    env = gym.make(ENV_ID, split="val100", body_asset=str(body), obs_size=32, max_steps=3)
    try:
        env.reset(seed=0)
        env.step("Walk<forward><slow>")
        env.reset(seed=1)  # another episode (and scene): no read either
    finally:
        env.close()
    assert len(counted_reads) == 1
    # more envs of the process (a vector env) reuse that read while the folder is unchanged
    envs = gym.make_vec(ENV_ID, num_envs=2, split="val100", body_asset=str(body), obs_size=32)
    try:
        envs.reset(seed=0)
    finally:
        envs.close()
    assert len(counted_reads) == 1
    assert cached_body_asset(body) is cached_body_asset(str(body))  # one shared body
    # a changed file is read again
    metadata = body / "metadata.json"
    metadata.write_text(metadata.read_text().replace("{", '{"note": "changed", ', 1))
    env = gym.make(ENV_ID, split="val100", body_asset=str(body), obs_size=32)
    try:
        env.reset(seed=0)
        assert (
            env.unwrapped.backend_info["body_asset"]["sha256"]
            == asset_module.load_body_asset(body).sha256
        )
    finally:
        env.close()
    assert len(counted_reads) == 3  # the changed folder once, and the check just above


def test_a_body_folder_that_cannot_be_read_is_not_cached(tmp_path: Path, counted_reads) -> None:
    with pytest.raises(asset_module.BodyAssetError, match="does not exist"):
        cached_body_asset(tmp_path / "missing")
    with pytest.raises(asset_module.BodyAssetError, match="does not exist"):
        cached_body_asset(tmp_path / "missing")
    assert len(counted_reads) == 2
