"""The default renderer: moderngl on a headless EGL context (Mesa llvmpipe or a GPU).

Every primitive of the scene and the humanoid is an *instance* of one of three unit meshes
(box, cylinder, sphere; a capsule is a cylinder plus two spheres). Per-instance data is a
rotation, a translation, a per-axis scale, a colour, the object id and packed flags
(material texture layers, static, cuttable). Static scene parts live in instance buffers
(one per mesh) written once in :meth:`build`; dynamic objects and the 24 humanoid links
live in small buffers rewritten by :meth:`set_object_poses` and :meth:`set_body_pose`.
Instead of its links the humanoid can be a triangle mesh (:meth:`set_body_mesh`, e.g. the
skinned SMPL-X body): a dynamic vertex buffer of world positions and per-vertex normals,
drawn as one instance with the identity transform through the same program, so it gets
the body's colour, shading and id.
One frame is at most nine instanced draw calls into an RGB8 colour attachment plus, when
the instance image is asked for, an R32I attachment written in the same pass (multiple
render targets). The id buffer stores ``id + 1`` so that its cleared value 0 decodes to
the background id -1. A :class:`~humanclaw_gym.render.cameras.CutawayCamera` clips the
cuttable instances against its plane with ``gl_ClipDistance``.

Shading: a sky/ground hemisphere ambient term plus a warm key and a cool fill directional
light (Lambert, evaluated per vertex, which is exact on flat box faces; no shadows), times
the material's procedural pattern (:mod:`humanclaw_gym.render.materials`), one mipmapped
texture-array fetch per pixel in face coordinates: world metres for static parts so that
patterns run across floor slabs, part-local metres for moving parts so that patterns stick
to them. At 448 x 448 on Mesa llvmpipe (one thread) a furnished room costs about 6 ms per
frame; see ``docs/rendering.md``.

The frame is finished with ``glFinish`` called through ctypes before the read-back, so the
rasterising (most of a frame's cost on llvmpipe) runs without the GIL.

Threads and fork: llvmpipe starts one rasteriser thread per core by default, and Mesa's
shader disk cache one writer thread. Threads do not survive ``fork``: a process forked
after the parent made a context (Gymnasium's ``AsyncVectorEnv`` forks on Linux) inherits
Mesa's screen without its threads, and its first draw waits for them forever. So the
constructor applies :data:`MESA_DEFAULTS` (unless the variables are already set) before the
first context exists: ``LP_NUM_THREADS=0`` (llvmpipe rasterises in the calling thread;
environments run one renderer per worker process and extra render threads would only
fight the physics of the other workers for the same cores) and
``MESA_SHADER_CACHE_DISABLE=true``. The process then keeps no Mesa thread and forked
workers render normally. When a context may run driver threads (a GPU driver, or those
variables set otherwise), the process id is remembered, and a renderer made in a process
forked from it raises :class:`RenderBackendUnavailable` saying why instead of hanging.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from humanclaw_gym.backends.protocols import (
    Camera,
    RenderBackendUnavailable,
    RenderCapabilities,
    RenderResult,
    check_body_mesh,
    check_render_modes,
)
from humanclaw_gym.image_sizes import EGO_SIZE_PX
from humanclaw_gym.render.cameras import CUT_THROUGH_CATEGORIES, UNCUT_CATEGORIES, cut_away_whole
from humanclaw_gym.render.materials import DEFAULT_BODY_COLOR, SKY_COLOR
from humanclaw_gym.render.meshes import MESH_KINDS, unit_mesh
from humanclaw_gym.render.textures import pattern_layers
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

__all__ = ["ModernglRenderer", "vertex_normals"]

_MAX_SIZE = 4096
_STATIC_FLAG = 1 << 16
_CUTTABLE_FLAG = 1 << 17
_WHOLE_FLAG = 1 << 18  # cut away whole (per object, u_hidden), not through per pixel
_GL_CLIP_DISTANCE0 = 0x3000
_NO_CUT = (0.0, 0.0, 0.0, 1.0)
#: Mesh +Y (cylinder axis) -> capsule +Z (rotation of +90 degrees about X).
_Y_TO_Z = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0]])

_DRAW_ORDER = ("body", "dynamic", "static")
_T = TypeVar("_T")

_INSTANCE_DTYPE = np.dtype(
    [
        ("rot_cols", np.float32, (9,)),
        ("trans", np.float32, (3,)),
        ("scale", np.float32, (3,)),
        ("color", np.float32, (3,)),
        ("ids", np.int32, (2,)),
    ]
)
_INSTANCE_FORMAT = "3f 3f 3f 3f 3f 3f 2i /i"
_INSTANCE_ATTRS = ("i_rx", "i_ry", "i_rz", "i_trans", "i_scale", "i_color", "i_ids")

_VERTEX_SHADER = """
#version 330
uniform mat4 u_view_proj;
uniform vec4 u_cut_plane;
uniform usampler2D u_hidden;
uniform vec3 u_key_dir;
uniform vec3 u_fill_dir;
in vec3 in_pos;
in vec3 in_normal;
in vec3 i_rx;
in vec3 i_ry;
in vec3 i_rz;
in vec3 i_trans;
in vec3 i_scale;
in vec3 i_color;
in ivec2 i_ids;
out vec3 v_pat_pos;
out vec3 v_pat_normal;
out vec3 v_color;
flat out int v_id;
flat out int v_layer_h;
flat out int v_layer_v;

