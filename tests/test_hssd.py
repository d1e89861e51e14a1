"""Habitat scene datasets (HSSD layout) on our backends, with a synthetic dataset.

The dataset is written into the test's tmp dir by
:func:`humanclaw_gym.scenes.hssd.synthetic.write_synthetic_dataset` (trimesh): two rooms and
a doorway, an upper floor reached by stairs, chairs, a couch (non-uniform scale, rotated
quaternion, textured), a TV, a textured plant, a toilet, a bed upstairs and a dynamic box,
plus reference-format episodes. Covers parsing (quaternion order, scale, translation
origin, motion type), placement in the renders, collision meshes, the mesh cache, texture
fallbacks, per-floor navigation, goal matching, spawn conversion, every error path (each
names its file), the oracle on every episode (slow), ``humanclaw run`` and ``humanclaw
serve`` with ``--scene-dataset``, and the doctor.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import math
import os
import secrets
import shutil
import signal
import struct
import subprocess
import sys
import time
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import humanclaw_gym  # noqa: F401 - registers the env
from humanclaw_gym.scenes.hssd import SceneDatasetError, open_scene_dataset
from humanclaw_gym.scenes.hssd.configs import read_scene_instance
from humanclaw_gym.scenes.hssd.synthetic import SCENE_ID, write_synthetic_dataset

pytest.importorskip("trimesh")

ENV_ID = "HumanClawFindNavInteract-v0"


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory):
    base = tmp_path_factory.mktemp("hssd")
    old = os.environ.get("HUMANCLAW_CACHE_DIR")
    os.environ["HUMANCLAW_CACHE_DIR"] = str(base / "cache")
    try:
        yield write_synthetic_dataset(base / "humanclaw-hssd-synth")
    finally:
        if old is None:
            os.environ.pop("HUMANCLAW_CACHE_DIR", None)
        else:
            os.environ["HUMANCLAW_CACHE_DIR"] = old


def _copy(synth, tmp_path: Path) -> Path:
    root = tmp_path / "copy"
    shutil.copytree(synth.root, root)
    return root


def _env(dataset: Path | str, episodes: Path | str | None = None, **kwargs):
    eps = episodes if episodes is not None else Path(dataset) / "episodes" / "val" / "content"
    return gym.make(ENV_ID, scene_dataset=str(dataset), episodes=str(eps), **kwargs)


def _record(synth, asset: str, k: int = 0) -> dict:
    return [r for r in synth.objects if r["asset"] == asset][k]


# --------------------------------------------------------------------------------------
# parsing into the scene spec
# --------------------------------------------------------------------------------------
def test_scene_instance_parsing_uses_habitat_quaternion_order_and_scales(synth) -> None:
    inst = read_scene_instance(synth.root / "scenes" / f"{SCENE_ID}.scene_instance.json")
    couch = inst.objects[_record(synth, "couch")["index"]]
    s = math.sqrt(0.5)
    # file: [w, x, y, z] = [s, 0, -s, 0] -> ours (x, y, z, w)
    assert np.allclose(couch.rotation_xyzw, (0.0, -s, 0.0, s))
    assert couch.scale == (1.2, 1.0, 0.9)
    assert couch.translation_origin == "asset_local"
    motions = {o.template.rsplit("_", 1)[-1]: o.motion_type for o in inst.objects}
    assert motions["crate"] == "DYNAMIC" and motions["bed"] == "STATIC"

    scene = open_scene_dataset(synth.root).load_scene(SCENE_ID)
    obj = scene.object_by_id(couch.index + 2)
    lo, hi = obj.aabb()
    # the couch asset is 2.0 x 0.85 x 0.9 m, front -Z; scaled (1.2, 1, 0.9) and turned by
    # -90 degrees about +Y it spans x 0.145..0.955 and z 1.8..4.2 around (0.55, 0, 3.0)
    assert np.allclose(lo, (0.55 - 0.405, 0.0, 1.8), atol=1e-6)
    assert np.allclose(hi, (0.55 + 0.405, 0.85, 4.2), atol=1e-6)
    assert obj.category == "couch"  # lexicon "sofa" -> couch
    assert np.allclose(obj.front_direction(), (1.0, 0.0, 0.0), atol=1e-9)  # faces the room
    crate = scene.object_by_id(_record(synth, "crate")["index"] + 2)
    assert crate.dynamic and crate.mass_kg == 2.0
    assert scene.object_by_id(1).category == "stage"
    assert scene.metadata["floor_levels_m"] == pytest.approx([0.0, 3.0], abs=1e-6)
    for rec in synth.objects:  # every placement matches the writer's own transform
        o = scene.object_by_id(rec["index"] + 2)
        centre = 0.5 * (o.aabb()[0] + o.aabb()[1])
        assert np.allclose(centre, rec["center"], atol=1e-5), rec["template"]


def test_translation_origin_com_centres_the_mesh_on_the_translation(synth, tmp_path) -> None:
    root = _copy(synth, tmp_path)
    path = root / "scenes" / f"{SCENE_ID}.scene_instance.json"
    doc = json.loads(path.read_text())
    doc["translation_origin"] = "COM"
    path.write_text(json.dumps(doc))
    scene = open_scene_dataset(root).load_scene(SCENE_ID)
    for rec in synth.objects:
        o = scene.object_by_id(rec["index"] + 2)
        centre = 0.5 * (o.aabb()[0] + o.aabb()[1])
        assert np.allclose(centre, rec["translation"], atol=1e-5), rec["template"]


def test_scene_spec_with_mesh_parts_round_trips_through_json(synth) -> None:
    from humanclaw_gym.scenes.spec import SceneSpec

    scene = open_scene_dataset(synth.root).load_scene(SCENE_ID)
    again = SceneSpec.from_json(scene.to_json())
    assert again == scene and again.content_hash() == scene.content_hash()
    part = again.objects[2].parts[0]
    assert part.shape == "mesh" and part.mesh.collision_asset.endswith(".collider.glb")


def test_seat_heights_are_measured_on_the_collision_meshes(synth) -> None:
    scene = open_scene_dataset(synth.root).load_scene(SCENE_ID)
    seats = {o.name.rsplit("_", 1)[0]: o.seat_height_m for o in scene.objects if o.position[1] < 1}
    assert seats["chair"] == pytest.approx(0.47, abs=0.021)
    assert seats["couch"] == pytest.approx(0.42, abs=0.021)
    assert seats["toilet"] == pytest.approx(0.40, abs=0.021)
    bed = scene.object_by_id(_record(synth, "bed")["index"] + 2)
    assert bed.seat_height_m == pytest.approx(3.0 + 0.52, abs=0.021)  # the mattress, upstairs


# --------------------------------------------------------------------------------------
# meshes: cache and texture fallbacks
# --------------------------------------------------------------------------------------
def test_mesh_cache_is_keyed_by_the_asset_sha256(synth, tmp_path, monkeypatch) -> None:
    import hashlib

    from humanclaw_gym.scenes import meshes

    monkeypatch.setenv("HUMANCLAW_CACHE_DIR", str(tmp_path / "cache"))
    src = synth.root / "objects" / "humanclaw" / "chair.glb"
    path = tmp_path / "asset.glb"
    shutil.copy(src, path)
    meshes.clear_memory_cache()  # the scene loaded this very asset already
    first = meshes.load_mesh(path)
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    entry = list((tmp_path / "cache" / "meshes").rglob("*.npz"))
    assert [p.name.split("-")[0] for p in entry] == [sha]
    meshes.clear_memory_cache()

    def refuse(*args, **kwargs):
        raise AssertionError("parsed again")

    monkeypatch.setattr(meshes, "_parse_glb", refuse)
    again = meshes.load_mesh(path)  # from the disk cache, no parsing
    assert again.sha256 == first.sha256 and again.num_triangles == first.num_triangles
    assert np.array_equal(again.triangles()[0], first.triangles()[0])
    shutil.copy(synth.root / "objects" / "humanclaw" / "bed.glb", path)  # new bytes
    meshes.clear_memory_cache()
    with pytest.raises(AssertionError, match="parsed again"):
        meshes.load_mesh(path)
    assert meshes.cache_size_bytes()[0] == 1


def _glb_parts(data: bytes) -> tuple[dict, bytes]:
    length = struct.unpack("<I", data[12:16])[0]
    return json.loads(data[20 : 20 + length]), data[20 + length :]


def _glb(doc: dict, rest: bytes) -> bytes:
    text = json.dumps(doc).encode()
    text += b" " * ((4 - len(text) % 4) % 4)
    body = struct.pack("<II", len(text), 0x4E4F534A) + text + rest
    return b"glTF" + struct.pack("<II", 2, 12 + len(body)) + body


def test_undecodable_texture_draws_the_material_colour_with_one_warning(synth, tmp_path) -> None:
    from humanclaw_gym.scenes import meshes

    data = (synth.root / "objects" / "humanclaw" / "couch.glb").read_bytes()
    doc, rest = _glb_parts(data)
    doc["images"][0]["mimeType"] = "image/ktx2"
    view = doc["bufferViews"][doc["images"][0]["bufferView"]]
    start = 8 + int(view.get("byteOffset", 0))  # past the BIN chunk header
    garbage = b"\xabKTX 20\xbb" + bytes(int(view["byteLength"]) - 8)
    rest = rest[:start] + garbage + rest[start + len(garbage) :]
    path = tmp_path / "ktx.glb"
    path.write_bytes(_glb(doc, rest))
    with pytest.warns(meshes.MeshTextureWarning, match="ktx.glb.*cannot be decoded"):
        asset = meshes.load_mesh(path)
    assert all(p.texture is None for p in asset.primitives)
    assert np.allclose(asset.primitives[0].colors, 1.0)  # factor 1: white, not the texture
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        meshes.load_mesh(path)  # one warning per asset and process, not per load


def test_a_mesh_changed_after_the_scene_was_loaded_is_reported(synth, tmp_path) -> None:
    from humanclaw_gym.physics.pybullet_backend import PybulletHalfPhysics
    from humanclaw_gym.scenes import meshes

    root = _copy(synth, tmp_path)
    scene = open_scene_dataset(root).load_scene(SCENE_ID)
    objdir = root / "objects" / "humanclaw"
    shutil.copy(objdir / "bed.collider.glb", objdir / "tv.collider.glb")  # what physics reads
    meshes.clear_memory_cache()
    physics = PybulletHalfPhysics()
    try:
        with pytest.raises(
            meshes.MeshAssetError, match=r"tv\.collider\.glb changed since its scene was loaded"
        ):
            physics.build(scene)
    finally:
        physics.close()


def test_compressed_geometry_and_garbage_files_are_refused_naming_the_file(synth, tmp_path) -> None:
    from humanclaw_gym.scenes import meshes

    doc, rest = _glb_parts((synth.root / "objects" / "humanclaw" / "chair.glb").read_bytes())
    doc["extensionsRequired"] = ["KHR_draco_mesh_compression"]
    path = tmp_path / "draco.glb"
    path.write_bytes(_glb(doc, rest))
    with pytest.raises(meshes.MeshAssetError, match=r"draco\.glb.*KHR_draco_mesh_compression"):
        meshes.load_mesh(path)
    junk = tmp_path / "junk.glb"
    junk.write_bytes(b"not a mesh at all")
    with pytest.raises(meshes.MeshAssetError, match=r"junk\.glb.*not a binary glTF"):
        meshes.load_mesh(junk, referrer="x.object_config.json")


# --------------------------------------------------------------------------------------
# rendering
# --------------------------------------------------------------------------------------
def _project(camera, point: np.ndarray) -> tuple[int, int]:
    from humanclaw_gym.render.transforms import projection_matrix, view_matrix

    clip = projection_matrix(camera) @ view_matrix(camera) @ np.append(point, 1.0)
    ndc = clip[:3] / clip[3]
    col = int((ndc[0] * 0.5 + 0.5) * camera.width)
    row = int((1.0 - (ndc[1] * 0.5 + 0.5)) * camera.height)
    return row, col


def _facing(env, episode, x: float, z: float, target: np.ndarray):
    yaw = math.atan2(target[0] - x, target[2] - z)
    ep = dataclasses.replace(
        episode,
        start_position=(x, 0.0, z),
        start_yaw_rad=yaw,
        start_rotation=(0.0, math.sin(yaw / 2), 0.0, math.cos(yaw / 2)),
    )
    env.unwrapped.task.order = type(env.unwrapped.task.order)([ep], 1, None)
    env.reset(seed=0)
    return env.unwrapped.simulation


@pytest.mark.parametrize("renderer", ["moderngl", "tiny"])
def test_renders_objects_where_the_instance_json_puts_them(synth, renderer) -> None:
    from humanclaw_gym.render.cameras import ego_camera

    env = _env(synth.root, renderer=renderer)
    try:
        episode = env.unwrapped.episodes[0]
        chair = _record(synth, "chair", 0)
        couch = _record(synth, "couch")
        for rec, want_red in ((chair, True), (couch, False)):
            centre = np.asarray(rec["center"])
            sim = _facing(env, episode, 3.0, 3.2, centre)
            res = sim.render("ego", 448, ("rgb", "instance"))
            cam = ego_camera(sim.physics.link_poses(), width=448, height=448)
            row, col = _project(cam, centre)
            assert 0 <= row < 448 and 0 <= col < 448
            assert res.instance[row, col] == rec["index"] + 2, rec["template"]
            r, g, b = (int(v) for v in res.rgb[row, col])
            if want_red:  # the chair is pure red (untextured material colour)
                assert r > 110 and g < 50 and b < 50, (r, g, b)
            else:  # the couch is green fabric (textured; TinyRenderer: its mean colour)
                assert g > r and g > b, (r, g, b)
    finally:
        env.close()


def test_texture_orientation_in_the_moderngl_renderer(tmp_path) -> None:
    """A quad whose texture is red on top and blue below shows red above blue."""
    import trimesh
    from PIL import Image

    from humanclaw_gym.backends.protocols import Camera
    from humanclaw_gym.render.moderngl_backend import ModernglRenderer
    from humanclaw_gym.scenes.spec import MeshRef, Part, SceneObject, SceneSpec

    img = np.zeros((8, 8, 3), np.uint8)
    img[:4] = (255, 0, 0)
    img[4:] = (0, 0, 255)
    quad = trimesh.Trimesh(
        vertices=[[-1, 0, 0], [1, 0, 0], [1, 2, 0], [-1, 2, 0]],
        faces=[[0, 1, 2], [0, 2, 3]],
        process=False,
    )
    quad.visual = trimesh.visual.TextureVisuals(
        uv=[[0, 0], [1, 0], [1, 1], [0, 1]],  # OpenGL convention: v = 1 is the image top
        material=trimesh.visual.material.PBRMaterial(baseColorTexture=Image.fromarray(img)),
    )
    path = tmp_path / "quad.glb"
    path.write_bytes(trimesh.Scene(quad).export(file_type="glb"))
    part = Part(
        shape="mesh",
        size=(1.0, 1.0, 0.0),
        offset=(0.0, 1.0, 0.0),
        material="mesh",
        mesh=MeshRef(asset=str(path)),
    )
    scene = SceneSpec("quad", (), (SceneObject(1, "quad", "object", (0, 0, 0), 0.0, (part,)),))
    with ModernglRenderer() as r:
        r.build(scene)
        cam = Camera(position=(0.0, 1.0, 3.0), forward=(0.0, 0.0, -1.0), width=64, height=64)
        rgb = r.render(cam).rgb
    top, bottom = rgb[24, 32].astype(int), rgb[40, 32].astype(int)
    assert top[0] > 2 * top[2] and bottom[2] > 2 * bottom[0], (top, bottom)


# --------------------------------------------------------------------------------------
# physics and navigation
# --------------------------------------------------------------------------------------
def test_collision_meshes_support_the_body_and_the_dynamic_box(synth) -> None:
    from humanclaw_gym.physics.pybullet_backend import PybulletHalfPhysics

    scene = open_scene_dataset(synth.root).load_scene(SCENE_ID)
    physics = PybulletHalfPhysics()
    try:
        physics.build(scene)
        assert physics.ray_cast_down(7.0, 2.5, 5.0, -1.0) == pytest.approx(3.0, abs=1e-4)
        assert physics.ray_cast_down(2.0, 2.5, 2.0, -1.0) == pytest.approx(0.0, abs=1e-4)
        # the couch seat (non-uniformly scaled collider) and a stair tread
        assert physics.ray_cast_down(0.7, 3.0, 2.0, -1.0) == pytest.approx(0.42, abs=1e-3)
        assert physics.ray_cast_down(6.07, 5.5, 2.0, -1.0) == pytest.approx(0.15, abs=1e-3)
        from humanclaw_gym.motion.procedural import ProceduralMotionGenerator

        motion = ProceduralMotionGenerator()
        history = motion.reset(np.array([6.5, 3.0, 3.5]), 0.0, seed=0)
        physics.reset(history[-1])
        crate_id = _record(synth, "crate")["index"] + 2
        assert physics.dynamic_object_ids == (crate_id,)
        placed = physics.object_poses()[0].copy()
        for _ in range(5):
            physics.step_frame(history[-1])
        settled = physics.object_poses()[0].copy()
        for _ in range(25):  # one second of standing upstairs in all
            physics.step_frame(history[-1])
        after = physics.object_poses()[0]
        # the hull and the floor mesh each collide with Bullet's 1 cm margin: the box,
        # authored 1 cm above the floor, settles 1 cm higher and then stays there
        assert settled[1] - placed[1] == pytest.approx(0.01, abs=2e-3)
        assert np.allclose(settled[[0, 2]], placed[[0, 2]], atol=1e-3)
        assert np.allclose(after[:3], settled[:3], atol=1e-3)
        pelvis_y = physics.realized_frame()[1]
        assert 3.0 + 0.8 < pelvis_y < 3.0 + 1.1  # standing on the upper floor
    finally:
        physics.close()


def test_large_static_meshes_are_split_for_pybullet(tmp_path) -> None:
    """A 327,680-triangle mesh (over pybullet's per-shape limit) collides whole."""
    import trimesh

    from humanclaw_gym.physics.pybullet_backend import _MESH_CHUNK_FACES, PybulletHalfPhysics
    from humanclaw_gym.scenes.spec import MeshRef, Part, SceneObject, SceneSpec

    dome = trimesh.creation.icosphere(subdivisions=7, radius=1.0)
    assert len(dome.faces) > 5 * _MESH_CHUNK_FACES
    path = tmp_path / "dome.glb"
    path.write_bytes(trimesh.Scene(dome).export(file_type="glb"))
    part = Part(
        shape="mesh",
        size=(1.0, 1.0, 1.0),
        offset=(0.0, 0.0, 0.0),
        mesh=MeshRef(asset=str(path), scale=(2.0, 1.0, 1.0)),
    )
    scene = SceneSpec(
        "dome", (), (SceneObject(1, "dome", "object", (0.0, 0.0, 0.0), 0.0, (part,)),)
    )
    physics = PybulletHalfPhysics()
    try:
        physics.build(scene)
        for x, z in ((0.0, 0.0), (1.5, 0.0), (-1.2, 0.3), (0.3, -0.8)):
            top = math.sqrt(max(0.0, 1.0 - (x / 2.0) ** 2 - z**2))
            assert physics.ray_cast_down(x, z, 3.0, -3.0) == pytest.approx(top, abs=2e-3), (x, z)
    finally:
        physics.close()


def test_navigation_grid_per_floor(synth) -> None:
    from humanclaw_gym.scenes.meshgrid import navigation_grid

    scene = open_scene_dataset(synth.root).load_scene(SCENE_ID)
    ground = navigation_grid(scene, 0.0)
    upper = navigation_grid(scene, 3.05)  # the nearest level: 3.0
    assert upper.floor_y == pytest.approx(3.0)
    assert ground.is_free(2.5, 2.6) and ground.is_free(7.6, 2.2)
    assert not ground.is_free(7.5, 5.5)  # the stairs
    assert not ground.is_free(5.0, 1.0)  # the interior wall
    toilet = _record(synth, "toilet")["index"] + 2  # east room, behind the wall from z = 1
    region = ground.goal_region([toilet])
    straight = min(
        math.hypot(x - 2.5, z - 1.0) for z, x in ground.cells_to_xz(np.argwhere(region))[:, ::-1]
    )
    d = ground.geodesic_distance((2.5, 1.0), region)
    assert straight + 0.5 < d < straight + 3.0  # around the wall, through the doorway
    # the TV stands against the interior wall: free cells behind the wall are within reach
    # of its box in x/z, but an approach point is never behind a wall
    tv = _record(synth, "tv")["index"] + 2
    tv_cells = ground.cells_to_xz(np.argwhere(ground.goal_region(tv, radius_m=0.8)))
    assert len(tv_cells) and tv_cells[:, 0].max() < 4.95
    near_behind = ground.free & (ground.aabb_distance_map(tv) <= 0.8)
    assert ground.cells_to_xz(np.argwhere(near_behind))[:, 0].max() > 5.05  # they exist
    assert upper.is_free(6.2, 3.9) and not upper.is_free(2.5, 2.6)  # no floor above room A
    assert not upper.is_free(7.5, 5.5)  # the stairwell
    bed = _record(synth, "bed")["index"] + 2
    assert math.isfinite(upper.geodesic_distance((6.2, 3.9), upper.goal_region([bed])))


def test_reference_episodes_spawn_and_goals(synth) -> None:
    from humanclaw_gym.episodes import load_split
    from humanclaw_gym.episodes.resolve import resolve_episode

    episodes = {e.episode_id: e for e in load_split(synth.episodes_dir)}
    assert len(episodes) == 8
    raw = json.loads(gzip.decompress((synth.episodes_dir / f"{SCENE_ID}.json.gz").read_bytes()))
    for item in raw["episodes"]:
        ep = episodes[f"{SCENE_ID}_{item['episode_id']}"]
        assert ep.start_position[0] == pytest.approx(-item["init_offset"][0])
        assert ep.start_position[2] == pytest.approx(item["init_offset"][1])
        yaw = math.radians(item["init_yaw"]) + math.pi
        assert math.cos(ep.start_yaw_rad - yaw) == pytest.approx(1.0)
    scene = open_scene_dataset(synth.root).load_scene(SCENE_ID)
    bed_ep = next(e for e in episodes.values() if e.object_category == "bed")
    assert bed_ep.start_position[1] == pytest.approx(3.0)
    resolved = resolve_episode(bed_ep, scene)
    (goal,) = resolved.goals
    bed = scene.object_by_id(_record(synth, "bed")["index"] + 2)
    assert goal.object_id == bed.object_id
    assert goal.aabb_min == pytest.approx(tuple(bed.aabb()[0]))
    ax, az, ayaw = goal.approach_pose
    assert ax < bed.aabb()[0][0] and 1.2 < az < 2.8  # in front of the foot end (-x)
    assert math.cos(ayaw - math.pi / 2 * -1) == pytest.approx(1.0)  # facing away: -x
    chair_ep = next(e for e in episodes.values() if e.object_category == "chair")
    ids = {g.object_id for g in resolve_episode(chair_ep, scene).goals}
    chairs = {o.object_id for o in scene.objects_of("chair")}
    assert ids == chairs and all(g.approach_points for g in chair_ep.goals)  # view points


# --------------------------------------------------------------------------------------
# error paths: each names the file (and what refers to it)
# --------------------------------------------------------------------------------------
def test_missing_dataset_and_unknown_scene_fail_at_make(synth, tmp_path) -> None:
    with pytest.raises(SceneDatasetError, match=r"nowhere.*does not exist"):
        _env(tmp_path / "nowhere", synth.episodes_dir)
    (tmp_path / "empty").mkdir()
    with pytest.raises(SceneDatasetError, match=r"empty.*no \*\.scene_dataset_config\.json"):
        _env(tmp_path / "empty", synth.episodes_dir)
    root = _copy(synth, tmp_path)
    (root / "scenes" / f"{SCENE_ID}.scene_instance.json").rename(root / "moved.json")
    with pytest.raises(
        SceneDatasetError, match=rf"not in scene_dataset .*\[.{SCENE_ID}.\].*--scene-dataset"
    ):
        _env(root, synth.episodes_dir)
    bad = tmp_path / "bad"
    shutil.copytree(synth.root, bad)
    (bad / "hssd-hab.scene_dataset_config.json").write_text("{not json")
    with pytest.raises(
        SceneDatasetError, match=r"bad/hssd-hab\.scene_dataset_config\.json is not valid JSON"
    ):
        _env(bad, synth.episodes_dir)


def _first_template(root: Path) -> str:
    inst = json.loads((root / "scenes" / f"{SCENE_ID}.scene_instance.json").read_text())
    return inst["object_instances"][0]["template_name"]


@pytest.mark.parametrize(
    "breakage, pattern",
    [
        (
            "missing_config",
            r"scene_instance\.json object_instances\[0\]: object template 'synthr_.*_0000_chair' has no \.object_config\.json",
        ),
        (
            "bad_config_json",
            r"0000_chair\.object_config\.json \(referred to by .*object_instances\[0\]\) is not valid JSON",
        ),
        ("no_render_asset", r"0000_chair\.object_config\.json.*field 'render_asset' is missing"),
        ("missing_glb", r"chair\.glb \(referred to by .*0000_chair\.object_config\.json\)"),
        (
            "garbage_glb",
            r"chair\.glb \(referred to by .*0000_chair\.object_config\.json\) is not a binary glTF",
        ),
        ("bad_quaternion", r"scene_instance\.json.*object_instances\[0\]: field 'rotation'"),
    ],
)
def test_broken_files_fail_before_the_episode_starts_naming_them(
    synth, tmp_path, breakage: str, pattern: str
) -> None:
    root = _copy(synth, tmp_path)
    objdir = root / "objects" / "humanclaw"
    cfg = objdir / f"{_first_template(root)}.object_config.json"
    if breakage == "missing_config":
        cfg.unlink()
    elif breakage == "bad_config_json":
        cfg.write_text("{")
    elif breakage == "no_render_asset":
        cfg.write_text(json.dumps({"collision_asset": "chair.collider.glb"}))
    elif breakage == "missing_glb":
        (objdir / "chair.glb").unlink()
    elif breakage == "garbage_glb":
        (objdir / "chair.glb").write_bytes(b"\x00" * 64)
    else:
        path = root / "scenes" / f"{SCENE_ID}.scene_instance.json"
        doc = json.loads(path.read_text())
        doc["object_instances"][0]["rotation"] = [0.0, 0.0, 0.0, 0.0]
        path.write_text(json.dumps(doc))
    env = _env(root, synth.episodes_dir)
    try:
        with pytest.raises(SceneDatasetError, match=pattern):
            env.reset(seed=0)
        assert env.unwrapped.current_episode_id is None  # nothing started
    finally:
        env.close()


# --------------------------------------------------------------------------------------
# end to end
# --------------------------------------------------------------------------------------
def _run_oracle(env, episode_id: str):
    from humanclaw_agents.oracle import OraclePolicy
    from humanclaw_gym.evaluation.episode import run_episode

    return run_episode(env, OraclePolicy(), episode_id=episode_id)


def test_oracle_sits_on_the_upstairs_bed_with_metrics(synth) -> None:
    from humanclaw_gym.wrappers import MetricsWrapper

    env = MetricsWrapper(_env(synth.root, privileged=True))
    try:
        result = _run_oracle(env, f"{SCENE_ID}_5")
        m = result.metrics
        assert result.ended_by == "stop"
        assert m["nav_success_20cm"] and m["interact_success"], m
    finally:
        env.close()


@pytest.mark.slow
def test_oracle_solves_every_synthetic_episode(synth) -> None:
    from humanclaw_gym.wrappers import MetricsWrapper

    env = MetricsWrapper(_env(synth.root, privileged=True))
    try:
        for ep in env.unwrapped.episodes:
            result = _run_oracle(env, ep.episode_id)
            m = result.metrics
            assert result.ended_by == "stop" and m["nav_success_20cm"], (ep.episode_id, m)
            if ep.interact:
                assert m["interact_success"], (ep.episode_id, m)
    finally:
        env.close()


def test_humanclaw_run_oracle_metrics_with_a_scene_dataset(synth, tmp_path, capsys) -> None:
    from humanclaw_gym.cli.run_cmd import main as run_main

    out = tmp_path / "run"
    code = run_main(
        [
            "--agent", "oracle", "--metrics", "--quiet",
            "--scene-dataset", str(synth.root),
            "--episodes", str(synth.episodes_dir),
            "--output", str(out),
            "--limit", "2",
        ]
    )  # fmt: skip
    assert code == 0, capsys.readouterr()
    summary = json.loads((out / "metrics_summary.json").read_text())
    assert summary["counts"]["episodes"] == 2 and summary["counts"]["active_stops"] == 2
    assert summary["counts"]["initial_penetration_flagged"] == 0  # spawned on the skin
    results = sorted(out.glob("*/rollout_00/episode_result.json"))
    assert len(results) == 2
    for path in results:
        assert SCENE_ID in str(path)
        metrics = json.loads((path.parent / "metrics.json").read_text())
        assert metrics["nav_success_20cm"] is True, metrics


def test_humanclaw_serve_with_a_scene_dataset(synth, tmp_path) -> None:
    from humanclaw_agents.server_driver import ServerDriver
    from humanclaw_gym.evaluation.policies import load_policy  # noqa: F401 - import check

    token = secrets.token_urlsafe(32)
    ready = tmp_path / "ready.json"
    env = dict(os.environ, HUMANCLAW_SERVER_TOKEN=token, LP_NUM_THREADS="1")
    args = [
        sys.executable, "-m", "humanclaw_gym", "serve",
        "--port", "0", "--output-dir", str(tmp_path / "out"), "--ready-file", str(ready),
        "--scene-dataset", str(synth.root), "--episodes", str(synth.episodes_dir),
        "--limit", "1", "--max-steps", "3",
    ]  # fmt: skip
    log = open(tmp_path / "server.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert proc.poll() is None, (tmp_path / "server.log").read_text()
            assert time.monotonic() < deadline, "server did not start"
            time.sleep(0.05)
        url = f"http://127.0.0.1:{json.loads(ready.read_text())['port']}"

        class Script:
            def __init__(self) -> None:
                self.calls = ["Turn<left><30>", "Walk<forward><slow>", "Stop/Stand"]

            def reset(self, info):
                assert info["scene_id"] == SCENE_ID

            def act(self, obs, info):
                from humanclaw_gym.policy import Decision
                from humanclaw_gym.skills import SkillCall

                assert obs.shape == (448, 448, 3)
                return Decision(action=SkillCall.parse(self.calls.pop(0)), visible_state="")

        run = ServerDriver(url, token=token).run_episode(Script(), output_root=tmp_path / "drv")
        assert run.finish["ended_by"] == "stop" and run.result.steps == 3
        assert run.result.episode_id.startswith(SCENE_ID)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def test_debug_viewer_places_mesh_parts(synth) -> None:
    from humanclaw_gym.viewer import geometry

    scene = open_scene_dataset(synth.root).load_scene(SCENE_ID)
    couch = scene.object_by_id(_record(synth, "couch")["index"] + 2)
    (placement,) = geometry.part_placements(couch)
    assert placement.shape == "mesh" and placement.faces.shape[1] == 3
    world = np.asarray(couch.position) + placement.vertices @ couch.rotation().T
    lo, hi = couch.aabb()
    assert np.allclose(world.min(axis=0), lo, atol=1e-5)
    assert np.allclose(world.max(axis=0), hi, atol=1e-5)


def test_backend_config_cli_and_doctor_carry_the_scene_dataset(synth, tmp_path) -> None:
    from humanclaw_gym.backends.config import BackendConfig
    from humanclaw_gym.cli.backend_args import BackendArgs
    from humanclaw_gym.doctor import format_report, installation_report

    cfg = BackendArgs(scene_dataset=synth.root).to_config()
    assert cfg.scene_dataset == str(synth.root)
    assert BackendConfig.from_dict(cfg.to_dict()) == cfg
    cfg.check()
    report = installation_report(probe=False, scene_dataset=synth.root)
    ds = report["scene_dataset"]
    assert ds["ok"] and ds["scenes"] == 1 and ds["missing_assets"] == 0 and ds["assets"] == 14
    assert report["mesh_cache"]["entries"] > 0
    root = _copy(synth, tmp_path)
    (root / "objects" / "humanclaw" / "bed.glb").unlink()
    report = installation_report(probe=False, scene_dataset=root)
    assert not report["ok"] and report["scene_dataset"]["missing_assets"] == 1
    text = format_report(report)
    assert "bed.glb (referred to by" in text and "missing assets  1" in text
