"""Triangle meshes of imported scenes for the moderngl renderer (``"mesh"`` parts).

The primitive renderer draws instanced boxes, cylinders and spheres; a mesh scene (e.g.
HSSD) is instead a few hundred assets with their own geometry and textures. This layer
owns their GL objects:

* Static objects are baked into world space at :meth:`MeshLayer.build` and grouped into
  one batch per base-colour texture plus one batch for all untextured primitives (vertex
  colours), so a frame costs one draw call per distinct texture.
* Dynamic objects keep object-frame vertices, one batch per primitive, drawn with the
  object's current pose as the model matrix (:meth:`MeshLayer.set_poses`).

Vertex data: position, normal, UV, display colour, object id and a cut flag. Shading
matches the primitives' (sky/ground hemisphere ambient plus a warm key and a cool fill
light, Lambert) but per fragment, both faces lit (meshes are drawn without back-face
culling: thin leaves and one-sided walls stay visible from behind). glTF ``MASK`` alpha is
honoured; other transparency is drawn opaque. The instance image gets ``id + 1`` through
the same second render target as the primitives. A cutaway plane clips cuttable vertices:
objects outside :data:`~humanclaw_gym.render.cameras.UNCUT_CATEGORIES`, and of the stage
every vertex but the upward-facing ones (its floors).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from humanclaw_gym.render.cameras import UNCUT_CATEGORIES

__all__ = ["MeshLayer", "mesh_vertex_data"]

_VERTEX_DTYPE = np.dtype(
    [
        ("pos", np.float32, (3,)),
        ("nrm", np.float32, (3,)),
        ("uv", np.float32, (2,)),
        ("col", np.float32, (3,)),
        ("ids", np.int32, (2,)),
    ]
)
_VERTEX_FORMAT = "3f 3f 2f 3f 2i"
_VERTEX_ATTRS = ("in_pos", "in_normal", "in_uv", "in_color", "in_ids")

_VERTEX_SHADER = """
#version 330
uniform mat4 u_view_proj;
uniform mat4 u_model;
uniform vec4 u_cut_plane;
in vec3 in_pos;
in vec3 in_normal;
in vec2 in_uv;
in vec3 in_color;
in ivec2 in_ids;
out vec3 v_normal;
out vec2 v_uv;
out vec3 v_color;
flat out int v_id;

void main() {
    vec4 world = u_model * vec4(in_pos, 1.0);
    gl_ClipDistance[0] = in_ids.y != 0 ? dot(u_cut_plane.xyz, world.xyz) + u_cut_plane.w : 1.0;
    v_normal = mat3(u_model) * in_normal;
    v_uv = in_uv;
    v_color = in_color;
    v_id = in_ids.x;
    gl_Position = u_view_proj * world;
}
"""

_FRAGMENT_SHADER = """
#version 330
uniform sampler2D u_texture;
uniform int u_textured;
uniform float u_alpha_cutoff;
uniform vec3 u_key_dir;
uniform vec3 u_fill_dir;
in vec3 v_normal;
in vec2 v_uv;
in vec3 v_color;
flat in int v_id;
layout(location = 0) out vec4 f_color;
layout(location = 1) out int f_id;