void main() {
    mat3 rot = mat3(i_rx, i_ry, i_rz);
    vec3 local = in_pos * i_scale;
    vec3 world = rot * local + i_trans;
    vec3 n_local = normalize(in_normal / i_scale);
    vec3 n = normalize(rot * n_local);
    bool is_static = ((i_ids.y >> 16) & 1) != 0;
    bool cuttable = ((i_ids.y >> 17) & 1) != 0;
    bool whole = ((i_ids.y >> 18) & 1) != 0;
    float cut = 1.0;
    if (whole) {
        cut = texelFetch(u_hidden, ivec2(i_ids.x + 1, 0), 0).r != 0u ? -1.0 : 1.0;
    } else if (cuttable) {
        cut = dot(u_cut_plane.xyz, world) + u_cut_plane.w;
    }
    gl_ClipDistance[0] = cut;
    // Lambert lighting per vertex (exact for flat box faces, smooth elsewhere):
    // sky/ground hemisphere ambient, a warm key and a cool fill directional light.
    vec3 ambient = mix(vec3(0.50, 0.48, 0.46), vec3(0.68, 0.69, 0.72), 0.5 + 0.5 * n.y);
    vec3 light = ambient
        + 0.36 * max(dot(n, u_key_dir), 0.0) * vec3(1.0, 0.97, 0.92)
        + 0.28 * max(dot(n, u_fill_dir), 0.0) * vec3(0.95, 0.97, 1.0);
    v_color = i_color * light;
    v_pat_pos = is_static ? world : local;
    v_pat_normal = is_static ? n : n_local;
    v_id = i_ids.x;
    v_layer_h = (i_ids.y & 255) - 1;
    v_layer_v = ((i_ids.y >> 8) & 255) - 1;
    gl_Position = u_view_proj * vec4(world, 1.0);
}
"""

_FRAGMENT_SHADER = """
#version 330
uniform sampler2DArray u_patterns;
uniform float u_tile_m[16];
in vec3 v_pat_pos;
in vec3 v_pat_normal;
in vec3 v_color;
flat in int v_id;
flat in int v_layer_h;
flat in int v_layer_v;
layout(location = 0) out vec4 f_color;
layout(location = 1) out int f_id;

