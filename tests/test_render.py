"""Tests of the render backends (moderngl, TinyRenderer), cameras and camera maths."""

from __future__ import annotations

import importlib.util
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from humanclaw_gym.backends.protocols import Camera, RenderBackend, RenderResult
from humanclaw_gym.body.skeleton import EYE_OFFSET_IN_HEAD_M, JOINT_INDEX
from humanclaw_gym.render import (
    MATERIAL_NAMES,
    ModernglRenderer,
    RenderBackendUnavailable,
    TinyRenderer,
    create_renderer,
    ego_camera,
    exo_camera,
    top_down_camera,
)
from humanclaw_gym.render import cameras as cameras_mod
from humanclaw_gym.render.cameras import EXO_CUTAWAY_BEHIND_M, CutawayCamera
from humanclaw_gym.render.meshes import MESH_KINDS, unit_mesh
from humanclaw_gym.render.textures import MATERIAL_LAYERS, pattern_layers
from humanclaw_gym.render.transforms import (
    matrix_to_quat_xyzw,
    pose_to_matrix,
    project_points,
    quat_xyzw_to_matrix,
    validate_camera,
    view_matrix,
)
from humanclaw_gym.scenes.spec import Part, Room, SceneObject, SceneSpec


def _render_demo():
    """``scripts/render_demo.py`` as a module (its demo home, poses and timing)."""
    path = Path(__file__).resolve().parents[1] / "scripts" / "render_demo.py"
    spec = importlib.util.spec_from_file_location("_render_demo_script", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_demo = _render_demo()
benchmark, demo_scene, standing_link_poses = (
    _demo.benchmark,
    _demo.demo_scene,
    _demo.standing_link_poses,
)

FLOOR_ID, WALL_ID, BOX_ID = 1, 2, 3
BOX_POS = (0.8, 0.3, 2.0)
BOX_YAW = 0.3
BODY_XZ = (-1.0, 1.5)


def _small_scene() -> SceneSpec:
    objects = (
        SceneObject(FLOOR_ID, "floor_0", "floor", (0.0, -0.05, 0.0), 0.0,
                    (Part("box", (4.0, 0.05, 4.0), color=(0.6, 0.45, 0.3), material="wood"),)),
        SceneObject(WALL_ID, "wall_0", "wall", (0.0, 1.25, 4.0), 0.0,
                    (Part("box", (4.0, 1.25, 0.05), color=(0.9, 0.88, 0.82), material="plaster"),)),
        SceneObject(BOX_ID, "box_0", "box", BOX_POS, BOX_YAW,
                    (Part("box", (0.3, 0.3, 0.3), color=(0.85, 0.1, 0.1)),), dynamic=True, mass_kg=2.0),
    )  # fmt: skip
    return SceneSpec("render_test", (Room(0, "living_room", (-4.0, -4.0), (4.0, 4.0)),), objects)


def _box_camera(width: int = 448, height: int = 448) -> Camera:
    eye = np.array([0.0, 1.2, -1.5])
    return Camera(position=tuple(eye), forward=tuple(np.array(BOX_POS) - eye), fov_y_deg=70.0,
                  width=width, height=height)  # fmt: skip


def _box_pose(x: float, z: float) -> np.ndarray:
    return np.array([[x, BOX_POS[1], z, 0.0, math.sin(BOX_YAW / 2), 0.0, math.cos(BOX_YAW / 2)]])


def _pixel(camera: Camera, point) -> tuple[int, int]:
    ((col, row),) = project_points(camera, np.asarray([point]))[0]
    return int(row), int(col)


def _make(name: str):
    if name == "moderngl":
        try:
            return ModernglRenderer()
        except RenderBackendUnavailable as exc:
            pytest.skip(f"moderngl renderer unavailable here: {exc}")
    return TinyRenderer()


@pytest.fixture(scope="module", params=["moderngl", "tiny"])
def renderer(request):
    r = _make(request.param)
    r.build(_small_scene())
    r.set_body_pose(standing_link_poses(*BODY_XZ))
    yield r
    r.close()


@pytest.fixture(scope="module")
def both_results():
    out = {}
    for name in ("moderngl", "tiny"):
        r = _make(name)
        try:
            r.build(_small_scene())
            r.set_body_pose(standing_link_poses(*BODY_XZ))
            out[name] = r.render(_box_camera(), {"instance"})
        finally:
            r.close()
    return out


# --------------------------------------------------------------------------------------
# Both backends
# --------------------------------------------------------------------------------------
def test_protocol_and_capabilities(renderer):
    assert isinstance(renderer, RenderBackend)
    assert renderer.capabilities.modes == frozenset({"rgb", "instance", "depth"})
    assert renderer.capabilities.name in ("moderngl", "tiny")


def test_results_are_keyed_by_the_modes_asked_for(renderer):
    """``render(camera, modes)``: one image per mode asked for (``"rgb"`` always), keyed by
    mode; a mode the backend does not declare is refused before anything is drawn."""
    cam = _box_camera(64, 64)
    assert set(renderer.render(cam)) == {"rgb"}
    assert set(renderer.render(cam, {"depth"})) == {"rgb", "depth"}
    both = renderer.render(cam, frozenset({"rgb", "instance", "depth"}))
    assert set(both) == {"rgb", "instance", "depth"} and len(both) == 3
    assert both["instance"] is both.instance and both.get("normals") is None
    np.testing.assert_array_equal(both["rgb"], renderer.render(cam)["rgb"])  # same pass
    with pytest.raises(KeyError, match="'depth' was not rendered"):
        renderer.render(cam)["depth"]
    with pytest.raises(ValueError, match=r"cannot render modes \['normals'\]"):
        renderer.render(cam, {"rgb", "normals"})
    with pytest.raises(ValueError, match="set of render modes"):
        renderer.render(cam, "depth")


def test_a_render_result_always_holds_rgb():
    rgb = np.zeros((2, 2, 3), np.uint8)
    assert set(RenderResult(rgb=rgb, instance=None, normals=np.zeros((2, 2, 3)))) == {
        "rgb",
        "normals",
    }
    assert RenderResult({"rgb": rgb}).depth is None
    with pytest.raises(ValueError, match="always holds 'rgb'"):
        RenderResult(depth=np.zeros((2, 2), np.float32))


def test_the_paper_image_sides_are_written_in_one_place():
    """448 (the ego side) is a literal in at most two modules of the package: the sizes
    module and the benchmark protocol's identity string; docstrings do not count."""
    import ast

    import humanclaw_gym

    package = Path(humanclaw_gym.__file__).resolve().parent
    modules = set()
    for path in package.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        prose = {
            id(node.value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and id(node) not in prose:
                value = node.value
                if (type(value) is int and value == 448) or (
                    isinstance(value, str) and "448" in value
                ):
                    modules.add(str(path.relative_to(package)))
    assert modules == {"image_sizes.py", "server/protocol.py"}


def test_rgb_and_instance_contract(renderer):
    res = renderer.render(_box_camera(), {"instance"})
    assert isinstance(res, RenderResult)
    assert res.rgb.shape == (448, 448, 3) and res.rgb.dtype == np.uint8
    assert res.instance.shape == (448, 448) and res.instance.dtype == np.int32
    assert res.rgb.flags.writeable and res.rgb.flags.c_contiguous
    assert res.instance.flags.c_contiguous
    assert renderer.render(_box_camera()).instance is None
    assert set(np.unique(res.instance)) == {-1, 0, FLOOR_ID, WALL_ID, BOX_ID}


def _floor_points(camera: Camera, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """World points where the rays through pixel centres meet the floor's top (y = 0)."""
    from humanclaw_gym.render.transforms import projection_matrix

    inv = np.linalg.inv(projection_matrix(camera) @ view_matrix(camera))
    x = 2.0 * (cols + 0.5) / camera.width - 1.0
    y = 1.0 - 2.0 * (rows + 0.5) / camera.height
    ends = []
    for z in (-1.0, 1.0):
        clip = np.stack([x, y, np.full_like(x, z), np.ones_like(x)], axis=1) @ inv.T
        ends.append(clip[:, :3] / clip[:, 3:4])
    direction = ends[1] - ends[0]
    t = -ends[0][:, 1] / direction[:, 1]
    return ends[0] + t[:, None] * direction


def test_depth_is_metric_and_from_the_same_pass(renderer):
    cam = _box_camera()
    plain = renderer.render(cam, {"instance"})
    res = renderer.render(cam, {"instance", "depth"})
    assert plain.depth is None
    assert res.depth.shape == (448, 448) and res.depth.dtype == np.float32
    np.testing.assert_array_equal(res.rgb, plain.rgb)  # depth costs no second, different image
    np.testing.assert_array_equal(res.instance, plain.instance)
    # background: the far plane; everything drawn lies between the clip planes
    assert np.all(res.depth[res.instance == -1] == np.float32(cam.far_m))
    drawn = res.depth[res.instance >= 0]
    assert drawn.min() >= cam.near_m and drawn.max() < cam.far_m
    # floor pixels: the depth of the ray's floor hit along the viewing axis (the maths)
    rows, cols = np.nonzero(res.instance == FLOOR_ID)
    pick = np.linspace(0, len(rows) - 1, 200).astype(int)
    rows, cols = rows[pick], cols[pick]
    expected = project_points(cam, _floor_points(cam, rows, cols))[1]
    error = np.abs(res.depth[rows, cols] - expected)
    assert np.median(error) < 0.01 and error.max() < 0.05, (np.median(error), error.max())
    # the box stands in front of the wall behind it
    box, wall = res.depth[res.instance == BOX_ID], res.depth[res.instance == WALL_ID]
    assert box.max() < wall.min()


def test_box_is_red_at_its_projected_centre(renderer):
    cam = _box_camera()
    res = renderer.render(cam, {"instance"})
    row, col = _pixel(cam, BOX_POS)
    assert abs(row - 224) <= 1 and abs(col - 224) <= 1  # the camera looks at the box centre
    assert res.instance[row, col] == BOX_ID
    r, g, b = (int(v) for v in res.rgb[row, col])
    assert r > 110 and g < 60 and b < 60, (r, g, b)
    box_pixels = res.rgb[res.instance == BOX_ID].astype(int)
    assert np.all(box_pixels[:, 0] > 2 * box_pixels[:, 1])


def test_sky_top_rows_and_humanoid(renderer):
    cam = _box_camera()
    res = renderer.render(cam, {"instance"})
    assert np.all(res.instance[:5] == -1)  # row 0 is the top: sky above the wall
    assert np.all(res.instance[-5:] == FLOOR_ID)  # the floor fills the bottom rows
    sky = res.rgb[res.instance == -1]
    assert np.all(np.abs(sky.astype(int) - sky[0].astype(int)) <= 1)
    chest = standing_link_poses(*BODY_XZ)[JOINT_INDEX["spine2"], :3]
    row, col = _pixel(cam, chest)
    assert res.instance[row, col] == 0
    r, g, b = (int(v) for v in res.rgb[row, col])
    assert b > r and b > g  # the humanoid is blue


def test_non_square_image(renderer):
    cam = _box_camera(width=320, height=200)
    res = renderer.render(cam, {"instance"})
    assert res.rgb.shape == (200, 320, 3) and res.instance.shape == (200, 320)
    row, col = _pixel(cam, BOX_POS)
    assert res.instance[row, col] == BOX_ID


def test_moving_a_dynamic_object_moves_its_pixels(renderer):
    cam = _box_camera()
    before = renderer.render(cam, {"instance"}).instance
    try:
        renderer.set_object_poses([BOX_ID], _box_pose(-0.3, 2.4))
        after = renderer.render(cam, {"instance"}).instance
        old_row, old_col = _pixel(cam, BOX_POS)
        new_row, new_col = _pixel(cam, (-0.3, BOX_POS[1], 2.4))
        assert after[old_row, old_col] != BOX_ID
        assert after[new_row, new_col] == BOX_ID
        cols_before = np.nonzero(before == BOX_ID)[1].mean()
        cols_after = np.nonzero(after == BOX_ID)[1].mean()
        assert cols_after > cols_before + 30  # looking along +z, world -x is image right
    finally:
        renderer.set_object_poses([BOX_ID], _box_pose(BOX_POS[0], BOX_POS[2]))
    assert np.array_equal(renderer.render(cam, {"instance"}).instance, before)


def test_moving_the_body_moves_its_pixels(renderer):
    cam = _box_camera()
    try:
        renderer.set_body_pose(standing_link_poses(1.8, 3.2))
        res = renderer.render(cam, {"instance"})
        chest = standing_link_poses(1.8, 3.2)[JOINT_INDEX["spine2"], :3]
        assert res.instance[_pixel(cam, chest)] == 0
        old = standing_link_poses(*BODY_XZ)[JOINT_INDEX["spine2"], :3]
        assert res.instance[_pixel(cam, old)] != 0
    finally:
        renderer.set_body_pose(standing_link_poses(*BODY_XZ))


def test_rendering_is_deterministic(renderer):
    cam = _box_camera()
    a = renderer.render(cam, {"instance"})
    b = renderer.render(cam, {"instance"})
    assert np.array_equal(a.rgb, b.rgb)
    assert np.array_equal(a.instance, b.instance)
    assert np.array_equal(renderer.render(cam).rgb, a.rgb)  # same colours without ids


def test_bad_inputs_raise_clear_errors(renderer):
    with pytest.raises(ValueError, match="link_poses"):
        renderer.set_body_pose(np.zeros((23, 7)))
    with pytest.raises(ValueError, match="not a dynamic object"):
        renderer.set_object_poses([WALL_ID], _box_pose(0.0, 0.0))
    with pytest.raises(ValueError, match="poses must have shape"):
        renderer.set_object_poses([BOX_ID], np.zeros((2, 7)))
    with pytest.raises(ValueError, match="Camera.width"):
        renderer.render(Camera((0, 1, 0), (0, 0, 1), width=0))
    with pytest.raises(ValueError, match="parallel"):
        renderer.render(Camera((0, 1, 0), (0, 1, 0)))
    zero_quat = _box_pose(-0.3, 2.4)
    zero_quat[0, 3:7] = 0.0
    before = renderer.render(_box_camera(), {"instance"}).instance
    with pytest.raises(ValueError, match="zero-length quaternion"):
        renderer.set_object_poses([BOX_ID], zero_quat)
    assert np.array_equal(renderer.render(_box_camera(), {"instance"}).instance, before)
    renderer.set_object_poses([], np.zeros((0, 7)))  # nothing to move is fine


@pytest.mark.parametrize("name", ["moderngl", "tiny"])
def test_close_is_idempotent_and_final(name):
    r = _make(name)
    r.close()
    r.close()
    with pytest.raises(RuntimeError, match="closed"):
        r.build(_small_scene())


@pytest.mark.parametrize("name", ["moderngl", "tiny"])
def test_render_before_build_raises_and_rebuild_works(name):
    r = _make(name)
    try:
        with pytest.raises(RuntimeError, match="before build"):
            r.render(_box_camera())
        with pytest.raises(RuntimeError, match="before build"):
            r.set_body_pose(standing_link_poses())
        r.build(demo_scene())
        r.build(_small_scene())  # a second scene replaces the first
        res = r.render(_box_camera(), {"instance"})
        assert 0 not in res.instance  # the body is hidden until the next set_body_pose
        assert set(np.unique(res.instance)) == {-1, FLOOR_ID, WALL_ID, BOX_ID}
    finally:
        r.close()


def test_backends_agree(both_results):
    mgl, tiny = both_results["moderngl"].instance, both_results["tiny"].instance
    for oid in (BOX_ID, 0, -1, FLOOR_ID, WALL_ID):
        a, b = mgl == oid, tiny == oid
        iou = (a & b).sum() / (a | b).sum()
        assert iou > (0.8 if oid == 0 else 0.9), (oid, iou)


# --------------------------------------------------------------------------------------
# moderngl specifics
# --------------------------------------------------------------------------------------
def test_moderngl_leaves_no_mesa_thread_behind():
    """With the defaults llvmpipe rasterises in the calling thread and the shader cache
    writer is off, so a forked process can make its own context (no lost threads)."""
    code = (
        "import os\n"
        "from humanclaw_gym.render import ModernglRenderer\n"
        "r = ModernglRenderer()\n"
        "names = sorted(open(f'/proc/self/task/{t}/comm').read().strip()"
        " for t in os.listdir('/proc/self/task'))\n"
        "print(os.environ['LP_NUM_THREADS'], os.environ['MESA_SHADER_CACHE_DISABLE'], r.device)\n"
        "print(names)\n"
        "r.close()\n"
    )
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("LP_NUM_THREADS", "MESA_SHADER_CACHE_DISABLE")
    }
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env
    )
    if "RenderBackendUnavailable" in out.stderr:
        pytest.skip("moderngl renderer unavailable here")
    assert out.returncode == 0, out.stderr
    first, threads = out.stdout.splitlines()[:2]
    assert first.startswith("0 true")
    if "llvmpipe" in first:
        assert "llvmpipe" not in threads and "disk" not in threads, threads


def test_two_moderngl_renderers_in_one_process_do_not_interfere():
    a = _make("moderngl")
    b = ModernglRenderer()
    try:
        a.build(_small_scene())
        a.set_body_pose(standing_link_poses(*BODY_XZ))
        first = a.render(_box_camera(), {"instance"})
        b.build(demo_scene())
        b.render(_box_camera(), {"instance"})
        again = a.render(_box_camera(), {"instance"})
        assert np.array_equal(first.rgb, again.rgb)
        assert np.array_equal(first.instance, again.instance)
        b.close()
        a.set_body_pose(standing_link_poses(1.8, 3.2))  # a keeps working after b is gone
        assert (a.render(_box_camera(), {"instance"}).instance == 0).sum() > 500
    finally:
        a.close()
        b.close()


def test_moderngl_materials_are_patterned():
    r = _make("moderngl")
    try:
        r.build(_small_scene())
        cam = _box_camera()
        res = r.render(cam, {"instance"})
        floor = res.rgb[res.instance == FLOOR_ID].astype(float)
        assert floor[:, 0].std() > 5.0  # wood planks, not a flat colour
    finally:
        r.close()


def test_create_renderer_auto_tiny_and_fallback(monkeypatch):
    with pytest.raises(ValueError, match="renderer name"):
        create_renderer("opengl")
    tiny, reason = create_renderer("tiny")
    try:
        assert isinstance(tiny, TinyRenderer) and reason.startswith("tiny")
    finally:
        tiny.close()

    import humanclaw_gym.render as render_pkg

    class _NoEgl:
        def __init__(self, *args, **kwargs):
            raise RenderBackendUnavailable("no EGL here (test)")

    monkeypatch.setattr(render_pkg, "ModernglRenderer", _NoEgl)
    fallback, reason = create_renderer("auto")
    try:
        assert isinstance(fallback, TinyRenderer)
        assert "fallback" in reason and "no EGL here (test)" in reason
    finally:
        fallback.close()
    with pytest.raises(RenderBackendUnavailable, match="no EGL here"):
        create_renderer("moderngl")


def test_create_renderer_auto_prefers_moderngl():
    try:
        r, reason = create_renderer("auto")
    except RenderBackendUnavailable as exc:  # pragma: no cover - machine without GL
        pytest.skip(str(exc))
    try:
        expected = ModernglRenderer if reason.startswith("moderngl") else TinyRenderer
        assert isinstance(r, expected)
        if isinstance(r, TinyRenderer):
            assert "fallback" in reason
    finally:
        r.close()


def test_import_loads_no_gl_or_pybullet():
    code = (
        "import sys, humanclaw_gym.render;"
        "print('moderngl' in sys.modules, 'pybullet' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False False"


# --------------------------------------------------------------------------------------
# Cameras
# --------------------------------------------------------------------------------------
def test_ego_camera_sits_on_the_head_and_follows_it():
    poses = standing_link_poses(0.0, 0.0, 0.0)
    cam = ego_camera(poses)
    head = poses[JOINT_INDEX["head"], :3]
    assert np.allclose(cam.position, head + np.asarray(EYE_OFFSET_IN_HEAD_M))
    pitch = math.radians(cameras_mod.EGO_PITCH_DOWN_DEG)
    assert np.allclose(cam.forward, (0.0, -math.sin(pitch), math.cos(pitch)))
    assert (cam.width, cam.height) == (448, 448)
    moved_poses = standing_link_poses(1.0, 2.0, math.pi / 2)  # now facing +x
    moved = ego_camera(moved_poses)
    eye_offset_world = np.array([EYE_OFFSET_IN_HEAD_M[2], EYE_OFFSET_IN_HEAD_M[1], 0.0])
    assert np.allclose(moved.position, moved_poses[JOINT_INDEX["head"], :3] + eye_offset_world)
    assert np.allclose(moved.forward, (math.cos(pitch), -math.sin(pitch), 0.0), atol=1e-12)
    # tilting the head (a pose change of one link) turns the camera with it
    tilted = poses.copy()
    tilted[JOINT_INDEX["head"], 3:7] = (math.sin(0.25), 0.0, 0.0, math.cos(0.25))
    assert ego_camera(tilted).forward[1] < cam.forward[1] - 0.3


def test_ego_camera_sees_floor_and_furniture():
    scene = demo_scene()
    r = _make("moderngl")
    try:
        r.build(scene)
        poses = standing_link_poses(2.9, 1.3, -0.35)
        r.set_body_pose(poses)
        ids = r.render(ego_camera(poses), {"instance"}).instance
    finally:
        r.close()
    seen = {scene.object_by_id(int(i)).category for i in np.unique(ids) if i > 0}
    assert {"floor", "couch", "table", "chair"} <= seen
    assert 0 not in ids  # the eye is inside the head; the own body is not in view


def _rug_scene(flush: bool) -> tuple[SceneSpec, SceneObject]:
    """A floor and a rug from the generator's own builder, with its inner panel as built
    (``flush=False``) or moved flush with the border's top (the old z-fighting layout);
    plain colours (red border, green panel) so that every pixel names its face."""
    from dataclasses import replace

    from humanclaw_gym.scenes.furniture import _rug

    seed = next(s for s in range(100) if len(_rug(np.random.default_rng(s), 1.8, 1.2).parts) == 2)
    border, panel = _rug(np.random.default_rng(seed), 1.8, 1.2).parts
    border = replace(border, color=(0.8, 0.2, 0.2), material="plain")
    panel = replace(panel, color=(0.2, 0.7, 0.3), material="plain")
    if flush:
        top = border.offset[1] + border.size[1]
        panel = replace(panel, size=(panel.size[0], 0.0025, panel.size[2]),
                        offset=(0.0, top - 0.0025, 0.0))  # fmt: skip
    rug = SceneObject(2, "rug", "rug", (0.0, 0.0, 2.0), 0.2, (border, panel))
    floor = SceneObject(FLOOR_ID, "floor_0", "floor", (0.0, -0.05, 0.0), 0.0,
                        (Part("box", (4.0, 0.05, 4.0), color=(0.5, 0.4, 0.3)),))  # fmt: skip
    return SceneSpec("rug", (Room(0, "bedroom", (-4.0, -4.0), (4.0, 4.0)),), (floor, rug)), rug


def _border_pixels_on_panel(renderer, rug: SceneObject, poses: int = 12) -> int:
    """Pixels of the border's colour inside the panel (3 cm in from its edges), summed over
    a sweep of ego-like cameras 1.6 m up, 1.3-1.8 m from the rug, moving a few cm."""
    from PIL import Image, ImageDraw

    panel = rug.parts[1]
    c, s = math.cos(rug.yaw_rad), math.sin(rug.yaw_rad)
    rot = np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])
    top = panel.offset[1] + panel.size[1]
    hx, hz = panel.size[0] - 0.03, panel.size[2] - 0.03
    corners = np.array([[sx * hx, top, sz * hz] for sx, sz in ((-1, -1), (1, -1), (1, 1), (-1, 1))])
    corners = corners @ rot.T + np.asarray(rug.position)
    bad = 0
    for k in range(poses):
        eye = np.array([0.03 * k - 0.15, 1.55 + 0.004 * k, 0.2 + 0.02 * k])
        cam = Camera(position=tuple(eye), forward=tuple(np.array([0.02 * k, 0.0, 2.0]) - eye),
                     fov_y_deg=90.0, width=448, height=448)  # fmt: skip
        rgb = renderer.render(cam, {"rgb"})["rgb"].astype(int)
        mask = Image.new("L", (448, 448), 0)
        ImageDraw.Draw(mask).polygon([tuple(p) for p in project_points(cam, corners)[0]], fill=1)
        inside = np.asarray(mask).astype(bool)
        assert inside.sum() > 5000  # the panel fills a good part of the image
        px = rgb[inside]
        bad += int((px[:, 0] > px[:, 1]).sum())  # red border wins over the green panel
    return bad


@pytest.mark.parametrize("name", ["moderngl", "tiny"])
def test_rug_panel_is_one_colour_region_from_every_nearby_pose(name):
    """No z-fighting: the shipped rug's inner panel is drawn in its own colour only, from a
    sweep of nearby camera poses; the same panel moved flush with the border (the old
    layout) shows the border through it in stripes, so the check can see z-fighting."""
    r = _make(name)
    try:
        scene, rug = _rug_scene(flush=False)
        r.build(scene)
        assert _border_pixels_on_panel(r, rug) == 0
        scene, rug = _rug_scene(flush=True)
        r.build(scene)
        assert _border_pixels_on_panel(r, rug) > 1000
    finally:
        r.close()


@pytest.mark.parametrize("name", ["moderngl", "tiny"])
def test_exo_camera_cuts_away_walls_behind_the_body(name):
    scene = demo_scene()
    poses = standing_link_poses(2.9, 1.3, -0.35)  # the camera lands behind the south wall
    cam = exo_camera(poses)
    assert isinstance(cam, CutawayCamera) and cam.cutaway_plane is not None
    assert (cam.width, cam.height) == (512, 512) and cam.up == (0.0, 1.0, 0.0)
    assert cam.position[2] < 0.0
    r = _make(name)
    try:
        r.build(scene)
        r.set_body_pose(poses)
        ids = r.render(cam, {"instance"}).instance
        uncut = r.render(exo_camera(poses, cutaway=False), {"instance"}).instance
    finally:
        r.close()
    assert (ids == 0).sum() > 3000
    assert (uncut == 0).sum() == 0  # without the cutaway the south wall hides the body
    assert ids[_pixel(cam, poses[0, :3] + [0.0, 0.3, 0.0])] == 0
    floor_ids = {o.object_id for o in scene.objects if o.category == "floor"}
    assert np.isin(ids[-10:], list(floor_ids)).all()  # the floor is never cut


def test_cutaway_plane_is_validated():
    poses = standing_link_poses()
    cam = exo_camera(poses)
    normal = np.asarray(cam.cutaway_plane[:3])
    pelvis = poses[0, :3]
    assert np.isclose(np.linalg.norm(normal), 1.0) and normal[1] == 0.0
    assert np.dot(normal, pelvis) + cam.cutaway_plane[3] == pytest.approx(EXO_CUTAWAY_BEHIND_M)
    assert np.dot(normal, cam.position) + cam.cutaway_plane[3] < 0.0  # the camera side is cut
    bad = CutawayCamera((0, 1, 0), (0, 0, 1), cutaway_plane=(0.0, 0.0, 0.0, 1.0))
    with pytest.raises(ValueError, match="cutaway_plane"):
        validate_camera(bad)


def test_top_down_camera_covers_the_scene():
    scene = demo_scene()
    cam = top_down_camera(scene)
    lo, hi = scene.bounds()
    corners = np.array([[lo[0], 0.0, lo[2]], [hi[0], 0.0, hi[2]], [lo[0], 0.0, hi[2]]])
    px, depth = project_points(cam, corners)
    assert np.all(depth > 0) and np.all((px >= 0) & (px <= 512))
    # image right = world +x, image up = world -z
    assert px[1, 0] > px[0, 0] and px[2, 1] > px[0, 1]


def test_camera_argument_checks():
    with pytest.raises(ValueError, match="link_poses"):
        ego_camera(np.zeros((24, 6)))
    with pytest.raises(ValueError, match="fov_y_deg"):
        validate_camera(Camera((0, 0, 0), (0, 0, 1), fov_y_deg=180.0))
    with pytest.raises(ValueError, match="near_m"):
        validate_camera(Camera((0, 0, 0), (0, 0, 1), near_m=2.0, far_m=1.0))


# --------------------------------------------------------------------------------------
# Maths, meshes, textures, demo scene
# --------------------------------------------------------------------------------------
def test_quaternion_round_trip():
    rng = np.random.default_rng(0)
    q = rng.normal(size=(50, 4))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    q[q[:, 3] < 0] *= -1
    m = quat_xyzw_to_matrix(q)
    assert np.allclose(m @ np.swapaxes(m, 1, 2), np.eye(3), atol=1e-12)
    assert np.allclose(np.linalg.det(m), 1.0)
    assert np.allclose(matrix_to_quat_xyzw(m), q, atol=1e-9)
    pose = np.array([1.0, 2.0, 3.0, *q[0]])
    assert np.allclose(pose_to_matrix(pose)[:3, 3], (1, 2, 3))


def test_view_matrix_and_projection():
    cam = Camera(position=(1.0, 2.0, 3.0), forward=(0.0, 0.0, 1.0))
    v = view_matrix(cam)
    assert np.allclose(v @ [1.0, 2.0, 3.0, 1.0], (0, 0, 0, 1))
    assert np.allclose(v @ [1.0, 2.0, 5.0, 1.0], (0, 0, -2, 1))  # ahead = eye -Z
    px, depth = project_points(cam, [[1.0, 2.0, 5.0], [1.0, 3.0, 4.0], [2.0, 2.0, 4.0]])
    assert np.allclose(px[0], (224, 224)) and np.isclose(depth[0], 2.0)
    assert np.allclose(px[1], (224, 0))  # 45 degrees up with a 90 degree fov: top edge
    assert np.isclose(px[2, 0], 0.0)  # +x world is image left when looking along +z


@pytest.mark.parametrize("kind", MESH_KINDS)
def test_unit_meshes_are_closed_and_outward(kind):
    vertices, indices = unit_mesh(kind)
    p = vertices[:, :3].astype(float)
    tri = p[indices.reshape(-1, 3)]
    volume = np.einsum("ij,ij->i", tri[:, 0], np.cross(tri[:, 1], tri[:, 2])).sum() / 6.0
    expected = {"box": 8.0, "cylinder": 2.0 * math.pi, "sphere": 4.0 / 3.0 * math.pi}[kind]
    assert volume == pytest.approx(expected, rel=0.05)  # positive: counter-clockwise outside
    assert np.allclose(np.linalg.norm(vertices[:, 3:], axis=1), 1.0, atol=1e-6)


def test_material_layers_cover_every_material():
    assert set(MATERIAL_LAYERS) == set(MATERIAL_NAMES)
    layers = pattern_layers()
    assert layers.images.dtype == np.uint8 and layers.images.shape[1:] == (256, 256)
    means = layers.images.reshape(len(layers.names), -1).mean(axis=1) / 127.5
    assert np.all(np.abs(means - 1.0) < 0.15)  # patterns keep the part colour on average
    assert layers.layers_of("WOOD") != layers.layers_of("tile")
    assert layers.layers_of("unknown material") == (-1, -1)
    assert np.array_equal(layers.images, pattern_layers().images)


def test_demo_scene_and_benchmark():
    scene = demo_scene()
    assert 80 <= sum(len(o.parts) for o in scene.objects) <= 120
    assert len(scene.dynamic_objects) == 9
    assert {"couch", "bed", "chair", "tv", "potted_plant"} <= {o.category for o in scene.objects}
    r = TinyRenderer()
    try:
        ms = benchmark(r, scene, standing_link_poses(2.9, 1.3), frames=1, size=64)
    finally:
        r.close()
    assert ms > 0.0


def test_auto_falls_back_to_tiny_without_an_egl_device():
    """With no EGL vendor library libglvnd finds no device: moderngl must raise
    RenderBackendUnavailable naming the missing piece, and "auto" must fall back."""
    code = (
        "from humanclaw_gym.render import create_renderer, ModernglRenderer, RenderBackendUnavailable\n"
        "r, why = create_renderer('auto')\n"
        "print(type(r).__name__)\n"
        "print(why)\n"
        "r.close()\n"
        "try:\n"
        "    ModernglRenderer()\n"
        "except RenderBackendUnavailable as exc:\n"
        "    print('unavailable:', exc)\n"
    )
    env = dict(os.environ, __EGL_VENDOR_LIBRARY_FILENAMES="/nonexistent/egl_vendor.json")
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    lines = [ln for ln in out.stdout.splitlines() if not ln.startswith("pybullet build time")]
    assert lines[0] == "TinyRenderer"
    assert lines[1].startswith("tiny: fallback because moderngl is unavailable")
    assert lines[2].startswith("unavailable:") and "libEGL" in lines[2]


def test_missing_moderngl_package_is_reported(monkeypatch):
    monkeypatch.setitem(sys.modules, "moderngl", None)  # makes `import moderngl` fail
    with pytest.raises(RenderBackendUnavailable, match="humanclaw-gym\\[render\\]"):
        ModernglRenderer()


def _inside_shape(shape, origin: np.ndarray, rot: np.ndarray, point: np.ndarray) -> bool:
    """Whether a world point lies inside one link shape placed at a link frame."""
    local = rot.T @ (point - origin) - np.asarray(shape.offset_m)
    local = quat_xyzw_to_matrix(np.asarray(shape.quat_xyzw)).T @ local
    if shape.kind == "sphere":
        return float(np.linalg.norm(local)) <= shape.radius
    if shape.kind == "capsule":
        z = float(np.clip(local[2], -shape.half_length, shape.half_length))
        return float(np.linalg.norm(local - np.array([0.0, 0.0, z]))) <= shape.radius
    return bool(np.all(np.abs(local) <= np.asarray(shape.half_extents)))


def test_drawn_torso_is_continuous_with_the_pelvis():
    """Standing and seated, every point of the line from the pelvis capsule's centre up to
    the chest joint lies inside the drawn body; the physics shapes alone leave a gap there
    (which the drawn waist closes)."""
    from humanclaw_gym.body.skeleton import forward_kinematics, link_shapes
    from humanclaw_gym.motion.procedural import ProceduralMotionGenerator
    from humanclaw_gym.render.body_shapes import drawn_link_shapes

    gen = ProceduralMotionGenerator()
    standing = gen.reset(np.zeros(3), 0.3)[-1]
    seated = gen.generate("Sit down<0.5>")[-1]
    pelvis_centre = np.asarray(link_shapes()[0].offset_m)
    for frame in (standing, seated):
        pos, rot = forward_kinematics(frame)
        a = pos[0] + rot[0] @ pelvis_centre
        b = pos[JOINT_INDEX["spine3"]]
        line = a + np.linspace(0.0, 1.0, 60)[:, None] * (b - a)

        def covered(shapes, line=line, pos=pos, rot=rot):
            return [
                any(_inside_shape(s, pos[s.joint], rot[s.joint], p) for s in shapes) for p in line
            ]

        assert all(covered(drawn_link_shapes()))
        assert not all(covered(link_shapes()))


def _seated_link_poses(x: float, z: float, yaw: float, seat: float = 0.45) -> np.ndarray:
    """Link poses of the procedural body seated on a ``seat`` m high seat (its pelvis at
    x/z after the sit-back, facing ``yaw``)."""
    from humanclaw_gym.motion.procedural import ProceduralMotionGenerator, sit_back_distance
    from humanclaw_gym.replay.render import link_poses_from_frames

    back = sit_back_distance(seat)
    start = np.array([x + back * math.sin(yaw), 0.0, z + back * math.cos(yaw)])
    gen = ProceduralMotionGenerator()
    gen.reset(start, yaw)
    return link_poses_from_frames(gen.generate(f"Sit down<{seat}>")[-1])


def _room(*extra: SceneObject) -> SceneSpec:
    floor = SceneObject(FLOOR_ID, "floor_0", "floor", (0.0, -0.05, 0.0), 0.0,
                        (Part("box", (6.0, 0.05, 6.0), color=(0.6, 0.45, 0.3)),))  # fmt: skip
    return SceneSpec("room", (Room(0, "bedroom", (-6.0, -6.0), (6.0, 6.0)),), (floor, *extra))


def _wall(oid: int, x: float, z: float, along_x: bool) -> SceneObject:
    size = (3.0, 1.25, 0.05) if along_x else (0.05, 1.25, 3.0)
    return SceneObject(oid, f"wall_{oid}", "wall", (x, 1.25, z), 0.0, (Part("box", size),))


def test_exo_camera_turns_to_the_side_of_a_seated_body():
    """Standing: behind the body. Seated: a quarter turn to its side (the left one without a
    scene), same distance and height; the share follows the hips' flexion."""
    from humanclaw_gym.render.cameras import seated_share

    yaw = 0.4
    heading = np.array([math.sin(yaw), 0.0, math.cos(yaw)])
    left = np.array([math.cos(yaw), 0.0, -math.sin(yaw)])
    standing = standing_link_poses(0.0, 0.0, yaw)
    seated = _seated_link_poses(0.0, 0.0, yaw)
    assert seated_share(standing) == 0.0 and seated_share(seated) == pytest.approx(1.0)
    for poses, expect in ((standing, -heading), (seated, left)):
        cam = exo_camera(poses)
        away = np.asarray(cam.position) - poses[0, :3]
        flat = np.array([away[0], 0.0, away[2]])
        assert np.linalg.norm(flat) == pytest.approx(cameras_mod.EXO_BEHIND_M)
        assert flat / np.linalg.norm(flat) == pytest.approx(expect, abs=1e-6)
        assert away[1] == pytest.approx(cameras_mod.EXO_HEIGHT_ABOVE_PELVIS_M)
        normal = np.asarray(cam.cutaway_plane[:3])
        assert normal @ cam.position + cam.cutaway_plane[3] < 0.0  # the camera side is cut
        assert normal @ poses[0, :3] + cam.cutaway_plane[3] == pytest.approx(EXO_CUTAWAY_BEHIND_M)


def test_exo_camera_avoids_walls():
    """With the scene, a wall 1.2 m to the seated body's left sends the camera to its right;
    walls close on both sides bring it in (never nearer than EXO_MIN_DISTANCE_M), and it
    stays on the room's side of the wall behind a standing body."""
    seated = _seated_link_poses(0.0, 0.0, 0.0)  # faces +Z: left is +X
    cam = exo_camera(seated, scene=_room(_wall(5, 1.2, 0.0, along_x=False)))
    assert cam.position[0] < -1.5  # the right side, at full distance
    both = _room(_wall(5, 1.2, 0.0, along_x=False), _wall(6, -1.5, 0.0, along_x=False))
    cam = exo_camera(seated, scene=both)
    assert -1.5 < cam.position[0] < 1.2  # between the walls ...
    assert abs(cam.position[0]) >= cameras_mod.EXO_MIN_DISTANCE_M - 1e-9  # ... not too near
    standing = standing_link_poses(0.0, 0.0, 0.0)
    cam = exo_camera(standing, scene=_room(_wall(5, 0.0, -1.6, along_x=True)))
    assert -1.6 < cam.position[2] <= -cameras_mod.EXO_MIN_DISTANCE_M
    cam = exo_camera(standing, scene=_room())  # nothing in the way: full distance
    assert cam.position[2] == pytest.approx(-cameras_mod.EXO_BEHIND_M)


@pytest.mark.parametrize("name", ["moderngl", "tiny"])
def test_cutaway_keeps_the_seat_and_cuts_furniture_whole(name):
    """A seated body seen from its side: the bed it sits on reaches across the cut plane
    and stays whole; a cabinet whose centre is on the camera's side of the plane is removed
    whole; one whose centre is beyond it, though it reaches onto the camera's side, is drawn
    whole (no slivers)."""
    seated = _seated_link_poses(0.0, 0.0, 0.0)
    cam = exo_camera(seated)  # left side: the camera at +X, the cut plane at x = 0.45
    bed = SceneObject(7, "bed", "bed", (0.3, 0.0, -1.3), 0.0,
                      (Part("box", (1.0, 0.225, 1.1), (0.0, 0.225, 0.0), (0.2, 0.3, 0.8)),))  # fmt: skip
    gone = SceneObject(8, "cab_a", "cabinet", (1.0, 0.0, 0.9), 0.0,
                       (Part("box", (0.3, 0.4, 0.2), (0.0, 0.4, 0.0), (0.8, 0.2, 0.2)),))  # fmt: skip
    kept = SceneObject(9, "cab_b", "cabinet", (0.2, 0.0, 0.9), 0.0,
                       (Part("box", (0.5, 0.4, 0.2), (0.0, 0.4, 0.0), (0.2, 0.8, 0.2)),))  # fmt: skip
    scene = _room(bed, gone, kept)
    r = _make(name)
    try:
        r.build(scene)
        r.set_body_pose(seated)
        ids = r.render(cam, {"instance"}).instance
        plain = r.render(exo_camera(seated, cutaway=False), {"instance"}).instance
    finally:
        r.close()
    assert (plain == 8).sum() > 500 and (ids == 8).sum() == 0  # removed whole
    assert (ids == 7).sum() == pytest.approx((plain == 7).sum(), rel=0.02)  # the seat stays
    assert (plain == 9).sum() > 500  # beyond the plane (x < 0.45), reaching to x = 0.7:
    for corner in ((0.66, 0.79, 0.75), (0.66, 0.79, 1.05)):  # its part on the cut side stays
        assert ids[_pixel(cam, corner)] == 9
    assert (ids == 0).sum() > 3000
