"""One record for the simulator side of a run: :class:`BackendConfig`.

Which physics engine (and its options), which renderer, which motion generator (and its
options and checkpoint), and which body model to draw: the env, the batch runner
(``RunConfig``), the benchmark server and every CLI command take this one record, so a
new backend option is added in one place. It is plain, picklable data (safe to send to
worker processes and Ray tasks); :meth:`BackendConfig.check` looks the names up in the
backend registry and checks options against the backends' constructors before anything
is built.
"""

from __future__ import annotations

import inspect
import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

__all__ = ["BACKEND_FIELDS", "BODY_MODEL_GENDERS", "BackendConfig", "check_options"]

BODY_MODEL_GENDERS: tuple[str, ...] = ("neutral", "male", "female")


def check_options(
    factory: Any, kind: str, name: str, options: Mapping[str, Any] | None, reserved: tuple = ()
) -> dict[str, Any]:
    """Check option names against a backend constructor's keyword parameters.

    Values are checked by the backend itself when it is built.

    Args:
        factory: the backend class (or function); unused when ``options`` is empty.
        kind: ``"physics"`` or ``"motion"`` (for the message).
        name: the backend's registry name (for the message).
        options: keyword arguments for the constructor.
        reserved: names that must be given elsewhere (e.g. the motion ``checkpoint``).

    Returns:
        A plain dict copy of ``options``.

    Raises:
        ValueError: not a mapping of names, a reserved name, or a name the constructor does
            not accept (the message lists the accepted ones).
    """
    if options is None:
        return {}
    if not isinstance(options, Mapping) or not all(isinstance(k, str) for k in options):
        raise ValueError(
            f"{kind}_options must be a mapping of keyword names to values, got {options!r}"
        )
    for key in reserved:
        if key in options:
            raise ValueError(f"{kind}_options: pass the {key} as {kind}_{key}=")
    if not options:
        return {}
    params = inspect.signature(factory).parameters
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        kinds = (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        # a motion generator's body_asset is the config's body_asset (refused in the options)
        hidden = ("self", *reserved, *(("body_asset",) if kind == "motion" else ()))
        allowed = [n for n, p in params.items() if n not in hidden and p.kind in kinds]
        unknown = sorted(set(options) - set(allowed))
        if unknown:
            what = "motion generator" if kind == "motion" else f"{kind} backend"
            raise ValueError(
                f"{kind}_options {unknown} are not accepted by the {name!r} {what}: "
                f"allowed {allowed}"
            )
    return dict(options)


def _accepts(factory: Any, name: str) -> bool:
    params = inspect.signature(factory).parameters
    return name in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def _path_or_none(value: Any, name: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, (str, os.PathLike)):
        raise ValueError(f"{name} must be None or a path, got {value!r}")
    return os.fspath(value)


def _options(value: Any, name: str) -> dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, (list, tuple)):  # ((key, value), ...) as the CLI builds it
        try:
            value = dict(value)
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be a mapping of keyword names to values") from None
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise ValueError(f"{name} must be a mapping of keyword names to values, got {value!r}")
    return dict(value)


