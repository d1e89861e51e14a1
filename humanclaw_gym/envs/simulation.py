"""The simulation layer: physics, renderer and motion generator composed for one env.

:class:`Simulation` owns building the three backends of a :class:`BackendConfig` (lazily,
with the renderer fallback of ``renderer="auto"``), loading scenes (from the config's
``scene_dataset`` when it holds the scene, else the shipped / generated homes), placing the humanoid for
an episode, executing one skill (motion generation + half-physics, frame by frame) and
rendering a camera view of the current state. It knows nothing of episodes' goals, the
Gymnasium API or observers: the env (:mod:`humanclaw_gym.envs.find_nav_interact`) drives it.

Renders are cheap to share: the body and object poses are copied to the renderer once per
physics state, whatever number of views (observation, metrics, video) read that state. The
state itself is read through :meth:`Simulation.snapshot`: one :class:`Snapshot` per physics
state, whose parts (realized frame, object poses, link origins, contacts) are queried from
the physics backend at most once, on first read, and shared by every reader (the env's
observer events, the privileged view).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from humanclaw_gym.backends import registry
from humanclaw_gym.backends.config import BackendConfig
from humanclaw_gym.image_sizes import EGO_SIZE_PX, EXO_SIZE_PX

if TYPE_CHECKING:  # pragma: no cover
    from humanclaw_gym.backends.protocols import (
        MotionGenerator,
        PhysicsBackend,
        RenderBackend,
        RenderResult,
    )
    from humanclaw_gym.body.smplx_model import SmplxBody
    from humanclaw_gym.episodes import Episode
    from humanclaw_gym.physics.types import FrameStates
    from humanclaw_gym.scenes.hssd.dataset import SceneDataset
    from humanclaw_gym.scenes.spec import SceneSpec
    from humanclaw_gym.skills import SkillCall

__all__ = ["FRAMES_PER_CHUNK", "Simulation", "Snapshot", "check_sub_env_executable"]

FRAMES_PER_CHUNK = 15
"""Generated 30 Hz frames per skill call (0.5 s)."""


def _frozen(array: np.ndarray) -> np.ndarray:
    """``array`` made read-only: a snapshot's arrays are shared by all of its readers."""
    array.setflags(write=False)
    return array


class Snapshot:
    """The simulated state at one instant, read from the physics backend lazily and once.

    Each attribute is queried on first read and kept; a snapshot serves every reader of
    the same physics state (observer events, the privileged view), so, e.g., the contact
    query of a frame runs once however many observers need contacts. The arrays are
    read-only (shared); copy one to change it. Reading a part the snapshot has not read
    yet after the simulation moved on raises ``RuntimeError`` (it would describe another
    state).

    Attributes:
        realized_frame: ``float64 (75,)`` the humanoid's realized pose.
        object_ids: scene ids of the dynamic objects, the row order of ``object_poses``.
        object_poses: ``float64 (M, 7)`` world poses of the dynamic objects.
        link_origins: ``float64 (P, 3)`` pelvis, articulated root and link origins (the
            final-distance metric's point set).
        link_poses: ``float64 (L, 7)`` world poses ``[x, y, z, qx, qy, qz, qw]`` of the
            body's links (what state sensors read).
        contacts: the contact rows of this state (``CONTACT_DTYPE``); the objects' part
            indices only when the simulation's :attr:`~Simulation.contact_parts` is set.
    """

    def __init__(self, simulation: Simulation, version: int) -> None:
        self._simulation = simulation
        self.version = version

    def _physics(self, part: str) -> PhysicsBackend:
        sim = self._simulation
        if sim.state_version != self.version:
            raise RuntimeError(
                f"Snapshot.{part}: the simulation has moved on since this snapshot was taken"
            )
        if sim.physics is None:
            raise RuntimeError(f"Snapshot.{part}: no physics backend is built")
        return sim.physics

    @cached_property
    def realized_frame(self) -> np.ndarray:
        return _frozen(self._physics("realized_frame").realized_frame())

    @cached_property
    def object_ids(self) -> tuple[int, ...]:
        return tuple(self._physics("object_ids").dynamic_object_ids)

    @cached_property
    def object_poses(self) -> np.ndarray:
        return _frozen(self._physics("object_poses").object_poses())

    @cached_property
    def link_origins(self) -> np.ndarray:
        return _frozen(self._physics("link_origins").link_origins())

    @cached_property
    def link_poses(self) -> np.ndarray:
        return _frozen(np.array(self._physics("link_poses").link_poses(), dtype=np.float64))

    @cached_property
    def contacts(self) -> np.ndarray:
        parts = self._simulation.contact_parts
        return _frozen(self._physics("contacts").contacts(parts))


