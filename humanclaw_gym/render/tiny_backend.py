"""The fallback renderer: pybullet's software TinyRenderer in its own DIRECT client.

Needs nothing beyond pybullet (already a dependency), so it works where no EGL/GL driver
exists, at roughly ten times the cost of the moderngl renderer. It owns a private pybullet
client that never steps: every scene part and every humanoid link is a visual-only,
massless multibody (no collision shape), moved with ``resetBasePositionAndOrientation``.
The camera uses the very same view and projection matrices as the moderngl renderer
(:mod:`humanclaw_gym.render.transforms`), so both backends show the same view of a scene.

Scene ``"mesh"`` parts (imported homes) become visual meshes, one per primitive, each in
its material's mean colour (textures are not drawn).

Instance ids come from TinyRenderer's segmentation mask (pybullet body uid per pixel,
-1 where nothing was drawn), mapped through a lookup table to scene object ids (0 for the
humanoid). Materials are drawn as plain colours; the background is replaced by the same
sky colour the moderngl renderer clears to. A
:class:`~humanclaw_gym.render.cameras.CutawayCamera` hides whole objects while the image
is taken (TinyRenderer has no per-pixel clip planes); see :meth:`TinyRenderer.render`.

A body mesh (:meth:`TinyRenderer.set_body_mesh`, e.g. the skinned SMPL-X body) cannot be
handed to pybullet per frame: a visual shape's vertices are fixed once created, and
shapes are only freed by a full reset. So the mesh is rasterised here with numpy (a
z-buffer over the triangles' pixel boxes, back faces culled, Gouraud-interpolated
Lambert shading with TinyRenderer's own light) and composited over TinyRenderer's image
by depth, using its depth buffer from the same view and projection matrices.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from humanclaw_gym.backends.protocols import (
    Camera,
    RenderBackendUnavailable,
    RenderCapabilities,
    RenderResult,
    check_body_mesh,
    check_render_modes,
)
from humanclaw_gym.render.cameras import CUT_THROUGH_CATEGORIES, UNCUT_CATEGORIES, cut_away_whole
from humanclaw_gym.render.materials import DEFAULT_BODY_COLOR, SKY_COLOR
from humanclaw_gym.render.transforms import (
    check_link_poses,
    check_object_poses,
    cutaway_plane_of,
    depth_from_window,
    projection_matrix,
    quat_xyzw_to_matrix,
    validate_camera,
    view_matrix,
)

if TYPE_CHECKING:  # pragma: no cover
    from humanclaw_gym.scenes.spec import SceneSpec

__all__ = ["TinyRenderer"]

_MAX_SIZE = 4096
#: pybullet cylinders run along local +Z; scene cylinders along +Y: -90 degrees about X.
_CYLINDER_Z_TO_Y = (-math.sqrt(0.5), 0.0, 0.0, math.sqrt(0.5))
#: Where the humanoid waits (far outside any frustum) until its first pose arrives.
_HIDDEN_POSITION = (0.0, -1.0e4, 0.0)
_LIGHT_DIRECTION = (0.3, 1.0, 0.45)
_LIGHT_AMBIENT = 0.6
_LIGHT_DIFFUSE = 0.4
#: Fragments (candidate pixels) rasterised per batch: bounds the memory of a close-up mesh.
_FRAGMENT_BATCH = 2_000_000
#: Triangles per visual mesh shape (pybullet's per-shape limits).
_MESH_CHUNK_FACES = 60000
#: Mesh vertices used as extra sight-line targets of the cutaway.
_MESH_SIGHT_POINTS = 64


def _box_corners(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The 8 corners ``(8, 3)`` of the box ``[lo, hi]``."""
    return np.array(
        [[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])]
    )