@dataclass(frozen=True)
class BackendConfig:
    """The simulator side of a run.

    Attributes:
        physics: registered physics backend (``"pybullet"``).
        physics_options: keyword arguments of the physics backend's constructor (for
            pybullet e.g. ``{"solver_iterations": 10}``); unknown names are refused.
        renderer: ``"auto"`` (the first registered renderer that can start: moderngl on
            EGL, else pybullet's TinyRenderer) or a registered render backend name.
        motion: registered motion generator (``"procedural"``, ``"flow"``, ``"paper"``).
        motion_checkpoint: checkpoint of a learned motion generator (``None``: its default).
        motion_options: keyword arguments of the motion generator's constructor (e.g.
            ``{"steps": 10}`` for ``"flow"``; ``{"weights_dir": ..., "release_dir": ...,
            "device": "cpu"}`` for ``"paper"``); unknown names are refused.
        body_model_dir: the user's licensed SMPL-X files (a directory holding
            ``SMPLX_<GENDER>.npz`` or that file): the images draw the skinned body instead
            of the capsule links (rendering only; physics keeps the capsules).
        body_model_gender: ``"neutral"``, ``"male"`` or ``"female"``.
        scene_dataset: a Habitat scene dataset to load scenes from (its
            ``*.scene_dataset_config.json`` or the folder holding it, e.g. HSSD prepared by
            the reference release); episodes whose scene it holds run in that scene,
            meshes and all (see ``docs/scenes.md``). None: the shipped procedural homes.
        body_asset: a body folder in the reference release's format (URDF, STL meshes,
            ``shift.npy``, ``metadata.json``; see
            :func:`humanclaw_gym.body.asset.load_body_asset`): the humanoid physics builds,
            the renderer draws from its meshes and the metrics score by its links; a motion
            generator that fits bodies (``MotionCapabilities.fits_body``: procedural, flow)
            poses it with its own proportions. None: the built-in 24-link body.

    Construction checks types only (cheap); :meth:`check` checks names and options
    against the registry. Options may be given as a mapping or as ``(key, value)`` pairs.
    """

    physics: str = "pybullet"
    physics_options: Mapping[str, Any] = field(default_factory=dict)
    renderer: str = "auto"
    motion: str = "procedural"
    motion_checkpoint: str | None = None
    motion_options: Mapping[str, Any] = field(default_factory=dict)
    body_model_dir: str | None = None
    body_model_gender: str = "neutral"
    scene_dataset: str | None = None
    body_asset: str | None = None

    def __post_init__(self) -> None:
        for name in ("physics", "renderer", "motion"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise ValueError(f"{name} must be a backend name (non-empty str), got {value!r}")
        set_ = object.__setattr__
        set_(self, "physics_options", _options(self.physics_options, "physics_options"))
        set_(self, "motion_options", _options(self.motion_options, "motion_options"))
        set_(self, "motion_checkpoint", _path_or_none(self.motion_checkpoint, "motion_checkpoint"))
        set_(self, "body_model_dir", _path_or_none(self.body_model_dir, "body_model_dir"))
        set_(self, "scene_dataset", _path_or_none(self.scene_dataset, "scene_dataset"))
        set_(self, "body_asset", _path_or_none(self.body_asset, "body_asset"))
        if self.body_model_gender not in BODY_MODEL_GENDERS:
            raise ValueError(
                f"body_model_gender must be one of {BODY_MODEL_GENDERS}, got "
                f"{self.body_model_gender!r}"
            )
        if "checkpoint" in self.motion_options:
            raise ValueError("motion_options: pass the checkpoint as motion_checkpoint=")
        if "body_asset" in self.physics_options:
            raise ValueError("physics_options: pass the body folder as body_asset=")
        if "body_asset" in self.motion_options:
            raise ValueError("motion_options: pass the body folder as body_asset=")
        if self.body_asset is not None and self.body_model_dir is not None:
            raise ValueError(
                "body_asset and body_model_dir both choose the drawn body: body_asset draws "
                "the asset's meshes, body_model_dir the SMPL-X skin of the built-in body; "
                "give one"
            )

    # ---- derived -------------------------------------------------------------------
    def replace(self, **changes: Any) -> BackendConfig:
        """A copy with some fields changed (validated again)."""
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (recorded in run fingerprints and server deployments)."""
        return json.loads(json.dumps(asdict(self), default=str))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BackendConfig:
        """Inverse of :meth:`to_dict`; unknown keys are refused, naming the accepted ones."""
        allowed = [f for f in cls.__dataclass_fields__]
        unknown = sorted(set(data) - set(allowed))
        if unknown:
            raise ValueError(f"BackendConfig: unknown keys {unknown}: allowed {allowed}")
        return cls(**dict(data))

    def key(self) -> str:
        """A canonical string for caches: equal configs give equal keys."""
        return json.dumps(self.to_dict(), sort_keys=True)

    # ---- checks --------------------------------------------------------------------
    def check(self) -> BackendConfig:
        """Check names against the registry and options against the constructors.

        Imports the physics and motion factories when options are given (not a simulator,
        GL context or torch). A motion generator with options that describes its weights
        (``weights_record``, the paper motion) finds and parses its manifest and seed state
        here (the paper motion: once per process per file state, records the generator
        shares: ``motion.paper.verified``). The body model directory must exist; a scene dataset must be found and its config
        parse (its folders are indexed, no mesh is read), and the mesh reader be installed.

        Returns:
            self (for chaining).

        Raises:
            BackendCapabilityError: an unknown backend name (registered ones listed).
            ValueError: an option a backend does not accept (accepted ones listed); a
                missing or malformed scene dataset (``SceneDatasetError``, naming the file);
                a missing or malformed paper motion manifest or seed state
                (``PaperWeightsError``, naming the file).
            FileNotFoundError: ``body_model_dir`` (or its model file) does not exist.
            BodyModelError: the model file holds pickled objects smplx would need.
            ImportError: ``scene_dataset`` is set but ``trimesh`` is not installed.
            BodyAssetError: ``body_asset`` cannot be read (one line naming the file).
        """
        from humanclaw_gym.backends import registry

        for kind, name, what in (
            ("physics", self.physics, "physics backend"),
            ("render", self.renderer, "render backend"),
            ("motion", self.motion, "motion generator"),
        ):
            known = registry.render_choices() if kind == "render" else tuple(registry.entries(kind))
            if name not in known:
                field_name = "renderer" if kind == "render" else kind
                raise registry.BackendCapabilityError(
                    f"{field_name}={name!r} is not a registered {what}: allowed {sorted(known)}"
                )
        if self.body_model_dir is not None and not os.path.exists(self.body_model_dir):
            raise FileNotFoundError(
                f"body_model_dir={self.body_model_dir!r} does not exist: expected a "
                f"directory holding SMPLX_{self.body_model_gender.upper()}.npz (the licensed "
                "SMPL-X files, not shipped with humanclaw-gym) or that file itself"
            )
        if self.body_model_dir is not None:  # read as plain arrays: nothing is unpickled
            from humanclaw_gym.body.smplx_model import body_model_file, read_body_model_arrays

            read_body_model_arrays(body_model_file(self.body_model_dir, self.body_model_gender))
        if self.scene_dataset is not None:
            from humanclaw_gym.scenes.hssd import open_scene_dataset

            open_scene_dataset(self.scene_dataset)
            try:
                import trimesh  # noqa: F401
            except ImportError as exc:
                raise ImportError(
                    f"scene_dataset={self.scene_dataset!r} needs the mesh reader 'trimesh': "
                    "pip install 'humanclaw-gym[hssd]'"
                ) from exc
        if self.physics_options or self.body_asset is not None:
            factory = registry.entry("physics", self.physics).load()
            check_options(factory, "physics", self.physics, self.physics_options)
        if self.body_asset is not None:
            from humanclaw_gym.body.asset_cache import cached_body_asset

            if "body_asset" not in inspect.signature(factory).parameters:
                raise ValueError(
                    f"body_asset: the {self.physics!r} physics backend builds no body asset "
                    "(pybullet and mujoco do)"
                )
            cached_body_asset(self.body_asset)  # read once per process (the env reuses it)
        if self.motion_options or self.motion_checkpoint is not None:
            factory = registry.entry("motion", self.motion).load()
            check_options(factory, "motion", self.motion, self.motion_options, ("checkpoint",))
            if self.motion_checkpoint is not None and not _accepts(factory, "checkpoint"):
                raise ValueError(
                    f"motion_checkpoint is not accepted by the {self.motion!r} motion "
                    "generator (it takes no checkpoint; see its motion_options)"
                )
            describe = getattr(factory, "weights_record", None)
            if describe is not None:  # e.g. the paper motion: its manifest and seed state
                describe(**dict(self.motion_options))
        return self


#: The field names of :class:`BackendConfig`, in declaration order: the keyword shorthands
#: that ``FindNavInteractEnv`` and ``RunConfig`` accept for them.
BACKEND_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(BackendConfig))