void main() {
    vec3 a = abs(v_pat_normal);
    bool up = a.y >= a.x && a.y >= a.z;
    int layer = up ? v_layer_h : v_layer_v;
    vec3 color = v_color;
    if (layer >= 0) {
        // Face coordinates in metres: drop the dominant normal axis.
        vec2 uv = up ? v_pat_pos.xz : (a.x >= a.z ? v_pat_pos.zy : v_pat_pos.xy);
        color *= 2.0 * texture(u_patterns, vec3(uv / u_tile_m[layer], float(layer))).r;
    }
    f_color = vec4(min(color, vec3(1.0)), 1.0);
    f_id = v_id + 1;
}
"""

_KEY_DIR = np.array([0.3, 1.0, 0.45]) / np.linalg.norm([0.3, 1.0, 0.45])
_FILL_DIR = np.array([-0.6, 0.35, -0.5]) / np.linalg.norm([-0.6, 0.35, -0.5])


def vertex_normals(vertices: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """Unit per-vertex normals of a triangle mesh: the area-weighted sum of the normals of
    the faces around each vertex (counter-clockwise faces point outward).

    Args:
        vertices: ``(V, 3)`` positions.
        faces: ``(F, 3)`` vertex indices.

    Returns:
        ``float32 (V, 3)``; vertices in no face (or only in degenerate ones) get ``+Y``.
    """
    v = np.asarray(vertices, dtype=np.float64)
    tri = np.asarray(faces, dtype=np.int64)
    face_n = np.cross(v[tri[:, 1]] - v[tri[:, 0]], v[tri[:, 2]] - v[tri[:, 0]])  # 2 x area
    summed = np.zeros_like(v)
    for corner in range(3):
        for axis in range(3):
            summed[:, axis] += np.bincount(
                tri[:, corner], weights=face_n[:, axis], minlength=len(v)
            )
    length = np.linalg.norm(summed, axis=1)
    good = length > 1e-20
    out = np.tile(np.array([0.0, 1.0, 0.0]), (len(v), 1))
    out[good] = summed[good] / length[good, None]
    return out.astype(np.float32)


def _largest_face_m2(half_extents: np.ndarray) -> float:
    hx, hy, hz = (float(v) for v in half_extents)
    return 4.0 * max(hx * hy, hy * hz, hx * hz)


def _current_context(method: Callable[..., _T]) -> Callable[..., _T]:
    """Run a renderer method with its GL context current (several renderers may live in
    one process; each standalone context must be made current before it is used)."""

    @functools.wraps(method)
    def wrapper(self: ModernglRenderer, *args: Any, **kwargs: Any) -> _T:
        self._require_open()
        with self._ctx:
            return method(self, *args, **kwargs)

    return wrapper


class _InstanceSet:
    """Instance rows of one mesh kind for one group (static, dynamic or body)."""

    def __init__(self, rows: np.ndarray) -> None:
        self.rows = rows
        self.buffer: Any = None
        self.vao: Any = None


def _pack(
    rot: np.ndarray, trans: np.ndarray, scale: np.ndarray, color: np.ndarray, ids: np.ndarray
) -> np.ndarray:
    rows = np.zeros(len(trans), dtype=_INSTANCE_DTYPE)
    if len(trans):
        rows["rot_cols"] = np.swapaxes(rot, -1, -2).reshape(-1, 9)
        rows["trans"] = trans
        rows["scale"] = scale
        rows["color"] = color
        rows["ids"] = ids
    return rows


class _BodyMesh:
    """GL objects of the humanoid mesh: interleaved position/normal VBO, index buffer, VAO."""

    def __init__(self, vbo: Any, ibo: Any, vao: Any, faces: np.ndarray) -> None:
        self.vbo = vbo
        self.ibo = ibo
        self.vao = vao
        self.faces = faces
        self.num_vertices = 0

    def release(self) -> None:
        for obj in (self.vao, self.vbo, self.ibo):
            obj.release()


@functools.lru_cache(maxsize=1)
def _gl_finish() -> Any:
    """``glFinish`` of the EGL driver as a ctypes function, or None where EGL does not hand
    it out. A ctypes call releases the GIL: llvmpipe rasterises a frame when it is made
    to finish it, and doing that here instead of inside moderngl's read-back (which holds
    the GIL) lets other Python threads run meanwhile (the batched vector env's sub-envs).
    The pixels are the same either way."""
    try:
        import ctypes

        egl = ctypes.CDLL("libEGL.so.1")
        egl.eglGetProcAddress.restype = ctypes.c_void_p
        egl.eglGetProcAddress.argtypes = [ctypes.c_char_p]
        address = egl.eglGetProcAddress(b"glFinish")
    except (OSError, AttributeError):
        return None
    return ctypes.CFUNCTYPE(None)(address) if address else None


MESA_DEFAULTS: dict[str, str] = {"LP_NUM_THREADS": "0", "MESA_SHADER_CACHE_DISABLE": "true"}
"""Mesa settings applied with ``os.environ.setdefault`` before the first context: no
llvmpipe rasteriser threads, no shader-cache writer thread (see the module docstring)."""

_THREADED_GL_PID: int | None = None
"""Id of this process (or of the parent it was forked from) once it made a context that
may run driver threads; None while every context was thread-free."""


def apply_mesa_defaults() -> None:
    """Set :data:`MESA_DEFAULTS` in ``os.environ`` where not set (before a context exists)."""
    for key, value in MESA_DEFAULTS.items():
        os.environ.setdefault(key, value)


def _note_context(device: str) -> None:
    """Remember this process when its new context may run driver threads."""
    global _THREADED_GL_PID
    thread_free = (
        "llvmpipe" in device.lower()
        and os.environ.get("LP_NUM_THREADS") == "0"
        and os.environ.get("MESA_SHADER_CACHE_DISABLE", "").lower() in ("true", "1", "yes")
    )
    if not thread_free and _THREADED_GL_PID is None:
        _THREADED_GL_PID = os.getpid()


class ModernglRenderer:
    """Instanced rasteriser on a headless EGL OpenGL 3.3 context.

    Implements :class:`~humanclaw_gym.backends.protocols.BodyMeshRenderBackend`: after
    :meth:`set_body_mesh` the humanoid is drawn as that mesh instead of its link shapes
    until :meth:`clear_body_mesh` or the next :meth:`build`.

    Args:
        width_hint: side of the framebuffer allocated up front (more sizes are created,
            and kept, on first use).
        body_color: RGB colour of the humanoid.
        device_index: EGL device to use (0 = first; Mesa llvmpipe when there is no GPU).

    Raises:
        RenderBackendUnavailable: moderngl is not installed or no EGL context can be made.
    """

    capabilities = RenderCapabilities(
        name="moderngl",
        modes=frozenset({"rgb", "instance", "depth"}),
        part_shapes=frozenset({"box", "cylinder", "sphere", "capsule", "mesh"}),
        body_mesh=True,
    )

    def __init__(
        self,
        width_hint: int = EGO_SIZE_PX,
        body_color: tuple[float, float, float] = DEFAULT_BODY_COLOR,
        device_index: int = 0,
    ) -> None:
        if isinstance(width_hint, bool) or not isinstance(width_hint, int):
            raise ValueError(f"width_hint must be an int, got {width_hint!r}")
        if not 1 <= width_hint <= _MAX_SIZE:
            raise ValueError(f"width_hint must be in [1, {_MAX_SIZE}] pixels, got {width_hint}")
        color = np.asarray(body_color, dtype=np.float64)
        if color.shape != (3,) or np.any(color < 0.0) or np.any(color > 1.0):
            raise ValueError(f"body_color must be 3 numbers in [0, 1], got {body_color!r}")
        self._body_color = color
        self._ctx: Any = None
        self._closed = False
        self._framebuffers: dict[tuple[int, int], tuple[Any, ...]] = {}
        self._sets: dict[tuple[str, str], _InstanceSet] = {}
        self._scene: SceneSpec | None = None
        self._dyn_ids: tuple[int, ...] = ()
        self._dyn_row_of: dict[int, int] = {}
        self._dyn_poses = np.zeros((0, 7))
        self._dyn_rows: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._body_rows: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._body_visible = False
        self._mesh: _BodyMesh | None = None
        self._mesh_instance: Any = None
        self._mesh_layer: Any = None  # scene "mesh" parts (render/mesh_layer.py)

        apply_mesa_defaults()
        if _THREADED_GL_PID is not None and _THREADED_GL_PID != os.getpid():
            raise RenderBackendUnavailable(
                f"this process was forked from process {_THREADED_GL_PID}, whose OpenGL "
                "context may run driver threads that a fork does not copy (a context made "
                "here would wait for them forever); create renderers only after forking, "
                "start worker processes with 'spawn' or 'forkserver' (gym.make_vec(ID, "
                "num_envs=N) does), or keep Mesa llvmpipe with LP_NUM_THREADS=0 and "
                "MESA_SHADER_CACHE_DISABLE=true in the parent"
            )
        try:
            import moderngl
        except ImportError as exc:
            raise RenderBackendUnavailable(
                "the moderngl renderer needs the 'moderngl' and 'glcontext' packages: "
                "pip install 'humanclaw-gym[render]'"
            ) from exc
        self._mgl = moderngl
        try:
            ctx = moderngl.create_standalone_context(
                backend="egl", require=330, device_index=device_index
            )
        except Exception as exc:  # glcontext raises plain Exception subclasses
            raise RenderBackendUnavailable(
                f"no headless EGL OpenGL 3.3 context could be created ({exc}); the moderngl "
                "renderer needs libEGL plus a GL driver: Mesa on Debian/Ubuntu "
                "(apt-get install libegl1 libgl1 libegl-mesa0 libgl1-mesa-dri) or a GPU "
                "vendor's EGL driver"
            ) from exc
        self._ctx = ctx
        try:
            with ctx:
                self._setup(moderngl, width_hint)
        except Exception:
            self.close()
            raise
        _note_context(self.device)

    def _setup(self, moderngl: Any, width_hint: int) -> None:
        """Compile the program, upload meshes and patterns (context current)."""
        ctx = self._ctx
        self.device = str(ctx.info.get("GL_RENDERER", "unknown"))
        self._program = ctx.program(vertex_shader=_VERTEX_SHADER, fragment_shader=_FRAGMENT_SHADER)
        for name, value in (("u_key_dir", _KEY_DIR), ("u_fill_dir", _FILL_DIR)):
            if name in self._program:
                self._program[name].value = tuple(float(v) for v in value)
        self._meshes: dict[str, tuple[Any, Any]] = {}
        for kind in MESH_KINDS:
            vertices, indices = unit_mesh(kind)
            self._meshes[kind] = (ctx.buffer(vertices.tobytes()), ctx.buffer(indices.tobytes()))
        patterns = pattern_layers()
        n_layers, size = patterns.images.shape[0], patterns.images.shape[1]
        if n_layers > 16:
            raise ValueError(f"at most 16 pattern layers fit the shader, got {n_layers}")
        self._patterns = patterns
        self._pattern_texture = ctx.texture_array(
            (size, size, n_layers), 1, patterns.images.tobytes(), dtype="f1"
        )
        self._pattern_texture.build_mipmaps()
        self._pattern_texture.filter = (moderngl.LINEAR_MIPMAP_LINEAR, moderngl.LINEAR)
        self._pattern_texture.repeat_x = True
        self._pattern_texture.repeat_y = True
        tile_m = np.ones(16, dtype=np.float32)
        tile_m[:n_layers] = patterns.tile_m
        if "u_tile_m" in self._program:
            self._program["u_tile_m"].write(tile_m.tobytes())
        if "u_patterns" in self._program:
            self._program["u_patterns"].value = 0
        if "u_hidden" in self._program:
            self._program["u_hidden"].value = 1
        self._hidden_texture: Any = None
        self._pelvis: np.ndarray | None = None
        self._framebuffer(width_hint, width_hint)
        self._prepare_body()

    # ----------------------------------------------------------------------------------
    # GL helpers
    # ----------------------------------------------------------------------------------
    def _framebuffer(self, width: int, height: int) -> tuple[Any, ...]:
        key = (width, height)
        if key not in self._framebuffers:
            ctx = self._ctx
            color = ctx.renderbuffer((width, height), components=4, dtype="f1")
            ids = ctx.renderbuffer((width, height), components=1, dtype="i4")
            depth = ctx.depth_renderbuffer((width, height))
            fbo_rgb = ctx.framebuffer(color_attachments=[color], depth_attachment=depth)
            fbo_ids = ctx.framebuffer(color_attachments=[ids])
            fbo_both = ctx.framebuffer(color_attachments=[color, ids], depth_attachment=depth)
            self._framebuffers[key] = (fbo_rgb, fbo_ids, fbo_both, color, ids, depth)
        return self._framebuffers[key]

    def _upload(self, group: str, kind: str, rows: np.ndarray) -> None:
        old = self._sets.pop((group, kind), None)
        if old is not None:
            self._release_set(old)
        if len(rows) == 0:
            return
        inst = _InstanceSet(rows)
        vbo, ibo = self._meshes[kind]
        inst.buffer = self._ctx.buffer(rows.tobytes(), dynamic=group != "static")
        inst.vao = self._ctx.vertex_array(
            self._program,
            [
                (vbo, "3f 3f", "in_pos", "in_normal"),
                (inst.buffer, _INSTANCE_FORMAT, *_INSTANCE_ATTRS),
            ],
            index_buffer=ibo,
            index_element_size=4,
        )
        self._sets[(group, kind)] = inst

    @staticmethod
    def _release_set(inst: _InstanceSet) -> None:
        for obj in (inst.vao, inst.buffer):
            if obj is not None:
                obj.release()
        inst.vao = inst.buffer = None

    def _require_open(self) -> None:
        if self._closed or self._ctx is None:
            raise RuntimeError("ModernglRenderer is closed")

    def _material_flags(self, material: str) -> int:
        """Pack a material's texture layers into the instance's second id
        (bits 0-7: up-facing layer + 1, bits 8-15: other faces' layer + 1)."""
        layer_h, layer_v = self._patterns.layers_of(material)
        return (layer_h + 1) | ((layer_v + 1) << 8)

    # ----------------------------------------------------------------------------------
    # Scene and body
    # ----------------------------------------------------------------------------------
    @_current_context
    def build(self, scene: SceneSpec) -> None:
        """Upload the scene: static parts once, dynamic parts at their scene poses.

        Calling it again replaces the previous scene; the humanoid stays hidden until the
        next :meth:`set_body_pose` (a body mesh is forgotten, faces included).
        """
        self._require_open()
        for key in [k for k in self._sets if k[0] in ("static", "dynamic")]:
            self._release_set(self._sets.pop(key))
        static: dict[str, list[tuple[Any, ...]]] = {k: [] for k in MESH_KINDS}
        dynamic: dict[str, list[tuple[Any, ...]]] = {k: [] for k in MESH_KINDS}
        dyn_ids: list[int] = []
        for obj in scene.objects:
            rot = obj.rotation()
            if obj.dynamic:
                dyn_ids.append(obj.object_id)
            for part in obj.parts:
                if part.shape == "mesh":  # drawn by the mesh layer
                    continue
                scale = part.local_half_extents()
                flags = self._material_flags(part.material)
                if obj.category not in UNCUT_CATEGORIES:
                    flags |= _CUTTABLE_FLAG
                    if obj.category not in CUT_THROUGH_CATEGORIES:
                        flags |= _WHOLE_FLAG
                if obj.dynamic:
                    row = (
                        len(dyn_ids) - 1,
                        np.asarray(part.offset),
                        scale,
                        part.color,
                        obj.object_id,
                        flags,
                    )
                    dynamic[part.shape].append(row)
                else:
                    centre = obj.part_world_center(part)
                    flags |= _STATIC_FLAG
                    row = (rot, centre, scale, part.color, obj.object_id, flags)
                    static[part.shape].append(row)
        for kind in MESH_KINDS:
            # Small parts first, floors and walls last: big surfaces hidden behind furniture
            # then fail the early depth test instead of being shaded and overdrawn.
            entries = sorted(static[kind], key=lambda e: _largest_face_m2(e[2]))
            if entries:
                rows = _pack(
                    np.array([e[0] for e in entries]),
                    np.array([e[1] for e in entries]),
                    np.array([e[2] for e in entries]),
                    np.array([e[3] for e in entries]),
                    np.array([(e[4], e[5]) for e in entries]),
                )
                self._upload("static", kind, rows)
        self._dyn_ids = tuple(dyn_ids)
        self._dyn_row_of = {oid: i for i, oid in enumerate(dyn_ids)}
        self._dyn_poses = np.array(
            [
                [*scene.object_by_id(oid).position, *scene.object_by_id(oid).quat_xyzw()]
                for oid in dyn_ids
            ]
        ).reshape(-1, 7)
        self._dyn_rows = {}
        for kind in MESH_KINDS:
            entries = dynamic[kind]
            if not entries:
                continue
            index = np.array([e[0] for e in entries], dtype=np.int64)
            offsets = np.array([e[1] for e in entries])
            rows = _pack(
                np.tile(np.eye(3), (len(entries), 1, 1)),
                offsets,
                np.array([e[2] for e in entries]),
                np.array([e[3] for e in entries]),
                np.array([(e[4], e[5]) for e in entries]),
            )
            self._dyn_rows[kind] = (index, offsets)
            self._upload("dynamic", kind, rows)
        self._build_mesh_layer(scene)
        self._build_cut_table(scene)
        self._scene = scene
        self._body_visible = False
        self._pelvis = None
        self._drop_mesh()
        self._write_dynamic()

    def _build_cut_table(self, scene: SceneSpec) -> None:
        """The objects a cutaway removes whole (their ids, bounding boxes) and the per-id
        texture the vertex shader reads (``u_hidden``: 1 where hidden this image)."""
        whole = [
            o
            for o in scene.objects
            if o.category not in UNCUT_CATEGORIES and o.category not in CUT_THROUGH_CATEGORIES
        ]
        self._whole_ids = np.array([o.object_id for o in whole], dtype=np.int64)
        boxes = [o.aabb() for o in whole]
        self._whole_lo = np.array([b[0] for b in boxes], dtype=np.float64).reshape(-1, 3)
        self._whole_hi = np.array([b[1] for b in boxes], dtype=np.float64).reshape(-1, 3)
        self._whole_dyn = np.array([o.dynamic for o in whole], dtype=bool)
        size = max([o.object_id for o in scene.objects], default=0) + 2
        if self._hidden_texture is not None:
            self._hidden_texture.release()
        self._hidden = np.zeros(size, dtype=np.uint8)
        self._hidden_texture = self._ctx.texture((size, 1), 1, self._hidden.tobytes(), dtype="u1")
        self._hidden_texture.filter = (self._mgl.NEAREST, self._mgl.NEAREST)

    def _update_hidden(self, plane: np.ndarray | None) -> None:
        """Mark the objects the cutaway removes whole for this image (see
        :func:`~humanclaw_gym.render.cameras.cut_away_whole`)."""
        hidden = np.zeros_like(self._hidden)
        if plane is not None and len(self._whole_ids):
            lo, hi = self._whole_lo.copy(), self._whole_hi.copy()
            if self._whole_dyn.any():  # moving objects: their box follows the current pose
                for k in np.flatnonzero(self._whole_dyn):
                    oid = int(self._whole_ids[k])
                    shift = self._dyn_poses[self._dyn_row_of[oid], :3] - np.asarray(
                        self._scene.object_by_id(oid).position
                    )
                    lo[k] += shift
                    hi[k] += shift
            hide = cut_away_whole(
                plane, 0.5 * (lo + hi), lo[:, [0, 2]], hi[:, [0, 2]], self._pelvis
            )
            hidden[self._whole_ids[hide] + 1] = 1
        if not np.array_equal(hidden, self._hidden):
            self._hidden = hidden
            self._hidden_texture.write(hidden.tobytes())

    def _build_mesh_layer(self, scene: SceneSpec) -> None:
        """Hand the scene's mesh parts to the mesh layer (created on first need)."""
        has_meshes = any(part.shape == "mesh" for obj in scene.objects for part in obj.parts)
        if not has_meshes:
            if self._mesh_layer is not None:
                self._mesh_layer.release_scene()
            return
        if self._mesh_layer is None:
            from humanclaw_gym.render.mesh_layer import MeshLayer

            self._mesh_layer = MeshLayer(self._ctx, _KEY_DIR, _FILL_DIR)
        self._mesh_layer.build(scene)

    def _prepare_body(self) -> None:
        """Split the 24 link shapes into mesh instances (link index, local pose, scale)."""
        from humanclaw_gym.render.body_shapes import drawn_link_shapes

        entries: dict[str, list[tuple[int, np.ndarray, np.ndarray, np.ndarray]]] = {
            k: [] for k in MESH_KINDS
        }
        for shape in drawn_link_shapes():
            rot = quat_xyzw_to_matrix(np.asarray(shape.quat_xyzw))
            off = np.asarray(shape.offset_m, dtype=np.float64)
            if shape.kind == "box":
                entries["box"].append((shape.joint, rot, off, np.asarray(shape.half_extents)))
            elif shape.kind == "sphere":
                entries["sphere"].append((shape.joint, rot, off, np.full(3, shape.radius)))
            elif shape.kind == "capsule":
                r, h = shape.radius, shape.half_length
                entries["cylinder"].append((shape.joint, rot @ _Y_TO_Z, off, np.array([r, h, r])))
                axis = rot[:, 2] * h
                for end in (off + axis, off - axis):
                    entries["sphere"].append((shape.joint, rot, end, np.full(3, r)))
            else:
                raise ValueError(
                    f"link shape kind {shape.kind!r} of joint {shape.joint} is not drawable"
                )
        color = self._body_color
        for kind, items in entries.items():
            if not items:
                continue
            links = np.array([e[0] for e in items], dtype=np.int64)
            rots = np.array([e[1] for e in items])
            offs = np.array([e[2] for e in items])
            scales = np.array([e[3] for e in items])
            self._body_rows[kind] = (links, rots, offs)
            rows = _pack(
                rots,
                offs,
                scales,
                np.tile(color, (len(items), 1)),
                np.tile([0, self._material_flags("plain")], (len(items), 1)),
            )
            self._upload("body", kind, rows)
        mesh_row = _pack(
            np.eye(3)[None],
            np.zeros((1, 3)),
            np.ones((1, 3)),
            color[None],
            np.array([[0, self._material_flags("plain")]]),
        )
        self._mesh_instance = self._ctx.buffer(mesh_row.tobytes())

    @_current_context
    def set_body_pose(self, link_poses: np.ndarray) -> None:
        """Place the humanoid from ``(24, 7)`` world link poses (and make it visible).

        While a body mesh is set the link shapes stay hidden; their poses are still kept.
        """
        self._require_open()
        if self._scene is None:
            raise RuntimeError("ModernglRenderer.set_body_pose called before build()")
        poses = check_link_poses(link_poses)
        self._pelvis = poses[0, :3].copy()
        link_rot = quat_xyzw_to_matrix(poses[:, 3:7])
        for kind, (links, rots, offs) in self._body_rows.items():
            inst = self._sets[("body", kind)]
            r_link = link_rot[links]
            inst.rows["rot_cols"] = np.swapaxes(r_link @ rots, -1, -2).reshape(-1, 9)
            inst.rows["trans"] = poses[links, :3] + np.einsum("nij,nj->ni", r_link, offs)
            inst.buffer.write(inst.rows.tobytes())
        self._body_visible = True

    @_current_context
    def set_body_mesh(self, vertices: np.ndarray, faces: np.ndarray | None = None) -> None:
        """Draw the humanoid as a triangle mesh instead of its link shapes.

        Args:
            vertices: ``(V, 3)`` world positions (metres, Y up), any float dtype, finite.
            faces: ``(F, 3)`` integer indices in ``[0, V)``, counter-clockwise seen from
                outside; required on the first call after :meth:`build` /
                :meth:`clear_body_mesh`, ``None`` keeps the previous ones (same ``V``).

        Both arrays are copied. The mesh shows in every image until :meth:`clear_body_mesh`
        or the next :meth:`build`. Its pixels have the humanoid's id 0 and body colour.

        Raises:
            ValueError: bad shape, dtype, non-finite vertices or a face index out of range;
                raised before any GL state changes.
            RuntimeError: before :meth:`build` or after :meth:`close`.
        """
        if self._scene is None:
            raise RuntimeError("ModernglRenderer.set_body_mesh called before build()")
        mesh = self._mesh
        verts, tri = check_body_mesh(vertices, faces, None if mesh is None else mesh.num_vertices)
        if tri is not None and mesh is not None and np.array_equal(tri, mesh.faces):
            tri = None  # same topology: only the vertex buffer changes
        used = tri if tri is not None else mesh.faces  # type: ignore[union-attr]
        data = np.concatenate([verts, vertex_normals(verts, used)], axis=1)
        if tri is not None:
            ctx = self._ctx
            vbo = ctx.buffer(data.tobytes(), dynamic=True)
            ibo = ctx.buffer(tri.tobytes())
            vao = ctx.vertex_array(
                self._program,
                [
                    (vbo, "3f 3f", "in_pos", "in_normal"),
                    (self._mesh_instance, _INSTANCE_FORMAT, *_INSTANCE_ATTRS),
                ],
                index_buffer=ibo,
                index_element_size=4,
            )
            self._drop_mesh()
            mesh = self._mesh = _BodyMesh(vbo, ibo, vao, tri)
        else:
            mesh.vbo.write(data.tobytes())  # type: ignore[union-attr]
        mesh.num_vertices = len(verts)  # type: ignore[union-attr]

    @_current_context
    def clear_body_mesh(self) -> None:
        """Forget the body mesh (faces too); the link shapes are drawn again once posed."""
        self._drop_mesh()

    def _drop_mesh(self) -> None:
        if self._mesh is not None:
            self._mesh.release()
            self._mesh = None

    @_current_context
    def set_object_poses(self, object_ids: Sequence[int], poses: np.ndarray) -> None:
        """Move dynamic objects to ``(M, 7)`` world poses (rows aligned with ``object_ids``)."""
        self._require_open()
        if self._scene is None:
            raise RuntimeError("ModernglRenderer.set_object_poses called before build()")
        ids, arr = check_object_poses(object_ids, poses, self._dyn_row_of, self._scene.scene_id)
        for row, oid in enumerate(ids):
            self._dyn_poses[self._dyn_row_of[oid]] = arr[row]
        self._write_dynamic()
        if self._mesh_layer is not None:
            self._mesh_layer.set_poses(ids, arr)

    def _write_dynamic(self) -> None:
        if not self._dyn_rows:
            return
        rot = quat_xyzw_to_matrix(self._dyn_poses[:, 3:7])
        for kind, (index, offsets) in self._dyn_rows.items():
            inst = self._sets[("dynamic", kind)]
            r = rot[index]
            inst.rows["rot_cols"] = np.swapaxes(r, -1, -2).reshape(-1, 9)
            inst.rows["trans"] = self._dyn_poses[index, :3] + np.einsum("nij,nj->ni", r, offsets)
            inst.buffer.write(inst.rows.tobytes())

    # ----------------------------------------------------------------------------------
    # Rendering
    # ----------------------------------------------------------------------------------
    @_current_context
    def render(self, camera: Camera, modes: Iterable[str] = frozenset({"rgb"})) -> RenderResult:
        """Draw the scene (and the humanoid once posed, or its mesh once set) from ``camera``.

        Returns:
            The images of ``modes`` plus ``"rgb"``: ``"rgb"`` and ``"instance"`` from two
            render targets of one pass, ``"depth"`` read back from that pass's depth
            buffer (clipped-away cutaway parts leave no depth); see
            :data:`~humanclaw_gym.backends.protocols.RENDER_MODES`.

        Raises:
            ValueError: a mode this backend does not declare.
        """
        wanted = check_render_modes(modes, self.capabilities)
        instance, depth = "instance" in wanted, "depth" in wanted
        self._require_open()
        if self._scene is None:
            raise RuntimeError("ModernglRenderer.render called before build()")
        validate_camera(camera, _MAX_SIZE)
        mgl = self._mgl
        ctx = self._ctx
        w, h = int(camera.width), int(camera.height)
        fbo_rgb, fbo_ids, fbo_both, *_ = self._framebuffer(w, h)
        if instance:
            fbo_ids.use()
            fbo_ids.clear(0.0, 0.0, 0.0, 0.0)
        fbo_rgb.use()
        fbo_rgb.clear(*SKY_COLOR, 1.0, depth=1.0)
        target = fbo_both if instance else fbo_rgb
        target.use()
        ctx.viewport = (0, 0, w, h)
        ctx.enable(mgl.DEPTH_TEST | mgl.CULL_FACE)
        ctx.enable_direct(_GL_CLIP_DISTANCE0)
        ctx.front_face = "ccw"
        ctx.cull_face = "back"
        view_proj = projection_matrix(camera) @ view_matrix(camera)
        self._program["u_view_proj"].write(view_proj.T.astype(np.float32).tobytes())
        plane = cutaway_plane_of(camera)
        self._program["u_cut_plane"].value = _NO_CUT if plane is None else tuple(plane.tolist())
        self._update_hidden(plane)
        self._pattern_texture.use(location=0)
        self._hidden_texture.use(location=1)
        for group in _DRAW_ORDER:  # roughly front to back: the body, small movables, the rest
            if group == "body" and self._mesh is not None:
                self._mesh.vao.render(mgl.TRIANGLES, instances=1)
                continue
            for kind in MESH_KINDS:
                inst = self._sets.get((group, kind))
                if inst is None or (group == "body" and not self._body_visible):
                    continue
                inst.vao.render(mgl.TRIANGLES, instances=len(inst.rows))
        if self._mesh_layer is not None:
            self._mesh_layer.render(view_proj, _NO_CUT if plane is None else tuple(plane.tolist()))
        finish = _gl_finish()
        if finish is not None:  # rasterise now, without holding the GIL
            finish()
        rgb_bytes = target.read(components=3, attachment=0, alignment=1, dtype="f1")
        rgb = np.frombuffer(rgb_bytes, dtype=np.uint8).reshape(h, w, 3)[::-1].copy()
        ids = None
        if instance:
            id_bytes = target.read(components=1, attachment=1, alignment=1, dtype="i4")
            ids = np.frombuffer(id_bytes, dtype=np.int32).reshape(h, w)[::-1] - np.int32(1)
            ids = np.ascontiguousarray(ids, dtype=np.int32)
        depth_m = None
        if depth:
            z_bytes = target.read(components=1, attachment=-1, alignment=1, dtype="f4")
            window = np.frombuffer(z_bytes, dtype=np.float32).reshape(h, w)[::-1]
            depth_m = depth_from_window(window, camera)
        return RenderResult(rgb=rgb, instance=ids, depth=depth_m)

    def close(self) -> None:
        """Release every GL object and the context. Idempotent."""
        if self._closed:
            return
        self._closed = True
        ctx, self._ctx = self._ctx, None
        if ctx is not None:
            with ctx:
                self._release_objects()
            ctx.release()
        self._scene = None

    def _release_objects(self) -> None:
        self._drop_mesh()
        if self._mesh_layer is not None:
            self._mesh_layer.release()
            self._mesh_layer = None
        if self._mesh_instance is not None:
            self._mesh_instance.release()
            self._mesh_instance = None
        for inst in self._sets.values():
            self._release_set(inst)
        self._sets.clear()
        for fbos in self._framebuffers.values():
            for obj in fbos:
                obj.release()
        self._framebuffers.clear()
        for vbo, ibo in getattr(self, "_meshes", {}).values():
            vbo.release()
            ibo.release()
        for name in ("_pattern_texture", "_hidden_texture", "_program"):
            obj = getattr(self, name, None)
            if obj is not None:
                obj.release()
                setattr(self, name, None)

    def __enter__(self) -> ModernglRenderer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:  # pragma: no cover - best effort at interpreter exit
        try:
            self.close()
        except Exception:
            pass