class Simulation:
    """Physics + renderer + motion for one env; see the module docstring.

    Args:
        config: the backends to use (checked by the caller).

    Nothing is built until :meth:`load_scene` / :meth:`reset`; :meth:`close` releases
    everything and is idempotent.
    """

    def __init__(self, config: BackendConfig) -> None:
        self.config = config
        #: Whether contact queries compute the objects' part indices (the observers'
        #: ``"contact_parts"`` need; set by :meth:`resolve`).
        self.contact_parts = False
        self.resolved: registry.ResolvedBackends = self.resolve(frozenset({"rgb"}), False, 0)
        self.body_model: SmplxBody | None = None
        if config.body_model_dir is not None:
            from humanclaw_gym.body.smplx_model import SmplxBody

            self.body_model = SmplxBody(config.body_model_dir, gender=config.body_model_gender)
        self.body_asset: Any = None  # a BodyAsset when config.body_asset is set
        if config.body_asset is not None:
            from humanclaw_gym.body.asset_cache import cached_body_asset

            self.body_asset = cached_body_asset(config.body_asset)
        #: Whether the body is placed as the reference release places it (the physics
        #: option ``release_arithmetic``; see :meth:`reset`).
        self.release_spawn = config.physics_options.get("release_arithmetic") is True
        if self.release_spawn and (config.motion != "paper" or config.body_asset is None):
            raise ValueError(
                "physics_options release_arithmetic=True places the body as the reference "
                "release does, from the paper motion's SMPL translation and the body asset's "
                "shift.npy: it needs motion='paper' and body_asset=; got "
                f"motion={config.motion!r}, body_asset={config.body_asset!r}"
            )
        self.scene_dataset: SceneDataset | None = None
        if config.scene_dataset is not None:
            from humanclaw_gym.scenes.hssd import open_scene_dataset

            self.scene_dataset = open_scene_dataset(config.scene_dataset)
        self.physics: PhysicsBackend | None = None
        self.renderer: RenderBackend | None = None
        self.motion: MotionGenerator | None = None
        self.render_reason = ""
        self.scene: SceneSpec | None = None
        self.scene_id: str | None = None
        self._version = 0  # bumped whenever the simulated state changes
        self._synced_version = -1
        self._synced_link_poses: np.ndarray | None = None
        self._synced_body_poses: np.ndarray | None = None
        self._body_mesh_faces_sent = False
        self._cache: dict[tuple[str, int], tuple[frozenset[str], RenderResult]] = {}
        self._cache_version = -1
        self._snapshot: Snapshot | None = None
        self._reset_pose: tuple[np.ndarray, float, np.ndarray] | None = None
        self._closed = False
        #: The frame the physics was last reset to (the seed history's last frame, lifted
        #: for a body asset, or the release's spawn); None before the first reset.
        self.reset_frame: np.ndarray | None = None

    # ------------------------------------------------------------------------------------
    # configuration
    # ------------------------------------------------------------------------------------
    def resolve(
        self,
        render_modes: Iterable[str],
        contacts: bool,
        image_size: int,
        contact_parts: bool = False,
    ) -> registry.ResolvedBackends:
        """Check the config against the backends' capabilities for what the env needs
        (render modes, contact/ray queries, the largest image side); nothing is built.
        ``contact_parts``: contact queries from now on compute the objects' part indices.

        Raises:
            BackendCapabilityError: naming the backend and the missing capability.
        """
        c = self.config
        self.resolved = registry.resolve(
            physics=c.physics,
            render=c.renderer,
            motion=c.motion,
            render_modes=sorted({"rgb", *render_modes}),
            need_contacts=contacts,
            need_ray_cast=contacts,
            image_size=max(image_size, EGO_SIZE_PX, EXO_SIZE_PX),
            need_body_mesh=c.body_model_dir is not None or c.body_asset is not None,
            part_shapes=("box", "cylinder", "sphere", "mesh")
            if c.scene_dataset is not None
            else ("box", "cylinder", "sphere"),
        )
        self.contact_parts = bool(contact_parts)
        return self.resolved

    def check_executable(self, call: SkillCall) -> None:
        """Refuse a call the configured motion generator cannot execute (its capabilities
        lack the skill's motion), before anything changes.

        Raises:
            SkillNotExecutableError: naming the skill and the generator.
        """
        self.resolved.motion.capabilities.check_call(call)

    def check_scenes(self, episodes: Iterable[Episode]) -> None:
        """Check, by name only, that the episodes' scenes can be loaded: from the scene
        dataset when one is configured, else as shipped / generated / installed scenes
        (:func:`~humanclaw_gym.episodes.io.scene_installed`; without a dataset only
        imported reference episodes are checked here, the rest at reset).

        Raises:
            SceneDatasetError: with a scene dataset, naming the scenes it lacks, the
                dataset and the option.
            SceneNotInstalledError: without one, naming the first missing scene.
        """
        from humanclaw_gym.episodes import io as episodes_io

        dataset = self.scene_dataset
        missing: dict[str, None] = {}
        for episode in episodes:
            sid = episode.scene_id
            if sid in missing or (dataset is not None and dataset.has_scene(sid)):
                continue
            if dataset is None and getattr(episode, "reference", None) is None:
                continue
            if episodes_io.scene_installed(sid):
                continue
            if dataset is None:
                raise episodes_io.scene_not_installed(sid, episode)
            missing[sid] = None
        if missing:
            from humanclaw_gym.scenes.hssd import SceneDatasetError

            names = list(missing)
            more = f" and {len(names) - 5} more" if len(names) > 5 else ""
            raise SceneDatasetError(
                f"{len(names)} episode scenes are not in scene_dataset "
                f"{dataset.config_path}: {names[:5]}{more}; point scene_dataset "
                "(--scene-dataset) at the dataset these episodes were made for"
            )

    @property
    def backend_info(self) -> dict[str, Any]:
        """Names of the backends in use and why this renderer was chosen; with a motion
        generator that describes its weights (``weights_info``, e.g. the paper motion's
        manifest SHA-256, device and dtype) also ``motion_weights``; with a body asset its
        identity (name, path, SHA-256 of its files), with a scene dataset its path."""
        info: dict[str, Any] = {
            "physics": self.config.physics,
            "renderer": getattr(getattr(self.renderer, "capabilities", None), "name", "not built"),
            "renderer_reason": self.render_reason or "not built yet",
            "motion": self.config.motion,
        }
        weights = getattr(self.motion, "weights_info", None)
        if weights is not None:
            info["motion_weights"] = dict(weights)
        if self.body_asset is not None:
            info["body_asset"] = self.body_asset.identity()
        if self.config.scene_dataset is not None:
            info["scene_dataset"] = self.config.scene_dataset
        return info

    # ------------------------------------------------------------------------------------
    # building
    # ------------------------------------------------------------------------------------
    def _ensure_backends(self) -> None:
        if self._closed:
            raise RuntimeError("the environment is closed")
        if self.motion is None:
            kwargs: dict[str, Any] = dict(self.config.motion_options)
            if self.config.motion_checkpoint is not None:
                kwargs["checkpoint"] = self.config.motion_checkpoint
            if self.body_asset is not None and self.resolved.motion.capabilities.fits_body:
                kwargs["body_asset"] = self.body_asset  # the motion fits the body it poses
            self.motion = self.resolved.motion.load()(**kwargs)
        if self.renderer is None:
            self.renderer, _, self.render_reason = registry.create_renderer(
                self.config.renderer, self.resolved.render
            )

    def load_scene(self, scene_id: str) -> None:
        """Make ``scene_id`` the simulated scene (rebuilt only when it changes)."""
        from humanclaw_gym import episodes as episodes_mod

        self._ensure_backends()
        if self.scene_id == scene_id:
            return
        if self.scene_dataset is not None and self.scene_dataset.has_scene(scene_id):
            scene = self.scene_dataset.load_scene(scene_id)
        else:
            scene = episodes_mod.load_scene(scene_id)
        self._release_scene()
        options = dict(self.config.physics_options)
        if self.config.body_asset is not None:
            options["body_asset"] = self.config.body_asset
        self.physics = self.resolved.physics.load()(**options)
        self.physics.build(scene)
        self.renderer.build(scene)  # renderers accept a new scene without a new context
        self._body_mesh_faces_sent = False  # build() forgets a body mesh, faces included
        self.scene = scene
        self.scene_id = scene_id

    def surface_skin_m(self) -> float:
        """How far above its triangles a mesh scene's collision surface lies (the physics'
        ``collision_margin_m``; 0 for scenes of primitives)."""
        objects = getattr(self.scene, "objects", ())
        if not any(getattr(part, "shape", None) == "mesh" for o in objects for part in o.parts):
            return 0.0
        return float(self.physics.contract().get("collision_margin_m", 0.0))

    def _release_scene(self) -> None:
        if self.physics is not None:
            self.physics.close()
            self.physics = None
            self._version += 1
        self.scene = None
        self.scene_id = None

    # ------------------------------------------------------------------------------------
    # an episode
    # ------------------------------------------------------------------------------------
    def reset(
        self,
        start_position: np.ndarray,
        start_yaw_rad: float,
        seed: int,
        reference: Any = None,
    ) -> np.ndarray:
        """Place the humanoid standing at the start pose (the scene must be loaded).

        In scenes made of triangle meshes the body starts on the meshes' contact skin:
        ``start_position`` y plus the physics' collision margin (Bullet collides a
        triangle mesh with its margin outside the triangles, a box with it inside), so
        the feet do not start a margin deep in the floor. A body asset whose lowest vertex
        would start below that height is lifted onto it (the seed pose is the motion
        model's body, whose proportions differ).

        With the physics option ``release_arithmetic`` the reference release's spawn is
        used instead (:meth:`_release_reset`); ``reference`` is then the episode's
        :class:`~humanclaw_gym.episodes.schema.ReferenceRecord` (its ``init_offset``), or
        None for an episode without one.

        Returns:
            ``float64 (5, 75)``: the motion generator's seed history (world frame).
        """
        if self.release_spawn:
            return self._release_reset(start_position, start_yaw_rad, seed, reference)
        start = np.array(start_position, dtype=np.float64)
        start[1] += self.surface_skin_m()
        history = np.asarray(self.motion.reset(start, start_yaw_rad, seed=seed), dtype=np.float64)
        self.physics.reset(history[-1])
        self.reset_frame = history[-1].copy()
        if self.body_asset is not None:
            # a body of other proportions than the motion's may reach below the floor in
            # the seed pose: lift it until its lowest vertex rests on the start's floor
            gap = float(start[1]) - self.body_lowest_y()
            if gap > 0.0:
                lifted = history[-1].copy()
                lifted[1] += gap
                self.physics.reset(lifted)
                self.reset_frame = lifted
        self._version += 1
        self._reset_pose = (start, float(start_yaw_rad), history[-1].copy())
        return history

    def _release_reset(
        self, start_position: np.ndarray, start_yaw_rad: float, seed: int, reference: Any
    ) -> np.ndarray:
        """The reference release's spawn: the paper motion starts at the episode's
        ``init_offset`` (its motion runner's placement, height included; without a
        reference record, ``start_position``), and the body's root link is put at the seed's
        first frame's SMPL translation plus ``shift.npy`` row 0, both turned into the
        world as the release turns them (:func:`~humanclaw_gym.physics.release.
        release_spawn_frame`); no collision skin, no lift."""
        from humanclaw_gym.physics.release import release_spawn_frame

        if reference is not None:
            off = [float(v) for v in reference.init_offset]  # (x, z, y) of the motion world
            start = np.array([-off[0], off[2], off[1]], dtype=np.float64)
        else:
            start = np.array(start_position, dtype=np.float64)
        history = np.asarray(self.motion.reset(start, start_yaw_rad, seed=seed), dtype=np.float64)
        frame = release_spawn_frame(self.motion.release_start, self.body_asset.shift_m[0])
        self.physics.reset(frame)
        self.reset_frame = frame
        self._version += 1
        self._reset_pose = (start, float(start_yaw_rad), history[-1].copy())
        return history

    @property
    def records_frames(self) -> bool:
        """Whether the physics backend reads the state after each frame of a chunk itself
        (``record_frames``; see :meth:`execute`'s ``on_frames``)."""
        return callable(getattr(self.physics, "record_frames", None))

    def execute(
        self,
        call: SkillCall,
        on_chunk: Callable[[np.ndarray], None] | None = None,
        on_frame: Callable[[int, np.ndarray], None] | None = None,
        on_frames: Callable[[np.ndarray, FrameStates], None] | None = None,
        contacts: bool = False,
    ) -> np.ndarray:
        """Generate the chunk of a motion skill and execute it frame by frame.

        Args:
            call: a validated motion :class:`~humanclaw_gym.skills.SkillCall` (not
                Stop/Stand); it is handed to the motion generator as it is.
            on_chunk: called with the generated frames before physics runs them.
            on_frame: called as ``on_frame(i, generated_frame)`` after physics executed
                frame ``i`` (the simulation then holds that frame's realized state).
            on_frames: instead of ``on_frame`` (only where :attr:`records_frames`), called
                once after physics executed the chunk, as ``on_frames(generated, states)``
                with the :class:`~humanclaw_gym.physics.types.FrameStates` read after each
                frame (with ``contacts``: their contact rows, the objects' part indices as
                :attr:`contact_parts` says); the simulation then holds the last frame's
                state. A frame that failed ends the chunk: ``on_frames`` gets the states of
                the frames before it, then its exception is raised.

        Returns:
            The generated ``float64 (15, 75)`` frames.

        Raises:
            RuntimeError: the generator returned frames of a wrong shape or non-finite.
        """
        frames = self.generate(call)
        if on_chunk is not None:
            on_chunk(frames)
        if on_frames is not None:
            try:
                states = self.physics.record_frames(
                    frames, contacts=contacts, contact_parts=self.contact_parts
                )
            finally:  # a frame that raised may have changed the state as well
                self._version += 1
            on_frames(frames, states)
            if states.error is not None:
                raise states.error
            return frames
        step_frames = getattr(self.physics, "step_frames", None)
        if on_frame is None and step_frames is not None:
            # the whole chunk in one call (the MuJoCo backend runs it without the GIL)
            try:
                step_frames(frames)
            finally:
                self._version += 1
            return frames
        for i in range(FRAMES_PER_CHUNK):
            try:
                self.physics.step_frame(frames[i])
            finally:  # a frame that raised may have changed the state as well
                self._version += 1
            if on_frame is not None:
                on_frame(i, frames[i])
        return frames

    def generate(self, call: SkillCall) -> np.ndarray:
        """The motion generator's next chunk, checked: ``float64 (15, 75)``, finite."""
        frames = np.asarray(self.motion.generate(call), dtype=np.float64)
        if frames.shape != (FRAMES_PER_CHUNK, 75) or not np.all(np.isfinite(frames)):
            raise RuntimeError(
                f"motion generator {self.config.motion!r} returned frames of shape "
                f"{frames.shape} (expected (15, 75), finite)"
            )
        return frames

    # ------------------------------------------------------------------------------------
    # rendering
    # ------------------------------------------------------------------------------------
    def render(self, view: str, size: int, modes: Iterable[str] = ("rgb",)) -> RenderResult:
        """Render the current state from the ``"ego"`` or ``"exo"`` camera.

        Args:
            view: ``"ego"`` (head camera) or ``"exo"`` (third person).
            size: side of the square image in pixels.
            modes: render modes (``"rgb"`` is always drawn; ``"instance"``, ``"depth"``,
                any mode the renderer declares), all from the same pass.

        Returns:
            The renderer's :class:`~humanclaw_gym.backends.protocols.RenderResult`, keyed
            by mode. Views
            of an unchanged state are rendered once: asking again for the same camera with
            the same or fewer modes (e.g. the observation and the video's last frame)
            returns the same result, whose arrays callers must not modify.
        """
        from humanclaw_gym.render.cameras import ego_camera, exo_camera

        wanted = frozenset(modes) | {"rgb"}
        if self._cache_version != self._version:
            self._cache.clear()
            self._cache_version = self._version
        cached = self._cache.get((view, size))
        if cached is not None:
            if wanted <= cached[0]:  # an image of this very state and camera (one pass)
                return cached[1]
            wanted |= cached[0]  # one new pass with every mode asked for so far
        link_poses = self._sync_renderer()
        if view == "ego" and self.body_asset is not None:
            from humanclaw_gym.render.cameras import body_asset_ego_camera

            camera = body_asset_ego_camera(
                self.body_asset, self._synced_body_poses, width=size, height=size
            )
        elif view == "ego":
            camera = ego_camera(link_poses, width=size, height=size)
        else:  # placed clear of the scene's walls, to the side of a seated body
            camera = exo_camera(link_poses, width=size, height=size, scene=self.scene)
        result = self.renderer.render(camera, wanted)
        self._cache[(view, size)] = (wanted, result)
        return result

    def render_at(
        self,
        position: np.ndarray,
        yaw_rad: float,
        view: str = "ego",
        size: int = EGO_SIZE_PX,
        modes: Iterable[str] = ("rgb",),
    ) -> RenderResult:
        """Render a camera of the body standing at another pose, e.g. the view a person
        at a goal pose would see (a task's goal image, rendered at reset).

        The body is drawn in its standing pose of the last :meth:`reset`, moved rigidly
        to ``position`` (``[x, floor y, z]`` in metres, like a start position) and turned
        to ``yaw_rad``; the cameras are placed on it as on the real body; the objects are
        where they are now. Any body the env simulates: the built-in body in the reset's
        standing frame; a body asset (``body_asset``) in the frame physics was reset to
        (lifted onto the floor as there), drawn from its own meshes with its own ego
        camera; the SMPL-X body of ``body_model_dir`` skinned in the standing frame. Nothing
        simulated changes (physics, motion, snapshots); the next ordinary render draws the
        real body again.

        Raises:
            RuntimeError: before a reset.
            ValueError: a non-finite pose.
        """
        from humanclaw_gym.body.skeleton import forward_kinematics
        from humanclaw_gym.render.cameras import ego_camera, exo_camera
        from humanclaw_gym.rotations import (
            matrix_from_rotvec,
            matrix_to_quat_xyzw,
            rot_y,
            rotvec_from_matrix,
        )

        if self._reset_pose is None or self.physics is None:
            raise RuntimeError("render_at() needs an episode: call it after reset()")
        target = np.array(position, dtype=np.float64)
        if target.shape != (3,) or not np.all(np.isfinite(target)) or not np.isfinite(yaw_rad):
            raise ValueError(
                f"render_at(position={position!r}, yaw_rad={yaw_rad!r}) is invalid: allowed "
                "3 finite numbers (x, floor y, z) in metres and a finite angle"
            )
        start, start_yaw, standing = self._reset_pose
        if self.body_asset is not None:  # the frame physics holds the asset in at reset
            standing = np.asarray(self.reset_frame, dtype=np.float64)
        target[1] += self.surface_skin_m()
        turn = rot_y(float(yaw_rad) - start_yaw)
        frame = standing.copy()
        frame[:3] = target + turn @ (standing[:3] - start)
        frame[3:6] = rotvec_from_matrix(turn @ matrix_from_rotvec(standing[3:6]))
        self._sync_renderer()  # the objects as they are now
        asset_poses = None
        if self.body_asset is not None:
            asset_poses = self.body_asset.link_poses_from_frame(frame)
            link_poses = self.body_asset.skeleton_link_poses(asset_poses)
        else:
            positions, rotations = forward_kinematics(frame)
            link_poses = np.concatenate([positions, matrix_to_quat_xyzw(rotations)], axis=-1)
        self.renderer.set_body_pose(link_poses)
        if asset_poses is not None or self.body_model is not None:
            self._send_body_mesh_at(frame, asset_poses)
        self._synced_version = -1  # the next ordinary render draws the real body again
        if view == "ego" and asset_poses is not None:
            from humanclaw_gym.render.cameras import body_asset_ego_camera

            camera = body_asset_ego_camera(self.body_asset, asset_poses, width=size, height=size)
        elif view == "ego":
            camera = ego_camera(link_poses, width=size, height=size)
        else:
            camera = exo_camera(link_poses, width=size, height=size, scene=self.scene)
        return self.renderer.render(camera, frozenset(modes) | {"rgb"})

    def _send_body_mesh_at(self, frame: np.ndarray, asset_poses: np.ndarray | None) -> None:
        """Send the renderer the mesh of a body asset posed at ``asset_poses``, or of the
        SMPL-X body skinned in ``frame`` (faces once per renderer build)."""
        if asset_poses is not None:
            faces = self.body_asset.visual_mesh[1]
            vertices = self.body_asset.posed_vertices(asset_poses)
        else:
            from humanclaw_gym.body.smplx_model import smplx_vertices

            vertices, faces = smplx_vertices(frame, self.body_model)
        self.renderer.set_body_mesh(
            vertices.astype(np.float32), None if self._body_mesh_faces_sent else faces
        )
        self._body_mesh_faces_sent = True

    def _sync_renderer(self) -> np.ndarray:
        """Copy the current body and object poses to the renderer, once per physics state
        (ego, exo and instance renders of the same frame share one copy). With a body
        model, the skinned mesh of the realized frame is computed and sent here as well
        (the link poses still go first: they place the cameras and steer the cutaway)."""
        if self._synced_version == self._version and self._synced_link_poses is not None:
            return self._synced_link_poses
        link_poses = self.physics.link_poses()
        if self.body_asset is not None:  # drawn from its own meshes
            self._synced_body_poses = link_poses
            link_poses = self.body_asset.skeleton_link_poses(link_poses)
        self.renderer.set_body_pose(link_poses)
        if self.body_model is not None:
            self._sync_body_mesh()
        elif self.body_asset is not None:
            _, faces, _ = self.body_asset.visual_mesh
            vertices = self.body_asset.posed_vertices(self._synced_body_poses)
            self.renderer.set_body_mesh(
                vertices.astype(np.float32), None if self._body_mesh_faces_sent else faces
            )
            self._body_mesh_faces_sent = True
        ids = self.physics.dynamic_object_ids
        if ids:
            self.renderer.set_object_poses(ids, self.physics.object_poses())
        self._synced_version = self._version
        self._synced_link_poses = link_poses
        return link_poses

    def _sync_body_mesh(self) -> None:
        """Send the SMPL-X mesh of the realized frame (faces once per renderer build)."""
        from humanclaw_gym.body.smplx_model import smplx_vertices

        vertices, faces = smplx_vertices(self.physics.realized_frame(), self.body_model)
        self.renderer.set_body_mesh(
            vertices.astype(np.float32), None if self._body_mesh_faces_sent else faces
        )
        self._body_mesh_faces_sent = True

    # ------------------------------------------------------------------------------------
    # state queries (hidden state: for observers and privileged mode, never the policy)
    # ------------------------------------------------------------------------------------
    @property
    def body_links(self) -> tuple[str, ...] | None:
        """The body asset's link names (the order of contact rows' ``link_a``), or None
        for the built-in skeleton body."""
        return None if self.body_asset is None else self.body_asset.links

    @property
    def state_version(self) -> int:
        """A counter that changes whenever the simulated state changes (reset, every
        executed frame, a new scene)."""
        return self._version

    def snapshot(self) -> Snapshot:
        """The :class:`Snapshot` of the current state (the same object until the state
        changes, so its parts are read from physics once)."""
        snap = self._snapshot
        if snap is None or snap.version != self._version:
            snap = self._snapshot = Snapshot(self, self._version)
        return snap

    def physics_contract(self) -> dict[str, Any]:
        """The physics backend's frame contract and options (replay manifests record it)."""
        if self.physics is None:
            raise RuntimeError("physics_contract(): no physics backend is built")
        return self.physics.contract()

    def body_lowest_y(self) -> float:
        """Lowest point of the body (metres): the built-in body standing at the current root
        height; a body asset's lowest visual vertex in its current pose (the reference
        release reads its body's lowest point from the posed link geometry)."""
        if self.body_asset is not None:
            vertices = self.body_asset.posed_vertices(self.physics.link_poses())
            return float(vertices[:, 1].min())
        from humanclaw_gym.body import STANDING_PELVIS_HEIGHT_M

        return float(self.physics.realized_frame()[1] - STANDING_PELVIS_HEIGHT_M)

    def spawn_floor_y(self, x: float, z: float) -> tuple[float | None, float]:
        """``(floor height, body lowest point)`` by the collision metric's spawn rule: the
        highest surface a downward ray at ``(x, z)`` hits that is not above the standing
        body's lowest point + 5 cm."""
        lowest = self.body_lowest_y()
        return self.physics.ray_cast_down(x, z, lowest + 0.05, lowest - 5.0), lowest

    def safe_link_origins(self) -> np.ndarray | None:
        """Body points for an end-of-episode event, or None when they cannot be read."""
        try:
            return None if self.physics is None else self.snapshot().link_origins
        except Exception:
            return None

    # ------------------------------------------------------------------------------------
    def close(self) -> None:
        """Release physics, renderer and motion model. Idempotent; keeps closing after an
        error and raises the first one."""
        if self._closed:
            return
        errors: list[BaseException] = []
        for attr in ("renderer", "physics"):
            backend = getattr(self, attr)
            if backend is not None:
                try:
                    backend.close()
                except BaseException as exc:  # keep closing
                    errors.append(exc)
                setattr(self, attr, None)
        motion = self.motion
        if motion is not None and hasattr(motion, "close"):
            try:
                motion.close()
            except BaseException as exc:
                errors.append(exc)
        self.motion = None
        self.scene = None
        self.scene_id = None
        self._closed = True
        if errors:
            raise errors[0]


def check_sub_env_executable(env: Any, call: SkillCall, index: int) -> None:
    """Refuse, before any sub-env steps, a call sub-env ``index``'s motion generator cannot
    execute (the error names the sub-env)."""
    from humanclaw_gym.skills import SkillNotExecutableError

    check = getattr(getattr(env.unwrapped, "simulation", None), "check_executable", None)
    if check is None:
        return
    try:
        check(call)
    except SkillNotExecutableError as exc:
        raise SkillNotExecutableError(
            exc.value,
            exc.generator,
            exc.allowed,
            skill=exc.skill,
            message=f"sub-env {index}: {exc}",
        ) from exc