void main() {
    vec3 color = v_color;
    if (u_textured != 0) {
        vec4 t = texture(u_texture, v_uv);
        if (t.a < u_alpha_cutoff) discard;
        color *= t.rgb;
    }
    vec3 n = normalize(v_normal);
    if (!gl_FrontFacing) n = -n;
    vec3 ambient = mix(vec3(0.50, 0.48, 0.46), vec3(0.68, 0.69, 0.72), 0.5 + 0.5 * n.y);
    vec3 light = ambient
        + 0.36 * max(dot(n, u_key_dir), 0.0) * vec3(1.0, 0.97, 0.92)
        + 0.28 * max(dot(n, u_fill_dir), 0.0) * vec3(0.95, 0.97, 1.0);
    f_color = vec4(min(color * light, vec3(1.0)), 1.0);
    f_id = v_id + 1;
}
"""


def _quat_matrix(q: np.ndarray) -> np.ndarray:
    x, y, z, w = (float(v) for v in q)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )


def mesh_vertex_data(obj: Any, world: bool) -> list[tuple[Any, np.ndarray, np.ndarray]]:
    """Per drawable primitive of an object's mesh parts: ``(primitive, vertex records,
    int32 (F, 3) faces)``; positions and normals in the world at the object's scene pose
    (``world=True``) or in the object frame.

    Args:
        obj: a :class:`~humanclaw_gym.scenes.spec.SceneObject`.
        world: bake the object's pose into the vertices.
    """
    from humanclaw_gym.scenes.meshes import load_part_mesh, place_vertices

    out = []
    rot = obj.rotation() if world else np.eye(3)
    pos = np.asarray(obj.position) if world else np.zeros(3)
    for part in obj.parts:
        ref = part.mesh
        if ref is None:
            continue
        asset = load_part_mesh(ref)
        r_part = ref.rotation_matrix()
        normal_m = rot @ r_part @ np.diag(1.0 / np.asarray(ref.scale))
        for prim in asset.primitives:
            rec = np.zeros(len(prim.positions), dtype=_VERTEX_DTYPE)
            rec["pos"] = pos + place_vertices(prim.positions, ref) @ rot.T
            n = prim.normals.astype(np.float64) @ normal_m.T
            rec["nrm"] = n / np.maximum(np.linalg.norm(n, axis=1, keepdims=True), 1e-12)
            if prim.uvs is not None:
                rec["uv"] = prim.uvs
            rec["col"] = prim.colors
            rec["ids"][:, 0] = obj.object_id
            if obj.category == "stage":
                cut = rec["nrm"][:, 1] < 0.7  # floors stay, the rest may be cut away
            else:
                cut = np.full(len(rec), obj.category not in UNCUT_CATEGORIES)
            if not world:  # dynamic objects: the cut flag by category only
                cut = np.full(len(rec), obj.category not in UNCUT_CATEGORIES)
            rec["ids"][:, 1] = cut.astype(np.int32)
            out.append((prim, rec, prim.indices.astype(np.int32)))
    return out


class _Batch:
    def __init__(self, vao: Any, vbo: Any, ibo: Any, texture: Any, cutoff: float, row: int) -> None:
        self.vao = vao
        self.vbo = vbo
        self.ibo = ibo
        self.texture = texture
        self.cutoff = cutoff
        self.row = row  # dynamic batches: row of the pose table; static: -1

    def release(self) -> None:
        for obj in (self.vao, self.vbo, self.ibo):
            obj.release()


class MeshLayer:
    """GL objects and draw calls of a scene's mesh parts (see the module docstring).

    Args:
        ctx: the moderngl context (current while any method runs).
        key_dir / fill_dir: unit light directions (the primitives' lights).
    """

    def __init__(self, ctx: Any, key_dir: np.ndarray, fill_dir: np.ndarray) -> None:
        self._ctx = ctx
        self._program = ctx.program(vertex_shader=_VERTEX_SHADER, fragment_shader=_FRAGMENT_SHADER)
        for name, value in (("u_key_dir", key_dir), ("u_fill_dir", fill_dir)):
            if name in self._program:
                self._program[name].value = tuple(float(v) for v in value)
        if "u_texture" in self._program:
            self._program["u_texture"].value = 1
        self._white = ctx.texture((1, 1), 4, bytes([255, 255, 255, 255]))
        self._static: list[_Batch] = []
        self._dynamic: list[_Batch] = []
        self._textures: dict[int, Any] = {}
        self._dyn_row_of: dict[int, int] = {}
        self._poses = np.zeros((0, 7))
        self.triangles = 0

    @property
    def empty(self) -> bool:
        return not self._static and not self._dynamic

    # ----------------------------------------------------------------------------------
    def _texture(self, image: np.ndarray) -> Any:
        key = id(image)
        tex = self._textures.get(key)
        if tex is None:
            import moderngl

            h, w = image.shape[:2]
            # image row 0 is the top; GL's first row is t = 0 (the bottom of UV space)
            tex = self._ctx.texture((w, h), 4, np.ascontiguousarray(image[::-1]).tobytes())
            tex.build_mipmaps()
            tex.filter = (moderngl.LINEAR_MIPMAP_LINEAR, moderngl.LINEAR)
            tex.repeat_x = True
            tex.repeat_y = True
            self._textures[key] = (tex, image)  # keep the array alive: its id is the key
            return tex
        return tex[0]

    def _batch(
        self, rec: np.ndarray, faces: np.ndarray, texture: Any, cutoff: float, row: int
    ) -> _Batch:
        ctx = self._ctx
        vbo = ctx.buffer(rec.tobytes())
        ibo = ctx.buffer(np.ascontiguousarray(faces, dtype=np.int32).tobytes())
        vao = ctx.vertex_array(
            self._program,
            [(vbo, _VERTEX_FORMAT, *_VERTEX_ATTRS)],
            index_buffer=ibo,
            index_element_size=4,
        )
        return _Batch(vao, vbo, ibo, texture, cutoff, row)

    def build(self, scene: Any) -> None:
        """Replace the layer's content with ``scene``'s mesh parts (objects without mesh
        parts are the primitive renderer's)."""
        self.release_scene()
        groups: dict[Any, list[tuple[np.ndarray, np.ndarray]]] = {}
        cutoffs: dict[Any, float] = {}
        dyn_ids: list[int] = []
        poses: list[list[float]] = []
        triangles = 0
        for obj in scene.objects:
            if not any(part.mesh is not None for part in obj.parts):
                continue
            if obj.dynamic:
                row = len(dyn_ids)
                dyn_ids.append(obj.object_id)
                poses.append([*obj.position, *obj.quat_xyzw()])
                for prim, rec, faces in mesh_vertex_data(obj, world=False):
                    tex = None if prim.texture is None else self._texture(prim.texture)
                    cutoff = -1.0 if prim.alpha_cutoff is None else prim.alpha_cutoff
                    self._dynamic.append(self._batch(rec, faces, tex, cutoff, row))
                    triangles += len(faces)
                continue
            for prim, rec, faces in mesh_vertex_data(obj, world=True):
                key = None if prim.texture is None else id(prim.texture)
                if key is not None:
                    self._texture(prim.texture)
                    cutoffs[key] = -1.0 if prim.alpha_cutoff is None else prim.alpha_cutoff
                groups.setdefault(key, []).append((rec, faces))
                triangles += len(faces)
        for key, items in groups.items():
            base = np.cumsum([0] + [len(r) for r, _ in items[:-1]])
            rec = np.concatenate([r for r, _ in items])
            faces = np.concatenate([f + np.int32(b) for (_, f), b in zip(items, base, strict=True)])
            tex = None if key is None else self._textures[key][0]
            self._static.append(self._batch(rec, faces, tex, cutoffs.get(key, -1.0), -1))
        self._dyn_row_of = {oid: i for i, oid in enumerate(dyn_ids)}
        self._poses = np.array(poses, dtype=np.float64).reshape(-1, 7)
        self.triangles = triangles

    def set_poses(self, object_ids: Sequence[int], poses: np.ndarray) -> None:
        """Move dynamic mesh objects (ids the layer does not hold are ignored: they are
        primitive objects)."""
        for oid, pose in zip(object_ids, np.asarray(poses, dtype=np.float64), strict=True):
            row = self._dyn_row_of.get(int(oid))
            if row is not None:
                self._poses[row] = pose

    def render(self, view_proj: np.ndarray, cut_plane: tuple[float, ...]) -> None:
        """Draw every batch into the bound framebuffer (depth test on, culling off)."""
        import moderngl

        if self.empty:
            return
        ctx = self._ctx
        prog = self._program
        prog["u_view_proj"].write(np.asarray(view_proj, dtype=np.float32).T.tobytes())
        prog["u_cut_plane"].value = tuple(float(v) for v in cut_plane)
        ctx.disable(moderngl.CULL_FACE)
        identity = np.eye(4, dtype=np.float32)
        prog["u_model"].write(identity.tobytes())
        for batch in self._static:
            self._draw(batch)
        for batch in self._dynamic:
            pose = self._poses[batch.row]
            model = np.eye(4)
            model[:3, :3] = _quat_matrix(pose[3:7])
            model[:3, 3] = pose[:3]
            prog["u_model"].write(model.T.astype(np.float32).tobytes())
            self._draw(batch)
        ctx.enable(moderngl.CULL_FACE)

    def _draw(self, batch: _Batch) -> None:
        import moderngl

        prog = self._program
        if batch.texture is not None:
            batch.texture.use(location=1)
            prog["u_textured"].value = 1
        else:
            self._white.use(location=1)
            prog["u_textured"].value = 0
        if "u_alpha_cutoff" in prog:
            prog["u_alpha_cutoff"].value = float(batch.cutoff)
        batch.vao.render(moderngl.TRIANGLES)

    # ----------------------------------------------------------------------------------
    def release_scene(self) -> None:
        for batch in self._static + self._dynamic:
            batch.release()
        self._static = []
        self._dynamic = []
        for tex, _ in self._textures.values():
            tex.release()
        self._textures = {}
        self._dyn_row_of = {}
        self._poses = np.zeros((0, 7))
        self.triangles = 0

    def release(self) -> None:
        self.release_scene()
        self._white.release()
        self._program.release()
