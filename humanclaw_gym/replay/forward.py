"""Forward replay: re-execute a saved rollout's generated motion and compare with the record.

:func:`forward_replay` rebuilds the physics backend for the bundle's scene, resets it with
the same frame the env used (the bundle's ``reset_frame``: the last frame of the seed
history unless a body asset was lifted onto the floor or placed as the reference release
places it), feeds the saved
generated frames through ``step_frame`` one by one, and compares the realized humanoid
pose and every dynamic object pose with ``trajectory_after.npz``. On the same machine and
build the deviation is exactly 0: the half-physics execution is deterministic given the
generated frames. No renderer, motion generator or policy is created.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from humanclaw_gym.replay.bundle import load_bundle, to_jsonable
from humanclaw_gym.replay.render import load_scene_checked

__all__ = ["ForwardReplayReport", "forward_replay"]


@dataclass(frozen=True)
class ForwardReplayReport:
    """Outcome of :func:`forward_replay` (deviations in metres / radians, max abs element).

    Attributes:
        rollout_dir: the bundle replayed.
        frames: realized frames compared (``F``).
        max_abs_deviation: max over everything below (0.0 = bit-identical replay).
        max_abs_realized_deviation: humanoid 75-D pose over all frames.
        max_abs_object_deviation: dynamic object poses (7-D rows) over all frames.
        initial_deviation: max abs difference of the realized pose + object poses right
            after reset.
        first_divergent_frame: first frame index with any nonzero difference (``-1``: the
            state right after reset already differs), or None for an exact replay.
        physics: the physics backend used.
        contract_matches: the rebuilt backend's contract equals the manifest's (None when
            either side has none).
        seconds: wall time of the replay (build excluded).
    """

    rollout_dir: str
    frames: int
    max_abs_deviation: float
    max_abs_realized_deviation: float
    max_abs_object_deviation: float
    initial_deviation: float
    first_divergent_frame: int | None
    physics: str
    contract_matches: bool | None
    seconds: float

    @property
    def exact(self) -> bool:
        """True when the replay reproduced the record bit for bit."""
        return self.max_abs_deviation == 0.0


def _max_abs(a: np.ndarray, b: np.ndarray) -> float:
    if a.size == 0:
        return 0.0
    return float(np.max(np.abs(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64))))


def _tuning_kwargs(factory: Any, contract: dict[str, Any]) -> dict[str, Any]:
    """The recorded contract entries named like keyword parameters of the backend's
    constructor (the protocol: a backend records its options under their own names)."""
    import inspect

    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return {}
    kinds = (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return {
        key: value
        for key, value in contract.items()
        if key in params and key != "self" and params[key].kind in kinds
    }


def forward_replay(
    rollout_dir: str | os.PathLike[str],
    physics: str | None = None,
    scene: Any = None,
    solver_iterations: int | None = None,
) -> ForwardReplayReport:
    """Re-run the saved generated frames through a fresh physics backend and compare.

    Args:
        rollout_dir: directory of a replay bundle (verified on load).
        physics: registry name of the physics backend; None (default) uses the backend the
            manifest's physics contract names (``"backend"``), ``"pybullet"`` for bundles
            that record none.
        scene: SceneSpec to use instead of ``episodes.load_scene`` (hash still checked).
        solver_iterations: override; by default the physics is built with the tuning the
            manifest's contract records (every contract entry named like a keyword
            parameter of the backend's constructor, e.g. pybullet's ``solver_iterations``,
            ``root_correction_gain``, ``pjsc_gains``).

    Returns:
        The report; ``report.max_abs_deviation == 0.0`` for an exact replay.
    """
    from humanclaw_gym.backends import registry

    bundle = load_bundle(rollout_dir)
    scene_spec = load_scene_checked(bundle, scene)
    recorded_contract = bundle.manifest.get("physics") or {}
    from_backend = bundle.manifest.get("physics_contract_source") == "backend"
    if physics is None:
        physics = str(recorded_contract.get("backend") or "pybullet")
    entry = registry.entries("physics").get(physics)
    if entry is None:
        known = ", ".join(sorted(registry.entries("physics"))) or "none"
        raise ValueError(f"physics must be a registered physics backend ({known}), got {physics!r}")
    kwargs = _tuning_kwargs(entry.load(), recorded_contract if from_backend else {})
    if solver_iterations is not None:
        kwargs["solver_iterations"] = int(solver_iterations)
    backend = registry.create("physics", physics, **kwargs)
    try:
        backend.build(scene_spec)
        contract_fn = getattr(backend, "contract", None)
        contract_matches: bool | None = None
        if callable(contract_fn) and from_backend:
            contract_matches = to_jsonable(contract_fn()) == recorded_contract
        t0 = time.perf_counter()
        backend.reset(bundle.reset_frame)
        ids = tuple(int(i) for i in backend.dynamic_object_ids)
        if ids != tuple(int(i) for i in bundle.object_ids):
            raise ValueError(
                f"dynamic object ids differ: the rebuilt scene has {ids}, the bundle {bundle.object_ids.tolist()}"
            )
        initial = max(
            _max_abs(backend.realized_frame(), bundle.initial_realized),
            _max_abs(backend.object_poses(), bundle.initial_object_poses),
        )
        n = bundle.num_frames
        worst_body = worst_obj = 0.0
        first: int | None = None if initial == 0.0 else -1
        for i in range(n):
            backend.step_frame(bundle.generated[i])
            body = _max_abs(backend.realized_frame(), bundle.realized[i])
            obj = _max_abs(backend.object_poses(), bundle.object_poses[i])
            worst_body = max(worst_body, body)
            worst_obj = max(worst_obj, obj)
            if first is None and (body > 0.0 or obj > 0.0):
                first = i
        seconds = time.perf_counter() - t0
    finally:
        backend.close()
    return ForwardReplayReport(
        rollout_dir=str(rollout_dir),
        frames=n,
        max_abs_deviation=max(worst_body, worst_obj, initial),
        max_abs_realized_deviation=worst_body,
        max_abs_object_deviation=worst_obj,
        initial_deviation=initial,
        first_divergent_frame=first,
        physics=physics,
        contract_matches=contract_matches,
        seconds=round(seconds, 6),
    )