def _segments_hit_boxes(
    start: np.ndarray, ends: np.ndarray, lo: np.ndarray, hi: np.ndarray
) -> np.ndarray:
    """For each box ``(O, 3)`` bounds, whether any segment ``start -> ends[k]`` crosses it
    (slab test), ``bool (O,)``."""
    direction = ends - start  # (K, 3)
    safe = np.where(np.abs(direction) < 1e-12, 1e-12, direction)
    t1 = (lo[None, :, :] - start) / safe[:, None, :]  # (K, O, 3)
    t2 = (hi[None, :, :] - start) / safe[:, None, :]
    t_enter = np.minimum(t1, t2).max(axis=2)
    t_exit = np.maximum(t1, t2).min(axis=2)
    hit = (t_exit >= np.maximum(t_enter, 0.0)) & (t_enter <= 1.0)
    return hit.any(axis=0)


def _mesh_fragments(
    xy: np.ndarray, depth: np.ndarray, shade: np.ndarray, width: int, height: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rasterise screen-space triangles: every covered pixel centre of every triangle.

    Args:
        xy: ``(T, 3, 2)`` vertex positions in pixels (x = column, y = row, row 0 on top).
        depth: ``(T, 3)`` window depths in [0, 1].
        shade: ``(T, 3)`` per-vertex intensities.
        width, height: image size.

    Returns:
        ``(pixel index row * width + col, depth, shade)`` of each fragment, screen-linearly
        interpolated (exact for window depth).
    """
    lo = np.ceil(xy.min(axis=1) - 0.5).astype(np.int64)
    hi = np.floor(xy.max(axis=1) - 0.5).astype(np.int64)
    lo = np.maximum(lo, 0)
    hi = np.minimum(hi, [width - 1, height - 1])
    size = hi - lo + 1
    keep = np.all(size > 0, axis=1)
    xy, depth, shade, lo, size = xy[keep], depth[keep], shade[keep], lo[keep], size[keep]
    count = size[:, 0] * size[:, 1]
    tri = np.repeat(np.arange(len(count)), count)
    offset = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)
    col = lo[tri, 0] + offset % size[tri, 0]
    row = lo[tri, 1] + offset // size[tri, 0]
    px, py = col + 0.5, row + 0.5
    x0, y0 = xy[tri, 0, 0], xy[tri, 0, 1]
    x1, y1 = xy[tri, 1, 0], xy[tri, 1, 1]
    x2, y2 = xy[tri, 2, 0], xy[tri, 2, 1]
    denom = (y1 - y2) * (x0 - x2) + (x2 - x1) * (y0 - y2)
    b0 = ((y1 - y2) * (px - x2) + (x2 - x1) * (py - y2)) / denom
    b1 = ((y2 - y0) * (px - x2) + (x0 - x2) * (py - y2)) / denom
    b2 = 1.0 - b0 - b1
    inside = (b0 >= -1e-9) & (b1 >= -1e-9) & (b2 >= -1e-9)
    b0, b1, b2, tri = b0[inside], b1[inside], b2[inside], tri[inside]
    frag_depth = b0 * depth[tri, 0] + b1 * depth[tri, 1] + b2 * depth[tri, 2]
    frag_shade = b0 * shade[tri, 0] + b1 * shade[tri, 1] + b2 * shade[tri, 2]
    return row[inside] * width + col[inside], frag_depth, frag_shade


class TinyRenderer:
    """Software rasteriser on a private pybullet DIRECT client.

    Implements :class:`~humanclaw_gym.backends.protocols.BodyMeshRenderBackend`: after
    :meth:`set_body_mesh` the humanoid is drawn as that mesh (rasterised with numpy, see
    the module docstring) instead of its link shapes until :meth:`clear_body_mesh` or the
    next :meth:`build`.

    Args:
        body_color: RGB colour of the humanoid.

    Raises:
        RenderBackendUnavailable: pybullet cannot be imported or connected.
    """

    capabilities = RenderCapabilities(
        name="tiny",
        modes=frozenset({"rgb", "instance", "depth"}),
        part_shapes=frozenset({"box", "cylinder", "sphere", "capsule", "mesh"}),
        body_mesh=True,
    )

    def __init__(self, body_color: tuple[float, float, float] = DEFAULT_BODY_COLOR) -> None:
        color = np.asarray(body_color, dtype=np.float64)
        if color.shape != (3,) or np.any(color < 0.0) or np.any(color > 1.0):
            raise ValueError(f"body_color must be 3 numbers in [0, 1], got {body_color!r}")
        self._body_color = color
        self._sky = np.round(np.asarray(SKY_COLOR) * 255.0).astype(np.uint8)
        self._client: int | None = None
        self._closed = False
        self._scene: SceneSpec | None = None
        self._lut = np.full(1, -1, dtype=np.int32)
        self._dyn_parts: dict[int, list[tuple[int, np.ndarray]]] = {}
        self._link_bodies: list[tuple[int, int]] = []
        # current pose of every scene part body (to restore after a cutaway)
        self._part_pose: dict[int, tuple[list, list]] = {}
        # objects a cutaway may hide: their part bodies and world box corners (O, 8, 3)
        self._cut_uids: list[list[int]] = []
        self._cut_corners = np.zeros((0, 8, 3))
        self._cut_whole = np.zeros(0, dtype=bool)
        self._cut_local: dict[int, tuple[int, np.ndarray]] = {}
        self._link_positions: np.ndarray | None = None
        self._link_poses: np.ndarray | None = None
        self._mesh_vertices: np.ndarray | None = None
        self._mesh_faces: np.ndarray | None = None
        self._mesh_normals: np.ndarray | None = None
        self.device = "pybullet TinyRenderer (CPU)"
        try:
            import pybullet
        except ImportError as exc:  # pragma: no cover - pybullet is a hard dependency
            raise RenderBackendUnavailable(
                "the tiny renderer needs pybullet: pip install pybullet"
            ) from exc
        self._pb = pybullet
        client = pybullet.connect(pybullet.DIRECT)
        if client < 0:  # pragma: no cover
            raise RenderBackendUnavailable("pybullet could not open a DIRECT client")
        self._client = client

    # ----------------------------------------------------------------------------------
    def _require_open(self) -> None:
        if self._closed or self._client is None:
            raise RuntimeError("TinyRenderer is closed")

    def _visual_body(
        self,
        shape_kwargs: dict[str, Any],
        rgb: Sequence[float],
        frame_pos: Sequence[float],
        frame_quat: Sequence[float],
        base_pos: Sequence[float],
        base_quat: Sequence[float],
    ) -> int:
        pb, cid = self._pb, self._client
        visual = pb.createVisualShape(
            rgbaColor=[float(rgb[0]), float(rgb[1]), float(rgb[2]), 1.0],
            visualFramePosition=[float(v) for v in frame_pos],
            visualFrameOrientation=[float(v) for v in frame_quat],
            physicsClientId=cid,
            **shape_kwargs,
        )
        return pb.createMultiBody(
            baseMass=0.0,
            baseCollisionShapeIndex=-1,
            baseVisualShapeIndex=visual,
            basePosition=[float(v) for v in base_pos],
            baseOrientation=[float(v) for v in base_quat],
            physicsClientId=cid,
        )

    def _part_shape(self, part: Any) -> tuple[dict[str, Any], tuple[float, ...]]:
        pb = self._pb
        if part.shape == "box":
            return {"shapeType": pb.GEOM_BOX, "halfExtents": list(part.size)}, (0.0, 0.0, 0.0, 1.0)
        if part.shape == "cylinder":
            radius, half_height, _ = part.size
            kwargs = {"shapeType": pb.GEOM_CYLINDER, "radius": radius, "length": 2.0 * half_height}
            return kwargs, _CYLINDER_Z_TO_Y
        return {"shapeType": pb.GEOM_SPHERE, "radius": part.size[0]}, (0.0, 0.0, 0.0, 1.0)

    def _link_pieces(self, shape: Any) -> list[tuple[dict[str, Any], np.ndarray]]:
        """Visual shapes of one humanoid link: ``(createVisualShape kwargs, offset)``.

        A capsule becomes a cylinder plus two end spheres (pybullet's own capsule mesh is
        too coarse in TinyRenderer: short wide capsules render as diamonds)."""
        pb = self._pb
        offset = np.asarray(shape.offset_m, dtype=np.float64)
        if shape.kind == "box":
            return [({"shapeType": pb.GEOM_BOX, "halfExtents": list(shape.half_extents)}, offset)]
        if shape.kind == "sphere":
            return [({"shapeType": pb.GEOM_SPHERE, "radius": shape.radius}, offset)]
        if shape.kind == "capsule":
            r, half = shape.radius, shape.half_length
            axis = quat_xyzw_to_matrix(np.asarray(shape.quat_xyzw))[:, 2] * half
            cylinder = {"shapeType": pb.GEOM_CYLINDER, "radius": r, "length": 2.0 * half}
            sphere = {"shapeType": pb.GEOM_SPHERE, "radius": r}
            return [(cylinder, offset), (sphere, offset + axis), (sphere, offset - axis)]
        raise ValueError(f"link shape kind {shape.kind!r} of joint {shape.joint} is not drawable")

    # ----------------------------------------------------------------------------------
    def build(self, scene: SceneSpec) -> None:
        """Create one visual-only body per scene part and per humanoid link.

        Calling it again replaces the previous scene; the humanoid stays hidden until the
        next :meth:`set_body_pose` (a body mesh is forgotten, faces included).
        """
        from humanclaw_gym.render.body_shapes import drawn_link_shapes

        self._require_open()
        pb, cid = self._pb, self._client
        pb.resetSimulation(physicsClientId=cid)
        uid_to_id: dict[int, int] = {}
        self._dyn_parts = {}
        self._part_pose = {}
        self._link_positions = None
        self._link_poses = None
        self._drop_mesh()
        cut_uids: list[list[int]] = []
        cut_corners: list[np.ndarray] = []
        cut_whole: list[bool] = []
        self._cut_local = {}
        for obj in scene.objects:
            quat = list(obj.quat_xyzw())
            uids = []
            for part in obj.parts:
                if part.shape == "mesh":
                    for uid in self._mesh_bodies(obj, part, quat):
                        uid_to_id[uid] = obj.object_id
                        uids.append(uid)
                        self._part_pose[uid] = (list(obj.position), quat)
                        if obj.dynamic:  # vertices are in the object frame: no offset
                            self._dyn_parts.setdefault(obj.object_id, []).append((uid, np.zeros(3)))
                    continue
                kwargs, frame_quat = self._part_shape(part)
                centre = obj.part_world_center(part)
                uid = self._visual_body(kwargs, part.color, (0, 0, 0), frame_quat, centre, quat)
                uid_to_id[uid] = obj.object_id
                uids.append(uid)
                self._part_pose[uid] = (centre.tolist(), quat)
                if obj.dynamic:
                    self._dyn_parts.setdefault(obj.object_id, []).append(
                        (uid, np.asarray(part.offset, dtype=np.float64))
                    )
            if obj.category in UNCUT_CATEGORIES or obj.category == "stage":
                continue  # a stage holds the floors: hiding it whole would drop them
            if obj.dynamic:
                offsets = np.array([p.offset for p in obj.parts])
                halves = np.array([p.local_half_extents() for p in obj.parts])
                local = _box_corners((offsets - halves).min(axis=0), (offsets + halves).max(axis=0))
                self._cut_local[obj.object_id] = (len(cut_uids), local)
                corners = np.asarray(obj.position) + local @ obj.rotation().T
            else:
                corners = _box_corners(*obj.aabb())
            cut_uids.append(uids)
            cut_corners.append(corners)
            cut_whole.append(obj.category not in CUT_THROUGH_CATEGORIES)
        self._cut_uids = cut_uids
        self._cut_corners = np.array(cut_corners).reshape(-1, 8, 3)
        self._cut_whole = np.array(cut_whole, dtype=bool)
        self._link_bodies = []
        for shape in drawn_link_shapes():
            for kwargs, offset in self._link_pieces(shape):
                uid = self._visual_body(
                    kwargs,
                    self._body_color,
                    offset,
                    shape.quat_xyzw,
                    _HIDDEN_POSITION,
                    (0, 0, 0, 1),
                )
                uid_to_id[uid] = 0
                self._link_bodies.append((shape.joint, uid))
        lut = np.full(max(uid_to_id) + 2, -1, dtype=np.int32)
        for uid, oid in uid_to_id.items():
            lut[uid] = oid
        self._lut = lut
        self._scene = scene

    def _mesh_bodies(self, obj: Any, part: Any, quat: list[float]) -> list[int]:
        """Visual bodies of a ``"mesh"`` part: one per primitive (split into pieces of at
        most ``_MESH_CHUNK_FACES`` triangles), object-frame vertices, each drawn in its
        primitive's mean colour (TinyRenderer takes no per-vertex colours; a texture
        counts as its mean colour)."""
        from humanclaw_gym.scenes.meshes import (
            _primitive_mean_color,
            load_part_mesh,
            place_vertices,
        )

        pb, cid = self._pb, self._client
        ref = part.mesh
        asset = load_part_mesh(ref)
        normal_m = ref.rotation_matrix() @ np.diag(1.0 / np.asarray(ref.scale))
        uids = []
        for prim in asset.primitives:
            local = place_vertices(prim.positions, ref)
            normals = prim.normals.astype(np.float64) @ normal_m.T
            normals /= np.maximum(np.linalg.norm(normals, axis=1, keepdims=True), 1e-12)
            color = [*(float(c) for c in _primitive_mean_color(prim)), 1.0]
            for start in range(0, len(prim.indices), _MESH_CHUNK_FACES):
                faces = prim.indices[start : start + _MESH_CHUNK_FACES]
                used, remap = np.unique(faces, return_inverse=True)
                visual = pb.createVisualShape(  # lists: pybullet reads them faster
                    shapeType=pb.GEOM_MESH,
                    vertices=local[used].tolist(),
                    indices=np.asarray(remap, dtype=np.int64).ravel().tolist(),
                    normals=normals[used].tolist(),
                    rgbaColor=color,
                    physicsClientId=cid,
                )
                uids.append(
                    pb.createMultiBody(
                        baseMass=0.0,
                        baseCollisionShapeIndex=-1,
                        baseVisualShapeIndex=visual,
                        basePosition=[float(v) for v in obj.position],
                        baseOrientation=quat,
                        physicsClientId=cid,
                    )
                )
        return uids

    def set_body_pose(self, link_poses: np.ndarray) -> None:
        """Place the humanoid from ``(24, 7)`` world link poses (and make it visible).

        While a body mesh is set the link shapes stay hidden; their poses are still kept
        (they steer the cutaway).
        """
        self._require_open()
        if self._scene is None:
            raise RuntimeError("TinyRenderer.set_body_pose called before build()")
        poses = check_link_poses(link_poses)
        self._link_positions = poses[:, :3].copy()
        self._link_poses = poses.copy()
        if self._mesh_faces is None:
            self._place_links(poses)

    def _place_links(self, poses: np.ndarray | None) -> None:
        """Move the link bodies to ``poses`` (``None``: out of sight)."""
        reset = self._pb.resetBasePositionAndOrientation
        for joint, uid in self._link_bodies:
            if poses is None:
                pos, quat = list(_HIDDEN_POSITION), [0.0, 0.0, 0.0, 1.0]
            else:
                pos, quat = poses[joint, :3].tolist(), poses[joint, 3:7].tolist()
            reset(uid, pos, quat, physicsClientId=self._client)

    def set_body_mesh(self, vertices: np.ndarray, faces: np.ndarray | None = None) -> None:
        """Draw the humanoid as a triangle mesh instead of its link shapes.

        Args:
            vertices: ``(V, 3)`` world positions (metres, Y up), any float dtype, finite.
            faces: ``(F, 3)`` integer indices in ``[0, V)``, counter-clockwise seen from
                outside; required on the first call after :meth:`build` /
                :meth:`clear_body_mesh`, ``None`` keeps the previous ones (same ``V``).

        Both arrays are copied. The mesh shows in every image until :meth:`clear_body_mesh`
        or the next :meth:`build`; its pixels have the humanoid's id 0 and body colour.
        Triangles reaching in front of the camera's near plane are skipped (no clipping).

        Raises:
            ValueError: bad shape, dtype, non-finite vertices or a face index out of range;
                raised before anything changes.
            RuntimeError: before :meth:`build` or after :meth:`close`.
        """
        from humanclaw_gym.render.moderngl_backend import vertex_normals

        self._require_open()
        if self._scene is None:
            raise RuntimeError("TinyRenderer.set_body_mesh called before build()")
        previous = None if self._mesh_vertices is None else len(self._mesh_vertices)
        verts, tri = check_body_mesh(vertices, faces, previous)
        if tri is None:
            tri = self._mesh_faces
        assert tri is not None  # check_body_mesh refuses faces=None without earlier faces
        if self._mesh_faces is None:
            self._place_links(None)
        self._mesh_vertices = verts
        self._mesh_faces = tri
        self._mesh_normals = vertex_normals(verts, tri)

    def clear_body_mesh(self) -> None:
        """Forget the body mesh (faces too); the link shapes are drawn again once posed."""
        self._require_open()
        had_mesh = self._mesh_faces is not None
        self._drop_mesh()
        if had_mesh and self._scene is not None:
            self._place_links(self._link_poses)

    def _drop_mesh(self) -> None:
        self._mesh_vertices = self._mesh_faces = self._mesh_normals = None

    def set_object_poses(self, object_ids: Sequence[int], poses: np.ndarray) -> None:
        """Move dynamic objects to ``(M, 7)`` world poses (rows aligned with ``object_ids``)."""
        self._require_open()
        if self._scene is None:
            raise RuntimeError("TinyRenderer.set_object_poses called before build()")
        ids, arr = check_object_poses(object_ids, poses, self._dyn_parts, self._scene.scene_id)
        rots = quat_xyzw_to_matrix(arr[:, 3:7]) if len(ids) else np.zeros((0, 3, 3))
        reset = self._pb.resetBasePositionAndOrientation
        for row, oid in enumerate(ids):
            quat = (arr[row, 3:7] / np.linalg.norm(arr[row, 3:7])).tolist()
            for uid, offset in self._dyn_parts[oid]:
                pos = (arr[row, :3] + rots[row] @ offset).tolist()
                reset(uid, pos, quat, physicsClientId=self._client)
                self._part_pose[uid] = (pos, quat)
            if oid in self._cut_local:
                index, local = self._cut_local[oid]
                self._cut_corners[index] = arr[row, :3] + local @ rots[row].T

    def render(self, camera: Camera, modes: Iterable[str] = frozenset({"rgb"})) -> RenderResult:
        """Draw the scene (and the humanoid once posed, or its mesh once set) from ``camera``.

        With a :class:`~humanclaw_gym.render.cameras.CutawayCamera`, cuttable objects that
        the cut removes are moved out of sight for this image only (see
        :meth:`_apply_cutaway`).

        Returns:
            The images of ``modes`` plus ``"rgb"``, all from TinyRenderer's one image
            (``"depth"`` from its depth buffer, with the body mesh composited in); see
            :data:`~humanclaw_gym.backends.protocols.RENDER_MODES`.

        Raises:
            ValueError: a mode this backend does not declare.
        """
        wanted = check_render_modes(modes, self.capabilities)
        instance, depth = "instance" in wanted, "depth" in wanted
        self._require_open()
        if self._scene is None:
            raise RuntimeError("TinyRenderer.render called before build()")
        validate_camera(camera, _MAX_SIZE)
        pb = self._pb
        w, h = int(camera.width), int(camera.height)
        hidden = self._apply_cutaway(camera, cutaway_plane_of(camera))
        try:
            rgba, seg, z_buffer = self._camera_image(camera, w, h)
        finally:
            for uid in hidden:
                position, quat = self._part_pose[uid]
                pb.resetBasePositionAndOrientation(
                    uid, position, quat, physicsClientId=self._client
                )
        rgb = np.asarray(rgba, dtype=np.uint8).reshape(h, w, 4)[:, :, :3].copy()
        uids = np.asarray(seg, dtype=np.int64).reshape(h, w)
        background = uids < 0
        rgb[background] = self._sky
        mesh_pixels = window = None
        if self._mesh_faces is not None or depth:
            window = np.where(
                background, np.inf, np.asarray(z_buffer, dtype=np.float64).reshape(h, w)
            )
        if self._mesh_faces is not None:
            mesh_pixels, window = self._draw_mesh(camera, rgb, window)
        ids = None
        if instance:
            ids = np.where(background, -1, self._lut[np.clip(uids, 0, len(self._lut) - 1)])
            ids = ids.astype(np.int32)
            if mesh_pixels is not None:
                ids.reshape(-1)[mesh_pixels] = 0
        depth_m = None
        if depth:
            depth_m = depth_from_window(np.where(np.isinf(window), 1.0, window), camera)
        return RenderResult(rgb=rgb, instance=ids, depth=depth_m)

    def _draw_mesh(
        self, camera: Camera, rgb: np.ndarray, scene_depth: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Rasterise the body mesh into ``rgb`` (in place) where it is nearer than the scene.

        Args:
            camera: the camera of the image.
            rgb: ``uint8 (H, W, 3)`` scene image, overwritten at mesh pixels.
            scene_depth: ``(H, W)`` window depth of the scene (``inf`` where empty).

        Returns:
            Flat indices (``row * W + col``) of the pixels the mesh covers, and the
            ``(H, W)`` window depth of scene and mesh together (``inf`` where empty).
        """
        verts = self._mesh_vertices.astype(np.float64)  # type: ignore[union-attr]
        faces = self._mesh_faces
        h, w = scene_depth.shape
        clip = (
            np.c_[verts, np.ones(len(verts))] @ (projection_matrix(camera) @ view_matrix(camera)).T
        )
        dist = clip[:, 3]  # distance along the view axis
        ahead = (dist > camera.near_m) & (dist < camera.far_m)
        faces = faces[np.all(ahead[faces], axis=1)]  # type: ignore[index]
        ndc = clip[:, :3] / np.where(ahead, dist, 1.0)[:, None]
        light = np.asarray(_LIGHT_DIRECTION) / np.linalg.norm(_LIGHT_DIRECTION)
        normals = self._mesh_normals.astype(np.float64)  # type: ignore[union-attr]
        shade = _LIGHT_AMBIENT + _LIGHT_DIFFUSE * np.maximum(normals @ light, 0.0)
        xy = np.stack([(ndc[:, 0] + 1.0) * 0.5 * w, (1.0 - ndc[:, 1]) * 0.5 * h], axis=1)
        tri_xy = xy[faces]
        e1 = tri_xy[:, 1] - tri_xy[:, 0]
        e2 = tri_xy[:, 2] - tri_xy[:, 0]
        # Counter-clockwise in NDC (a front face) is clockwise in pixels, whose rows run
        # down; degenerate (zero-area) triangles go too.
        faces = faces[e1[:, 0] * e2[:, 1] - e1[:, 1] * e2[:, 0] < -1e-12]
        window_z = ndc[:, 2] * 0.5 + 0.5
        best_depth = scene_depth.reshape(-1).copy()
        best_shade = np.full(h * w, np.nan)
        # Batches of triangles keep the fragment arrays small for close-up views.
        area = np.prod(np.ptp(xy[faces], axis=1) + 1.0, axis=1)
        bounds = np.searchsorted(
            np.cumsum(area), np.arange(1, 1 + int(area.sum()) // _FRAGMENT_BATCH) * _FRAGMENT_BATCH
        )
        for part in np.split(faces, bounds):
            if len(part) == 0:
                continue
            pix, depth, frag_shade = _mesh_fragments(xy[part], window_z[part], shade[part], w, h)
            nearer = depth < best_depth[pix]
            pix, depth, frag_shade = pix[nearer], depth[nearer], frag_shade[nearer]
            order = np.lexsort((depth, pix))
            first = np.unique(pix[order], return_index=True)[1]
            win = order[first]
            best_depth[pix[win]] = depth[win]
            best_shade[pix[win]] = frag_shade[win]
        covered = np.nonzero(~np.isnan(best_shade))[0]
        color = np.clip(
            np.round(best_shade[covered, None] * self._body_color[None] * 255.0), 0, 255
        )
        rgb.reshape(-1, 3)[covered] = color.astype(np.uint8)
        return covered, best_depth.reshape(h, w)

    def _apply_cutaway(self, camera: Camera, plane: np.ndarray | None) -> list[int]:
        """Hide the objects a cutaway removes; return their part bodies for restoring.

        Furniture and small objects are removed whole by the rule every renderer shares
        (:func:`~humanclaw_gym.render.cameras.cut_away_whole`). TinyRenderer cannot clip
        walls per pixel, so a wall is removed whole when it lies entirely on the cut side of
        the plane, or when it reaches onto the cut side and its bounding box blocks a sight
        line from the camera to a humanoid link origin (or to one of up to 64 vertices of
        the body mesh, when one is set).
        """
        if plane is None or not self._cut_uids:
            return []
        corners = self._cut_corners
        side = corners @ plane[:3] + plane[3]  # (O, 8)
        whole = self._cut_whole
        lo, hi = corners.min(axis=1), corners.max(axis=1)
        pelvis = None if self._link_positions is None else self._link_positions[0]
        by_centre = cut_away_whole(plane, 0.5 * (lo + hi), lo[:, [0, 2]], hi[:, [0, 2]], pelvis)
        hide = np.where(whole, by_centre, np.all(side < 0.0, axis=1))
        targets = [] if self._link_positions is None else [self._link_positions]
        if self._mesh_vertices is not None:
            step = max(1, len(self._mesh_vertices) // _MESH_SIGHT_POINTS)
            targets.append(self._mesh_vertices[::step].astype(np.float64))
        if targets:
            blocks = _segments_hit_boxes(
                np.asarray(camera.position, dtype=np.float64),
                np.concatenate(targets),
                corners.min(axis=1),
                corners.max(axis=1),
            )
            hide |= ~whole & np.any(side < 0.0, axis=1) & blocks
        hidden = []
        for index in np.nonzero(hide)[0]:
            for uid in self._cut_uids[index]:
                self._pb.resetBasePositionAndOrientation(
                    uid, list(_HIDDEN_POSITION), [0, 0, 0, 1], physicsClientId=self._client
                )
                hidden.append(uid)
        return hidden

    def _camera_image(self, camera: Camera, w: int, h: int) -> tuple[Any, Any, Any]:
        """``(rgba, segmentation, depth)``; depth is the window depth (OpenGL convention:
        NDC z mapped to [0, 1]) of the projection matrix passed in."""
        pb = self._pb
        _, _, rgba, depth, seg = pb.getCameraImage(
            w,
            h,
            viewMatrix=view_matrix(camera).flatten(order="F").tolist(),
            projectionMatrix=projection_matrix(camera).flatten(order="F").tolist(),
            renderer=pb.ER_TINY_RENDERER,
            shadow=0,
            lightDirection=list(_LIGHT_DIRECTION),
            lightColor=[1.0, 1.0, 1.0],
            lightAmbientCoeff=_LIGHT_AMBIENT,
            lightDiffuseCoeff=_LIGHT_DIFFUSE,
            lightSpecularCoeff=0.0,
            physicsClientId=self._client,
        )
        return rgba, seg, depth

    def close(self) -> None:
        """Disconnect the private pybullet client. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._client is not None:
            try:
                self._pb.disconnect(physicsClientId=self._client)
            except Exception:  # pragma: no cover - already gone at interpreter exit
                pass
            self._client = None
        self._scene = None

    def __enter__(self) -> TinyRenderer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:  # pragma: no cover - best effort at interpreter exit
        try:
            self.close()
        except Exception:
            pass
