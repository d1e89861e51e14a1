"""MuJoCo backend specifics (humanclaw_gym/physics/mujoco_backend.py).

The frame-contract tests run against it in tests/test_physics.py and
tests/test_motion_physics.py; here: its model (materials, masses, drives), the order of its
velocity writes, the compiled drive maths against the interpreted one, scenes it refuses,
threads, and the env / replay path with ``physics="mujoco"``.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")

from humanclaw_gym.backends import registry  # noqa: E402
from humanclaw_gym.body.skeleton import NUM_JOINTS, link_shapes  # noqa: E402
from humanclaw_gym.physics import _mujoco_drive  # noqa: E402
from humanclaw_gym.physics.contract import MOTOR_MAX_TORQUE_NM  # noqa: E402
from humanclaw_gym.physics.mujoco_backend import (  # noqa: E402
    CONTACT_SOLIMP,
    CONTACT_SOLREF,
    MujocoHalfPhysics,
)
from humanclaw_gym.scenes.spec import MeshRef, Part, SceneObject  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from test_physics import (  # noqa: E402
    CUP_ID,
    FLOOR_ID,
    TABLE_ID,
    _cup,
    _gait_frames,
    _scene,
    _standing,
    _table,
    _walk,
)


@pytest.fixture
def backend():
    made = MujocoHalfPhysics()
    made.build(_scene(_table(1.0, 1.0), _cup(1.0, 1.0)))
    yield made
    made.close()


def test_model_materials_masses_and_drives(backend) -> None:
    m = backend._model
    assert m.opt.timestep == pytest.approx(1.0 / 120.0)
    np.testing.assert_allclose(m.opt.gravity, [0.0, -9.8, 0.0])
    assert m.opt.integrator == mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    human = backend._geom_owner == 0
    assert human.sum() == NUM_JOINTS
    # MuJoCo takes the friction of the higher-priority geom: the humanoid's 0.4 against
    # anything (pybullet multiplies 0.4 by the scene's 1.0), 1.0 between objects
    np.testing.assert_allclose(m.geom_friction[human, 0], 0.4)
    assert np.all(m.geom_priority[human] > m.geom_priority[~human].max())
    np.testing.assert_allclose(m.geom_friction[~human, 0], 1.0)
    # no self-collision of the humanoid, everything else collides
    ct, ca = m.geom_contype, m.geom_conaffinity
    assert not np.any(ct[human] & ca[human])
    assert np.all(ct[human][:, None] & ca[~human][None, :])
    # masses of the links and of the dynamic cup
    bodies = backend._body_ids
    np.testing.assert_allclose(m.body_mass[bodies], [s.mass_kg for s in link_shapes()])
    cup_body = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, f"obj{CUP_ID}")
    assert m.body_mass[cup_body] == pytest.approx(0.3)
    # three position actuators per joint, torque-limited like pybullet's motors
    assert m.nu == 3 * (NUM_JOINTS - 1)
    caps = [MOTOR_MAX_TORQUE_NM[n] for n in _joint_names()]
    np.testing.assert_allclose(m.actuator_forcerange[:, 1], np.repeat(caps, 3))
    np.testing.assert_allclose(m.actuator_gainprm[:, 0], -m.actuator_biasprm[:, 1])
    assert np.all(m.actuator_biasprm[:, 2] == 0.0)  # no actuator damping: it sits on the joints
    # the joint damping reaches the torque cap at the largest drive velocity (30 deg per
    # frame), and its feed-forward never exceeds the cap
    drive_max = math.radians(30.0) * 30.0
    np.testing.assert_allclose(backend._damping, np.array(caps) / drive_max)
    from test_physics import _set_joint

    backend.reset(_standing())
    backend.step_frame(_set_joint(_standing(), "left_hip", (-1.5, 0.0, 0.0)))
    hip = int(backend._dof_adr[1])
    assert abs(backend._data.qfrc_applied[hip]) == pytest.approx(caps[0])  # clamped at 400
    # one contact impedance and softness on every geom, the feet included
    np.testing.assert_allclose(m.geom_solimp, np.tile(CONTACT_SOLIMP, (m.ngeom, 1)))
    np.testing.assert_allclose(m.geom_solref, np.tile(CONTACT_SOLREF, (m.ngeom, 1)))


def _joint_names() -> list[str]:
    from humanclaw_gym.body.skeleton import JOINT_NAMES

    return list(JOINT_NAMES[1:])


class _RecordingMujoco:
    """Stands in for the ``mujoco`` module inside a backend: records the root velocity and
    the actuator targets at every ``mj_step``."""

    def __init__(self, backend: MujocoHalfPhysics) -> None:
        self._inner = mujoco
        self._backend = backend
        self.log: list[tuple[np.ndarray, np.ndarray]] = []
        self.after: list[np.ndarray] = []  # the whole qvel after each step

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def mj_step(self, m, d, nstep=1):
        for _ in range(nstep):
            self.log.append((d.qvel[0:6].copy(), d.ctrl.copy()))
            self._inner.mj_step(m, d)
            self.after.append(d.qvel.copy())


def test_root_velocity_written_before_substeps_0_and_2_only(backend) -> None:
    backend.reset(_standing())
    recorder = _RecordingMujoco(backend)
    backend._mj = recorder
    backend._compiled_frames = False  # the bindings' path; the compiled one equals it
    from humanclaw_gym.physics.rotations import (
        cap_rotvec,
        quat_conj,
        quat_exp,
        quat_log,
        quat_mul,
        quat_rotate,
    )

    frames = [_standing(0.0, 0.02 * (i + 1), 0.05 * (i + 1)) for i in range(3)]
    omegas = []
    for frame in frames:
        # the root angular drive (gain 1): realized -> generated orientation, capped, in
        # the body frame (MuJoCo's free-joint angular velocity)
        real = backend._real_rot[0].copy()
        delta = cap_rotvec(quat_log(quat_mul(quat_exp(frame[3:6]), quat_conj(real))), math.pi / 6)
        omegas.append(quat_rotate(quat_conj(real), 30.0 * delta))
        before = len(recorder.log)
        backend.step_frame(frame)
        assert len(recorder.log) - before == 4  # four substeps per frame
    for k in range(3):
        sub = [q for q, _ in recorder.log[4 * k : 4 * k + 4]]
        after = recorder.after[4 * k : 4 * k + 4]
        # x/z velocity = generated displacement * 30 Hz before substeps 0 and 2
        assert sub[0][2] == pytest.approx(0.6) and sub[2][2] == pytest.approx(0.6)
        assert sub[0][0] == pytest.approx(0.0) and sub[2][0] == pytest.approx(0.0)
        # contacts changed it during substeps 0 and 2 ...
        assert after[0][2] != sub[0][2] and after[2][2] != sub[2][2]
        # ... and nothing is written before substeps 1 and 3
        assert np.array_equal(sub[1], after[0][0:6]) and np.array_equal(sub[3], after[2][0:6])
        # before substep 2 only x and z are written: y and the angular velocity are kept
        assert sub[2][1] == after[1][1] and np.array_equal(sub[2][3:6], after[1][3:6])
        # the angular velocity is written before substep 0
        np.testing.assert_allclose(sub[0][3:6], omegas[k], atol=1e-9)


def test_actuator_targets_move_along_the_frame(backend) -> None:
    """With target_ramp (default) the targets of substep k lie k/4 of the way from the
    realized rotation to the command; without it the command is held all frame."""
    start = _standing()
    backend.reset(start)
    recorder = _RecordingMujoco(backend)
    backend._mj = recorder
    backend._compiled_frames = False  # the bindings' path; the compiled one equals it
    from test_physics import _set_joint

    bent = _set_joint(start, "left_elbow", (0.0, 0.4, 0.0))
    backend.step_frame(bent)
    elbow = 3 * (_joint_names().index("left_elbow"))
    targets = [c[elbow + 1] for _, c in recorder.log[-4:]]
    np.testing.assert_allclose(targets, [0.0, 0.1, 0.2, 0.3], atol=1e-12)
    held = MujocoHalfPhysics(target_ramp=False)
    held.build(_scene())
    held.reset(start)
    rec2 = _RecordingMujoco(held)
    held._mj = rec2
    held._compiled_frames = False
    held.step_frame(bent)
    np.testing.assert_allclose([c[elbow + 1] for _, c in rec2.log], [0.4] * 4, atol=1e-12)
    held.close()


_KERNEL_SCRIPT = r"""
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from test_physics import _scene, _standing, _table, _cup, _gait_frames
from humanclaw_gym.physics import _mujoco_drive
from humanclaw_gym.physics.mujoco_backend import MujocoHalfPhysics
b = MujocoHalfPhysics()
b.build(_scene(_table(1.0, 0.3), _cup(0.8, 0.3)))
start = _standing()
b.reset(start)
out = []
for f in _gait_frames(start, 45, 0.5):
    b.step_frame(f)
    out.append(np.concatenate([b.realized_frame(), b.object_poses().ravel()]))
