"""The body-mesh render hook (``set_body_mesh``) and the env's ``body_model_dir`` option.

Renderer tests run on both backends with hand-made meshes (no SMPL-X needed); env tests
load a synthetic 64-vertex SMPL-X file through the real ``smplx`` package
(:mod:`smplx_synthetic`) and are skipped without it.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import humanclaw_gym  # noqa: F401  (registers the env)
from humanclaw_gym.backends import registry
from humanclaw_gym.backends.protocols import (
    BodyMeshRenderBackend,
    Camera,
    RenderBackend,
    RenderCapabilities,
    check_body_mesh,
)
from humanclaw_gym.backends.registry import BackendCapabilityError
from humanclaw_gym.envs import ENV_ID
from humanclaw_gym.render import ModernglRenderer, RenderBackendUnavailable, TinyRenderer
from humanclaw_gym.render.meshes import unit_mesh
from humanclaw_gym.render.moderngl_backend import vertex_normals
from humanclaw_gym.render.transforms import project_points
from humanclaw_gym.scenes.spec import Part, Room, SceneObject, SceneSpec
from humanclaw_gym.skills import SkillCall


def _render_demo():
    """``scripts/render_demo.py`` as a module (its demo home, poses and timing)."""
    path = Path(__file__).resolve().parents[1] / "scripts" / "render_demo.py"
    spec = importlib.util.spec_from_file_location("_render_demo_script", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_demo = _render_demo()
standing_link_poses = _demo.standing_link_poses

FLOOR_ID, WALL_ID, BOX_ID = 1, 2, 3
BOX_POS = (0.8, 0.3, 2.0)
CAPSULE_XZ = (-1.0, 1.5)
MESH_CENTRE = (0.0, 0.9, 2.2)
SIZE = 160


# --------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------
def _scene() -> SceneSpec:
    objects = (
        SceneObject(FLOOR_ID, "floor_0", "floor", (0.0, -0.05, 0.0), 0.0,
                    (Part("box", (4.0, 0.05, 4.0), color=(0.6, 0.45, 0.3), material="wood"),)),
        SceneObject(WALL_ID, "wall_0", "wall", (0.0, 1.25, 4.0), 0.0,
                    (Part("box", (4.0, 1.25, 0.05), color=(0.9, 0.88, 0.82)),)),
        SceneObject(BOX_ID, "box_0", "box", BOX_POS, 0.0,
                    (Part("box", (0.3, 0.3, 0.3), color=(0.85, 0.1, 0.1)),), dynamic=True,
                    mass_kg=2.0),
    )  # fmt: skip
    return SceneSpec("body_mesh_test", (Room(0, "living_room", (-4.0, -4.0), (4.0, 4.0)),), objects)


def _camera() -> Camera:
    eye = np.array([0.0, 1.3, -0.4])
    target = np.array([-0.2, 0.7, 2.0])
    return Camera(tuple(eye), tuple(target - eye), fov_y_deg=70.0, width=SIZE, height=SIZE)


def _sphere(centre=MESH_CENTRE, radius: float = 0.35) -> tuple[np.ndarray, np.ndarray]:
    """A closed, outward-wound UV sphere: ``(vertices float32 (V, 3), faces int64 (F, 3))``."""
    data, indices = unit_mesh("sphere")
    return (data[:, :3] * radius + np.asarray(centre)).astype(np.float32), indices.reshape(
        -1, 3
    ).astype(np.int64)


def _pixel(point) -> tuple[int, int]:
    ((col, row),) = project_points(_camera(), np.asarray([point], dtype=np.float64))[0]
    return int(row), int(col)


def _make(name: str):
    if name == "moderngl":
        try:
            return ModernglRenderer(width_hint=SIZE)
        except RenderBackendUnavailable as exc:
            pytest.skip(f"moderngl renderer unavailable here: {exc}")
    return TinyRenderer()


@pytest.fixture(params=["moderngl", "tiny"])
def renderer(request):
    r = _make(request.param)
    r.build(_scene())
    yield r
    r.close()


def _body_mask(r, camera: Camera | None = None) -> np.ndarray:
    return r.render(camera or _camera(), {"instance"}).instance == 0


# --------------------------------------------------------------------------------------
# protocol, capability, validation
# --------------------------------------------------------------------------------------
def test_capabilities_and_protocols(renderer):
    assert isinstance(renderer, RenderBackend)
    assert isinstance(renderer, BodyMeshRenderBackend)
    assert renderer.capabilities.body_mesh
    assert registry.entries("render")[renderer.capabilities.name].capabilities.body_mesh
    assert RenderCapabilities(name="x").body_mesh is False  # off unless declared


def test_mesh_is_drawn_with_the_human_id_and_body_colour(renderer):
    centre_px = _pixel(MESH_CENTRE)
    before = renderer.render(_camera(), {"instance"})
    assert before.instance[centre_px] != 0
    verts, faces = _sphere()
    renderer.set_body_mesh(verts, faces)
    after = renderer.render(_camera(), {"instance"})
    assert after.instance[centre_px] == 0
    r, g, b = (int(c) for c in after.rgb[centre_px])
    assert b > r + 40 and b > g + 20, "the mesh is drawn in the body's blue"
    changed = np.any(after.rgb != before.rgb, axis=2)
    mask = after.instance == 0
    assert mask.sum() > 300
    assert np.all(changed[mask] | (before.instance[mask] == 0))
    assert not np.any(changed & ~mask), "only mesh pixels change"
    np.testing.assert_array_equal(renderer.render(_camera()).rgb, after.rgb)  # deterministic


def test_mesh_colour_matches_the_capsule_body(renderer):
    renderer.set_body_pose(standing_link_poses(*CAPSULE_XZ))
    res = renderer.render(_camera(), {"instance"})
    capsule = np.median(res.rgb[res.instance == 0].astype(float), axis=0)
    renderer.set_body_mesh(*_sphere())
    res = renderer.render(_camera(), {"instance"})
    mesh = np.median(res.rgb[res.instance == 0].astype(float), axis=0)
    np.testing.assert_allclose(mesh / mesh.max(), capsule / capsule.max(), atol=0.12)


def test_scene_in_front_hides_the_mesh(renderer):
    """Depth test against the scene: a mesh behind the box stays hidden there."""
    box_front = (BOX_POS[0], BOX_POS[1], BOX_POS[2] - 0.3)
    behind = (BOX_POS[0], BOX_POS[1], BOX_POS[2] + 0.5)
    renderer.set_body_mesh(*_sphere(behind, radius=0.2))
    res = renderer.render(_camera(), {"instance"})
    assert res.instance[_pixel(box_front)] == BOX_ID
    in_front = (BOX_POS[0], BOX_POS[1], BOX_POS[2] - 0.8)
    renderer.set_body_mesh(*_sphere(in_front, radius=0.2))
    assert renderer.render(_camera(), {"instance"}).instance[_pixel(in_front)] == 0


def test_capsules_are_hidden_while_a_mesh_is_set(renderer):
    """Rule: the mesh replaces the links until clear_body_mesh() or build()."""
    poses = standing_link_poses(*CAPSULE_XZ)
    renderer.set_body_pose(poses)
    capsule_only = _body_mask(renderer)
    assert capsule_only.sum() > 200
    verts, faces = _sphere()
    renderer.set_body_mesh(verts, faces)
    mesh_only = _body_mask(renderer)
    assert not np.any(capsule_only & mesh_only), "no capsule pixel is left"
    rows, cols = np.nonzero(mesh_only)
    projected = project_points(_camera(), verts.astype(np.float64))[0]
    assert cols.min() >= projected[:, 0].min() - 1 and cols.max() <= projected[:, 0].max() + 1
    assert rows.min() >= projected[:, 1].min() - 1 and rows.max() <= projected[:, 1].max() + 1
    # set_body_pose does not bring the capsules back ...
    renderer.set_body_pose(standing_link_poses(-1.2, 1.4))
    np.testing.assert_array_equal(_body_mask(renderer), mesh_only)
    # ... clear_body_mesh does, at the latest pose
    renderer.clear_body_mesh()
    moved = _body_mask(renderer)
    assert moved.sum() > 200 and not np.array_equal(moved, capsule_only)
    assert not np.any(moved & mesh_only & ~capsule_only)
    # the faces were forgotten too
    with pytest.raises(ValueError, match="faces"):
        renderer.set_body_mesh(verts)


def test_build_forgets_the_mesh(renderer):
    renderer.set_body_mesh(*_sphere())
    renderer.build(_scene())
    assert not _body_mask(renderer).any()  # hidden until the next pose or mesh
    with pytest.raises(ValueError, match="faces"):
        renderer.set_body_mesh(_sphere()[0])
    renderer.set_body_mesh(*_sphere())
    assert _body_mask(renderer).any()


def test_moving_vertices_keeps_the_faces_and_moves_the_pixels(renderer):
    verts, faces = _sphere()
    renderer.set_body_mesh(verts, faces)
    first = _body_mask(renderer)
    shifted = verts + np.float32([0.6, 0.0, 0.0])
    renderer.set_body_mesh(shifted)  # faces=None: same topology
    second = _body_mask(renderer)
    assert second.sum() > 300 and (first & second).sum() < 0.5 * first.sum()
    renderer.set_body_mesh(shifted, faces)  # passing the same faces again is fine too
    np.testing.assert_array_equal(_body_mask(renderer), second)
    # a new topology with a different vertex count
    small_v, small_f = _sphere(radius=0.1)
    box = unit_mesh("box")
    renderer.set_body_mesh(
        (box[0][:, :3] * 0.1 + MESH_CENTRE).astype(np.float32), box[1].reshape(-1, 3)
    )
    assert 0 < _body_mask(renderer).sum() < second.sum()
    assert len(small_v) != len(box[0])
    with pytest.raises(ValueError, match="topology"):
        renderer.set_body_mesh(small_v)


def test_renderer_copies_the_arrays(renderer):
    verts, faces = _sphere()
    renderer.set_body_mesh(verts, faces)
    reference = renderer.render(_camera(), {"instance"})
    verts += 5.0
    faces[:] = 0
    again = renderer.render(_camera(), {"instance"})
    np.testing.assert_array_equal(again.rgb, reference.rgb)
    np.testing.assert_array_equal(again.instance, reference.instance)


@pytest.mark.parametrize(
    ("vertices", "faces", "message"),
    [
        (np.zeros((10, 2), np.float32), np.array([[0, 1, 2]]), r"vertices must have shape \(V, 3\)"),
        (np.zeros((2, 3), np.float32), np.array([[0, 1, 1]]), r"V >= 3, got \(2, 3\)"),
        (np.zeros((10, 3), np.int32), np.array([[0, 1, 2]]), "vertices must have a float dtype"),
        (np.full((10, 3), np.nan, np.float32), np.array([[0, 1, 2]]), "vertices must be finite"),
        (np.array([[0, 0, 0]] * 9 + [[np.inf, 0, 0]], np.float32), np.array([[0, 1, 2]]),
         "row 9"),
        (np.zeros((10, 3), np.float32), np.array([[0, 1, 10]]), r"vertex 10.*\[0, 9\]"),
        (np.zeros((10, 3), np.float32), np.array([[0, -1, 2]]), r"vertex -1.*\[0, 9\]"),
        (np.zeros((10, 3), np.float32), np.array([[0.0, 1.0, 2.0]]), "faces must have an integer"),
        (np.zeros((10, 3), np.float32), np.array([[0, 1, 2, 3]]), r"faces must have shape \(F, 3\)"),
        (np.zeros((10, 3), np.float32), np.zeros((0, 3), np.int64), "F >= 1"),
        (np.zeros((10, 3), np.float32), None, "none are set"),
    ],
)  # fmt: skip
def test_bad_mesh_input_raises_before_anything_changes(renderer, vertices, faces, message):
    renderer.set_body_pose(standing_link_poses(*CAPSULE_XZ))
    before = renderer.render(_camera(), {"instance"})
    with pytest.raises(ValueError, match=message):
        renderer.set_body_mesh(vertices, faces)
    after = renderer.render(_camera(), {"instance"})
    np.testing.assert_array_equal(after.rgb, before.rgb)
    np.testing.assert_array_equal(after.instance, before.instance)
    # and a valid mesh set earlier survives a bad call
    renderer.set_body_mesh(*_sphere())
    with_mesh = renderer.render(_camera(), {"instance"})
    with pytest.raises(ValueError):
        renderer.set_body_mesh(vertices, faces if faces is not None else np.array([[0, 1, 99]]))
    np.testing.assert_array_equal(renderer.render(_camera(), {"instance"}).rgb, with_mesh.rgb)


@pytest.mark.parametrize("name", ["moderngl", "tiny"])
def test_mesh_before_build_and_after_close(name):
    r = _make(name)
    verts, faces = _sphere()
    with pytest.raises(RuntimeError, match="before build"):
        r.set_body_mesh(verts, faces)
    r.close()
    with pytest.raises(RuntimeError, match="closed"):
        r.set_body_mesh(verts, faces)
    with pytest.raises(RuntimeError, match="closed"):
        r.clear_body_mesh()


def test_backends_draw_the_same_mesh():
    masks = []
    for name in ("moderngl", "tiny"):
        r = _make(name)
        try:
            r.build(_scene())
            r.set_body_mesh(*_sphere())
            masks.append(_body_mask(r))
        finally:
            r.close()
    iou = (masks[0] & masks[1]).sum() / (masks[0] | masks[1]).sum()
    assert iou > 0.9


def test_tiny_mesh_in_a_close_up_view_is_batched():
    """A mesh filling the image crosses the fragment batch size; the result is unchanged."""
    from humanclaw_gym.render import tiny_backend

    r = TinyRenderer()
    try:
        r.build(_scene())
        r.set_body_mesh(*_sphere((0.0, 1.2, 0.3), radius=0.4))
        whole = r.render(_camera(), {"instance"})
        assert (whole.instance == 0).mean() > 0.5
        old = tiny_backend._FRAGMENT_BATCH
        tiny_backend._FRAGMENT_BATCH = 5000
        try:
            batched = r.render(_camera(), {"instance"})
        finally:
            tiny_backend._FRAGMENT_BATCH = old
        np.testing.assert_array_equal(batched.rgb, whole.rgb)
        np.testing.assert_array_equal(batched.instance, whole.instance)
    finally:
        r.close()


def test_check_body_mesh_returns_copies_in_the_documented_dtypes():
    verts = np.zeros((4, 3), np.float64)
    faces = np.array([[0, 1, 2], [0, 2, 3]], np.uint32)
    v, f = check_body_mesh(verts, faces, None)
    assert v.dtype == np.float32 and f.dtype == np.int32 and v.flags.c_contiguous
    assert not np.shares_memory(v, verts) and not np.shares_memory(f, faces)
    v2, f2 = check_body_mesh(verts, None, 4)
    assert f2 is None and v2.shape == (4, 3)


def test_vertex_normals_of_a_sphere_point_outward():
    verts, faces = _sphere(centre=(0.0, 0.0, 0.0), radius=1.0)
    normals = vertex_normals(verts, faces)
    assert normals.dtype == np.float32
    radial = verts / np.linalg.norm(verts, axis=1, keepdims=True)
    tri = verts[faces]
    area = np.linalg.norm(np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]), axis=1)
    used = np.unique(faces[area > 1e-9])  # the UV sphere has unused/degenerate pole vertices
    assert len(used) > 0.9 * len(verts)
    assert np.all(np.einsum("ij,ij->i", normals[used], radial[used]) > 0.95)
    lone = vertex_normals(np.zeros((4, 3)), np.array([[0, 1, 2]]))  # degenerate + unused
    np.testing.assert_allclose(lone, np.tile([0.0, 1.0, 0.0], (4, 1)))


# --------------------------------------------------------------------------------------
# resolver
# --------------------------------------------------------------------------------------
class NoMeshRenderer(TinyRenderer):
    """The tiny renderer declaring no body mesh."""

    capabilities = RenderCapabilities(name="no-mesh")


class NoMeshEnvRenderer(TinyRenderer):
    capabilities = RenderCapabilities(name="no-mesh-env")


def test_resolver_checks_the_body_mesh_capability():
    registry.register_render("no-mesh", f"{__name__}:NoMeshRenderer")
    ok = registry.resolve(physics="pybullet", render="auto", motion="procedural",
                          need_body_mesh=True)  # fmt: skip
    assert [e.name for e in ok.render] == ["moderngl", "tiny"]
    registry.resolve(physics="pybullet", render="no-mesh", motion="procedural")
    with pytest.raises(BackendCapabilityError, match="'no-mesh' lacks capability body mesh"):
        registry.resolve(physics="pybullet", render="no-mesh", motion="procedural",
                         need_body_mesh=True)  # fmt: skip


# --------------------------------------------------------------------------------------
# the env option
# --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def body_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("smplx")
    from smplx_synthetic import write_synthetic_smplx

    directory = tmp_path_factory.mktemp("smplx_body")
    write_synthetic_smplx(directory, (0.01, -0.35, 0.02))
    return directory


def _episodes():
    from humanclaw_gym.episodes import load_split

    return load_split("val100")


_ACTIONS = (SkillCall.walk("normal"), SkillCall.turn("left", 30))


def _play(**kwargs) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
    """Reset + two steps; returns (ego images, exo images, realized frames)."""
    e = gym.make(ENV_ID, split="val100", render_mode="rgb_array", privileged=True, **kwargs)
    try:
        obs, _ = e.reset(seed=0, options={"episode_id": _episodes()[0].episode_id})
        ego, exo, frames = [obs], [e.render()], [e.unwrapped.privileged_state().realized_frame]
        for action in _ACTIONS:
            obs, *_ = e.step(action)
            ego.append(obs)
            exo.append(e.render())
            frames.append(e.unwrapped.privileged_state().realized_frame)
        return ego, exo, frames
    finally:
        e.close()


def test_env_draws_the_body_mesh_and_keeps_physics_identical(body_model_dir):
    capsule = _play()
    mesh = _play(body_model_dir=body_model_dir)
    mesh_again = _play(body_model_dir=str(body_model_dir), body_model_gender="neutral")
    for a, b in zip(capsule[2], mesh[2], strict=True):
        np.testing.assert_array_equal(a, b)  # physics is bit-identical
    for a, b in zip(capsule[1], mesh[1], strict=True):
        assert np.any(a != b), "the exo view shows the mesh, not the capsules"
    for run in (0, 1, 2):  # deterministic
        for a, b in zip(mesh[run], mesh_again[run], strict=True):
            np.testing.assert_array_equal(a, b)


def test_env_sends_faces_once_per_scene_build(body_model_dir):
    episodes = _episodes()
    other = next(ep for ep in episodes if ep.scene_id != episodes[0].scene_id)
    env = gym.make(ENV_ID, split="val100", body_model_dir=body_model_dir, max_steps=3)
    try:
        env.reset(options={"episode_id": episodes[0].episode_id})
        renderer = env.unwrapped._renderer
        original = renderer.set_body_mesh
        calls: list[tuple[int, bool]] = []

        def spy(vertices, faces=None):
            calls.append((len(vertices), faces is not None))
            original(vertices, faces)

        renderer.set_body_mesh = spy
        env.step(SkillCall.walk("slow"))
        assert calls == [(64, False)]
        env.reset(options={"episode_id": other.episode_id})  # new scene -> build -> faces
        env.step(SkillCall.turn("right", 20))
        assert calls[1:] == [(64, True), (64, False)]
    finally:
        env.close()


def test_env_with_the_tiny_renderer_draws_the_mesh(body_model_dir):
    images = []
    for kwargs in ({}, {"body_model_dir": body_model_dir}):
        e = gym.make(ENV_ID, split="val100", renderer="tiny", render_mode="rgb_array", **kwargs)
        try:
            e.reset(options={"episode_id": _episodes()[0].episode_id})
            images.append(e.render())
        finally:
            e.close()
    assert np.any(images[0] != images[1])


def test_missing_model_file_fails_before_anything_is_built(body_model_dir, tmp_path, monkeypatch):
    def no_backend(self):
        raise AssertionError(f"backend {self.name!r} loaded before the body model was checked")

    monkeypatch.setattr(registry.BackendEntry, "load", no_backend)
    with pytest.raises(FileNotFoundError, match="body_model_dir=.*missing.*SMPLX_NEUTRAL.npz"):
        gym.make(ENV_ID, split="val100", body_model_dir=tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match="SMPLX_NEUTRAL.npz"):
        gym.make(ENV_ID, split="val100", body_model_dir=tmp_path)  # exists, but empty
    with pytest.raises(FileNotFoundError, match="SMPLX_MALE.npz"):
        gym.make(ENV_ID, split="val100", body_model_dir=body_model_dir, body_model_gender="male")


def test_bad_body_model_arguments_are_refused():
    with pytest.raises(ValueError, match="body_model_gender must be one of"):
        gym.make(ENV_ID, split="val100", body_model_dir="/x", body_model_gender="other")
    with pytest.raises(ValueError, match="body_model_dir must be None or a path"):
        gym.make(ENV_ID, split="val100", body_model_dir=42)


def test_renderer_without_the_capability_is_refused_by_the_resolver(body_model_dir):
    registry.register_render("no-mesh-env", f"{__name__}:NoMeshEnvRenderer")
    with pytest.raises(BackendCapabilityError, match="'no-mesh-env' lacks capability body mesh"):
        gym.make(ENV_ID, split="val100", renderer="no-mesh-env", body_model_dir=body_model_dir)
    env = gym.make(ENV_ID, split="val100", renderer="no-mesh-env")  # fine without a body model
    env.close()


def test_vector_entry_point_forwards_the_body_model(body_model_dir):
    envs = gym.make_vec(ENV_ID, num_envs=2, split="val100", body_model_dir=body_model_dir)
    try:
        assert all(sub.unwrapped._body_model is not None for sub in envs.envs)
    finally:
        envs.close()


def test_default_env_imports_nothing_of_smplx_or_torch():
    code = (
        "import sys, gymnasium as gym, humanclaw_gym\n"
        "from humanclaw_gym.envs import ENV_ID\n"
        "e = gym.make(ENV_ID, split='val100', max_steps=2, render_mode='rgb_array')\n"
        "e.reset(seed=0); e.step('Turn<left><30>'); e.render(); e.close()\n"
        "print(sorted(m for m in ('smplx', 'torch') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_delayed_render_draws_the_body_mesh_of_the_saved_frames(body_model_dir, tmp_path):
    import imageio.v3 as iio

    from humanclaw_gym.replay import render_saved_trajectory
    from humanclaw_gym.replay.layout import flat_dir
    from humanclaw_gym.wrappers import TrajectoryWrapper

    rollout = tmp_path / "rollout"
    env = TrajectoryWrapper(gym.make(ENV_ID, split="val100"), rollout, episode_dir_fn=flat_dir)
    try:
        env.reset(seed=0, options={"episode_id": _episodes()[0].episode_id})
        for action in (*_ACTIONS, SkillCall.stop()):
            env.step(action)
    finally:
        env.close()
    capsule = render_saved_trajectory(rollout, tmp_path / "capsule", ego=False)
    mesh = render_saved_trajectory(
        rollout, tmp_path / "mesh", ego=False, body_model_dir=body_model_dir
    )
    assert capsule.body_model is None and mesh.body_model.endswith("SMPLX_NEUTRAL.npz")
    assert mesh.frames == capsule.frames == 31  # reset state + 2 chunks of 15
    a = iio.imread(tmp_path / "capsule" / "exo.mp4", plugin="FFMPEG").astype(int)
    b = iio.imread(tmp_path / "mesh" / "exo.mp4", plugin="FFMPEG").astype(int)
    assert a.shape == b.shape
    assert all(np.abs(x - y).max() > 40 for x, y in zip(a, b, strict=True))  # body differs
    with pytest.raises(FileNotFoundError, match="SMPLX_NEUTRAL"):
        render_saved_trajectory(rollout, tmp_path / "x", ego=False, body_model_dir=tmp_path)
    # render-batch hands the body model to its `humanclaw render` subprocesses
    from humanclaw_gym.replay import render_saved_batch

    (job,) = render_saved_batch(
        [rollout], tmp_path / "batch", workers=1, ego=False, progress=False,
        body_model_dir=body_model_dir,
    )  # fmt: skip
    assert job.ok, job.error
    assert job.report["body_model"].endswith("SMPLX_NEUTRAL.npz")