np.save(sys.argv[2], np.array(out))
print(json.dumps({"compiled": _mujoco_drive.COMPILED}))
"""


def test_compiled_and_interpreted_drive_maths_give_identical_trajectories(tmp_path) -> None:
    """numba is optional: without it the same drive functions run in the interpreter and
    the trajectory is bit-identical (replays recorded with one run exactly on the other)."""
    pytest.importorskip("numba")
    script = tmp_path / "run.py"
    script.write_text(_KERNEL_SCRIPT)
    results = {}
    for label, flag in (("compiled", "0"), ("interpreted", "1")):
        env = dict(os.environ, HUMANCLAW_NO_NUMBA=flag)
        out = tmp_path / f"{label}.npy"
        proc = subprocess.run(
            [sys.executable, str(script), str(Path(__file__).parent), str(out)],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        info = json.loads(proc.stdout.strip().splitlines()[-1])
        assert info["compiled"] is (label == "compiled")
        results[label] = np.load(out)
    assert results["compiled"].shape == (45, 75 + 7)
    assert np.array_equal(results["compiled"], results["interpreted"])


@pytest.mark.parametrize("target_ramp", [True, False])
def test_whole_chunks_without_the_gil_equal_frame_by_frame_bit_for_bit(target_ramp) -> None:
    """step_frames runs chunks in one compiled call that calls libmujoco directly; the
    result equals step_frame through the bindings, frame by frame, bit for bit."""
    if _mujoco_drive.frame_runner() is None:
        pytest.skip("numba is not installed: there is no compiled runner")
    scene = _scene(_table(1.0, 0.3), _cup(0.8, 0.3))
    start = _standing()
    frames = np.array(_gait_frames(start, 45, 0.5))
    runs = {}
    for label in ("bindings", "compiled"):
        b = MujocoHalfPhysics(target_ramp=target_ramp)
        b._compiled_frames = label == "compiled"
        b.build(scene)
        b.reset(start)
        out = []
        for k in range(0, 45, 15):
            if label == "compiled":
                b.step_frames(frames[k : k + 15])
            else:
                for f in frames[k : k + 15]:
                    b.step_frame(f)
            out.append(
                np.concatenate(
                    [b._data.qpos, b._data.qvel, b.link_poses().ravel(), b.realized_frame()]
                )
            )
        runs[label] = np.array(out)
        b.close()
    assert np.array_equal(runs["compiled"], runs["bindings"])


def test_step_frames_checks_its_input_first_and_stops_where_it_diverges(
    backend, tmp_path, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)  # MuJoCo appends its warning to MUJOCO_LOG.TXT here
    start = _standing()
    backend.reset(start)
    frames = np.array(_gait_frames(start, 6, 0.5))
    before = backend._data.qpos.copy()
    with pytest.raises(ValueError, match=r"step_frames: frames has shape \(75,\)"):
        backend.step_frames(frames[0])
    bad = frames.copy()
    bad[4, 10] = np.nan
    with pytest.raises(ValueError, match=r"step_frames\[4\]"):
        backend.step_frames(bad)
    assert np.array_equal(backend._data.qpos, before)  # nothing ran
    backend.step_frames(frames[:3])
    backend._data.qpos[8] = np.nan  # MuJoCo resets the data at the next substep
    with pytest.raises(RuntimeError, match="mujoco simulation diverged"):
        backend.step_frames(frames[3:])
    assert backend._data.time == pytest.approx(4 / 120)  # stopped after that frame
    with pytest.raises(RuntimeError, match="call reset"):
        backend.step_frames(frames[3:])


def test_mesh_scenes_are_refused_clearly() -> None:
    with pytest.raises(registry.BackendCapabilityError, match="'mujoco' cannot collide.*'mesh'"):
        registry.resolve(
            physics="mujoco",
            render="tiny",
            motion="procedural",
            part_shapes=("box", "mesh"),
        )
    ref = MeshRef(asset="/nonexistent/chair.glb")
    chair = SceneObject(
        9, "chair", "chair", (0.0, 0.0, 2.0), 0.0, (Part("mesh", (0.3, 0.4, 0.3), mesh=ref),)
    )
    backend = MujocoHalfPhysics()
    with pytest.raises(ValueError, match="'chair'.*'mesh' is not supported by the mujoco"):
        backend.build(_scene(chair))
    backend.close()


def test_contacts_report_exact_parts_and_queries_change_nothing(backend) -> None:
    backend.reset(_standing())
    for frame in _gait_frames(_standing(), 6, 0.4):
        backend.step_frame(frame)
    rows = backend.contacts()
    cup_table = rows[(rows["a"] == TABLE_ID) & (rows["b"] == CUP_ID)]
    assert len(cup_table) > 0 and np.all(cup_table["link_a"] == 0)
    feet = rows[(rows["a"] == 0) & (rows["b"] == FLOOR_ID)]
    assert len(feet) > 0 and np.all(feet["distance"] < 0.011)
    # the points lie on the two surfaces: pos_b - pos_a is distance along the normal
    gap = np.linalg.norm(feet["pos_b"] - feet["pos_a"], axis=1)
    np.testing.assert_allclose(gap, np.abs(feet["distance"]), atol=1e-9)


def test_backends_step_on_threads_like_one_after_the_other() -> None:
    """Several backends in one process may step concurrently (the batched vector env does):
    results equal serial stepping bit for bit."""
    scenes = [_scene(_table(1.0, 0.4 * k), _cup(0.8, 0.4 * k)) for k in range(3)]
    frames = [_gait_frames(_standing(), 30, 0.3 + 0.1 * k) for k in range(3)]

    def run(k: int, out: dict) -> None:
        b = MujocoHalfPhysics()
        b.build(scenes[k])
        b.reset(_standing())
        out[k] = _walk(b, frames[k])
        b.close()

    serial: dict = {}
    for k in range(3):
        run(k, serial)
    threaded: dict = {}
    threads = [threading.Thread(target=run, args=(k, threaded)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in range(3):
        assert np.array_equal(serial[k], threaded[k])


def test_env_runs_on_mujoco_and_forward_replay_is_exact(tmp_path) -> None:
    import gymnasium as gym

    import humanclaw_gym  # noqa: F401
    from humanclaw_gym.episodes import load_split
    from humanclaw_gym.replay.forward import forward_replay
    from humanclaw_gym.wrappers import TrajectoryWrapper

    episodes = list(load_split("val100"))
    same = [e for e in episodes if e.scene_id == episodes[0].scene_id][:2]
    env = TrajectoryWrapper(
        gym.make("HumanClawFindNavInteract-v0", physics="mujoco", max_steps=3, renderer="tiny"),
        tmp_path,
    )
    assert env.unwrapped.backend_info["physics"] == "mujoco"
    dirs = []
    for ep, acts in zip(same, (["Walk<forward><normal>", "Turn<left><30>", "Stop/Stand"],
                               ["Turn<right><45>", "Side step<left><0.3>"]), strict=True):  # fmt: skip
        obs, _ = env.reset(options={"episode_id": ep.episode_id})
        assert obs.shape == (448, 448, 3)
        for a in acts:
            env.step(a)
        dirs.append(env.last_bundle_dir)
    env.reset(options={"episode_id": same[0].episode_id})  # closes the second bundle
    env.close()
    for d in dirs:
        report = forward_replay(d)  # the backend the manifest names
        assert report.physics == "mujoco"
        assert report.contract_matches is True
        assert report.frames > 0 and report.max_abs_deviation == 0.0, report


def test_drive_kernel_helpers_match_the_numpy_rotations() -> None:
    from humanclaw_gym.physics.rotations import quat_exp, quat_log, quat_mul

    rng = np.random.default_rng(5)
    for _ in range(20):
        a, b = rng.normal(size=3), rng.normal(size=3)
        qa, qb = quat_exp(a), quat_exp(b)
        np.testing.assert_allclose(_mujoco_drive._qexp(*a), qa, atol=1e-15)
        np.testing.assert_allclose(_mujoco_drive._qmul(*qa, *qb), quat_mul(qa, qb), atol=1e-15)
        np.testing.assert_allclose(_mujoco_drive._qlog(*(-qa)), quat_log(qa), atol=1e-12)
    assert math.isclose(np.linalg.norm(_mujoco_drive._cap(3.0, 4.0, 0.0, 1.0)), 1.0)


def test_a_scene_dataset_with_mujoco_is_refused_before_anything_is_built(tmp_path) -> None:
    """Imported (HSSD) homes are triangle meshes, which this backend does not collide: the
    env refuses the combination when it is made, naming the backend and the shape."""
    pytest.importorskip("trimesh")
    from humanclaw_gym.envs.find_nav_interact import FindNavInteractEnv
    from humanclaw_gym.scenes.hssd.synthetic import write_synthetic_dataset

    synth = write_synthetic_dataset(tmp_path / "dataset")
    with pytest.raises(registry.BackendCapabilityError, match="'mujoco' cannot collide.*'mesh'"):
        FindNavInteractEnv(
            physics="mujoco", scene_dataset=str(synth.root), episodes=str(synth.episodes_dir)
        )
