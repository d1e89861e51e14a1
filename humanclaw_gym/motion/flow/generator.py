"""``FlowMotionGenerator``: the learned motion generator (registry name ``"flow"``).

One call turns a :class:`~humanclaw_gym.skills.SkillCall` into 15 world frames:

1. the 5-frame world history is moved into its canonical frame (pelvis of the last frame
   above the origin on the support height, facing ``+Z``) and turned into 219-D states
   (:func:`~humanclaw_gym.motion.flow.dataset.history_state`), normalised with the
   checkpoint's mean/std;
2. Gaussian noise ``(15, 219)`` is drawn from this generator's own ``torch.Generator``
   (seeded by :meth:`reset`), and the flow is integrated to ``t = 1`` with the midpoint
   method (30 iterations by default) through the base MotionDiT plus the skill's control
   branch with its condition;
3. the 75-D part of the result is de-normalised, its axis-angles wrapped to ``[0, pi]``,
   mapped back to the world and returned; its last 5 frames become the next history.

Several generators (e.g. the sub-envs of a vector env living in one process) can run their
chunks as **one batch**: :func:`generate_many` / :meth:`FlowMotionGenerator.generate_batch`
draw each generator's noise from its own RNG, stack the rows, and integrate once, so the
result equals each generator's own :meth:`~FlowMotionGenerator.generate` (up to float
rounding) and determinism per seed is kept. :class:`BatchedMotionService` adds *staging*:
chunks computed in one batch are parked in each generator and handed out by that
generator's next ``generate(call)`` with the same call, which lets a vector-env wrapper
batch the motion of a step without changing the env's per-env loop.

Models are loaded once per process and shared (a cache keyed by the checkpoint's manifest
hash); worker processes each load their own copy. ``num_threads`` (default 1) sets
``torch.set_num_threads`` for the process: a small model runs fastest on one thread, and
parallel envs then do not oversubscribe the cores.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from humanclaw_gym.backends.protocols import MotionCapabilities
from humanclaw_gym.body.skeleton import FRAME_DIM, NUM_JOINTS
from humanclaw_gym.motion.canonical import CanonicalFrame, decanonicalize, sole_heights
from humanclaw_gym.motion.flow.checkpoint import (
    FlowCheckpoint,
    load_checkpoint,
    read_manifest,
)
from humanclaw_gym.motion.flow.dataset import (
    BRANCHES,
    FUTURE_FRAMES,
    HISTORY_FRAMES,
    branch_of,
    condition_value,
    history_state,
    normalized_condition,
)
from humanclaw_gym.motion.torch_threads import (
    check_num_threads,
    require_torch,
    set_num_threads,
    torch_threads,
)
from humanclaw_gym.rotations import matrix_from_rotvec, rotvec_from_matrix
from humanclaw_gym.scenes.spec import STAIR_RISE_M
from humanclaw_gym.skills import Skill, SkillCall

__all__ = [
    "BatchedMotionService",
    "FlowMotionGenerator",
    "clear_model_cache",
    "generate_many",
    "load_model",
]

_CACHE: dict[tuple, FlowCheckpoint] = {}
_CACHE_LOCK = threading.Lock()
_REQUIRED = {
    "state_dim": 219,
    "history_frames": HISTORY_FRAMES,
    "future_frames": FUTURE_FRAMES,
    "branches": BRANCHES,
}


def _require_torch() -> Any:
    return require_torch("flow")


def load_model(checkpoint: str | os.PathLike[str] | None = None) -> FlowCheckpoint:
    """Load (once per process) and verify a checkpoint; later calls share the model.

    The cache key is the checkpoint directory, its manifest hash and the size/mtime of its
    files, so a rewritten checkpoint is verified and loaded again.
    """
    _require_torch()
    directory, manifest, manifest_sha = read_manifest(checkpoint)
    stats = tuple(
        (name, (directory / name).stat().st_size, (directory / name).stat().st_mtime_ns)
        for name in sorted(manifest["files"])
        if (directory / name).is_file()
    )
    key = (str(directory.resolve()), manifest_sha, stats)
    with _CACHE_LOCK:
        if key not in _CACHE:
            _CACHE[key] = load_checkpoint(directory, expect=_REQUIRED)
        return _CACHE[key]


def clear_model_cache() -> None:
    """Forget every loaded model (the next generator loads and verifies again)."""
    with _CACHE_LOCK:
        _CACHE.clear()


@dataclass
class _Request:
    owner: FlowMotionGenerator
    call: SkillCall
    history_n: np.ndarray  # (5, 219) normalised float32
    branch: int
    cond: float
    noise: Any  # torch (15, 219) float32
    ref: CanonicalFrame
    rng_state: Any  # torch RNG state before the noise was drawn
    seat_floor_y: float | None = None  # canonical lowest pelvis y (Sit with seat guidance)


@dataclass
class _Staged:
    call: SkillCall
    chunk: np.ndarray
    rng_state: Any


def _has_branch(skill: Skill) -> bool:
    """Whether the flow model has a control branch for ``skill``."""
    try:
        branch_of(skill)
    except ValueError:
        return False
    return True


class FlowMotionGenerator:
    """Learned flow-matching motion for the eight HumanClaw skills (see the module docstring).

    Args:
        checkpoint: checkpoint directory (see :mod:`~humanclaw_gym.motion.flow.checkpoint`);
            None = the checkpoint shipped in ``humanclaw_gym/assets/motion/flow_default``.
        steps: midpoint iterations per chunk (>= 1; 30 as upstream).
        num_threads: ``torch.set_num_threads`` for this process (None leaves it alone).
        seat_guidance: for Sit down, keep the pelvis from sinking below the seated height of
            the requested seat while sampling (see ``_SeatGuard``) and pin both feet where
            they stand (:func:`~humanclaw_gym.motion.footlock.lock_planted_feet`, legs
            re-solved by IK from the pelvis); False returns the network's sample as is.

    Raises:
        CheckpointError: the checkpoint is missing, tampered with or of another architecture.
        ImportError: PyTorch is not installed.
    """

    #: It executes the skills it has a control branch for (``dataset.branch_of``): the
    #: built-in motion skills; a new skill needs a new branch and retraining.
    capabilities = MotionCapabilities(
        name="flow",
        motion_keys=frozenset(s.spec.motion_key for s in Skill if _has_branch(s)),
        batched=True,
    )

    def __init__(
        self,
        checkpoint: str | os.PathLike[str] | None = None,
        steps: int = 30,
        num_threads: int | None = 1,
        seat_guidance: bool = True,
    ):
        torch = _require_torch()
        if not isinstance(seat_guidance, bool):
            raise ValueError(f"seat_guidance={seat_guidance!r} is invalid: allowed True or False")
        if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 1:
            raise ValueError(f"steps={steps!r} is invalid: allowed an int >= 1")
        set_num_threads(torch, check_num_threads(num_threads))
        self._ckpt = load_model(checkpoint)
        self.steps = int(steps)
        self.seat_guidance = seat_guidance
        self.fps = 30.0
        self.frames_per_chunk = FUTURE_FRAMES
        self.history_frames = HISTORY_FRAMES
        self._mean32 = self._ckpt.mean.astype(np.float32)
        self._std32 = self._ckpt.std.astype(np.float32)
        self._rng = torch.Generator(device="cpu")
        self._history: np.ndarray | None = None
        self._ground_y = 0.0
        self._staged: _Staged | None = None

    # ---- properties -------------------------------------------------------------------
    @property
    def checkpoint_path(self) -> Path:
        """Directory of the loaded checkpoint."""
        return self._ckpt.path

    @property
    def checkpoint_sha256(self) -> str:
        """SHA-256 of the loaded checkpoint's manifest (identifies the weights)."""
        return self._ckpt.manifest_sha256

    @property
    def ground_y(self) -> float:
        """Support height under the feet (world y, m): the reset floor, moved by one stair
        rise for each stair chunk whose feet end on the next tread."""
        return self._ground_y

    # ---- protocol -----------------------------------------------------------------------
    def reset(self, start_position: np.ndarray, start_yaw_rad: float, seed: int = 0) -> np.ndarray:
        """Start an episode standing at ``start_position`` (pelvis x/z, floor y) facing
        ``start_yaw_rad``; seeds this generator's noise with ``seed``.

        Returns:
            ``float64 (5, 75)``: the fixed standing seed pose (identical frames).
        """
        from humanclaw_gym.motion.flow.dataset import TrainingStyleProcedural

        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ValueError(f"seed={seed!r} is invalid: allowed an int >= 0")
        # The validated standing pose of the procedural generator (style seed 0) with the arm
        # carriage of the training data: the fixed seed pose every episode starts from.
        history = TrainingStyleProcedural(history_frames=HISTORY_FRAMES).reset(
            start_position, start_yaw_rad, seed=0
        )
        self._history = history
        self._ground_y = float(np.asarray(start_position, dtype=np.float64)[1])
        self._rng.manual_seed(int(seed))
        self._staged = None
        return history.copy()

    def generate(self, call: SkillCall | Any) -> np.ndarray:
        """Generate the next chunk for a motion skill.

        Args:
            call: a :class:`SkillCall` (or any form :meth:`SkillCall.coerce` accepts).

        Returns:
            ``float64 (15, 75)`` world frames continuing the history.

        Raises:
            RuntimeError: before :meth:`reset`.
            ValueError: for Stop/Stand (no motion; the env ends the episode itself).
        """
        call = SkillCall.coerce(call)
        staged = self._staged
        if staged is not None:
            self._staged = None
            if staged.call == call:
                self._commit(call, staged.chunk)
                return staged.chunk.copy()
            self._rng.set_state(staged.rng_state)  # as if the staged chunk never happened
        return _run([self._prepare(call)], commit=True)[0]

    def history(self) -> np.ndarray:
        """Copy of the current ``(5, 75)`` world history."""
        if self._history is None:
            raise RuntimeError("FlowMotionGenerator.history called before reset()")
        return self._history.copy()

    def close(self) -> None:
        """Drop the episode state (the shared model stays cached). Idempotent."""
        self._history = None
        self._staged = None

    @staticmethod
    def generate_batch(
        calls: Sequence[SkillCall | Any], generators: Sequence[FlowMotionGenerator]
    ) -> list[np.ndarray]:
        """Generate one chunk per ``(call, generator)`` pair as a single batch.

        Equivalent to ``[g.generate(c) for c, g in zip(calls, generators)]`` (same noise from
        each generator's RNG, same histories afterwards), in one model pass per iteration.
        """
        if len(calls) != len(generators):
            raise ValueError(f"generate_batch: {len(calls)} calls but {len(generators)} generators")
        return generate_many(list(zip(generators, calls, strict=True)))

    # ---- internals ----------------------------------------------------------------------
    def _prepare(self, call: SkillCall) -> _Request:
        torch = _require_torch()
        if self._history is None:
            raise RuntimeError("FlowMotionGenerator.generate called before reset()")
        if call.skill is Skill.STOP:
            raise ValueError(
                "SkillCall.skill=Stop/Stand produces no motion chunk: allowed the motion skills "
                "Walk, Turn, Climb upstairs, Sit down, Step back, Side step, Walk downstairs"
            )
        if self._staged is not None:  # a staged chunk not consumed: give its noise back
            self._rng.set_state(self._staged.rng_state)
            self._staged = None
        state, ref = history_state(self._history, self._ground_y)
        history_n = ((state - self._ckpt.mean) / self._ckpt.std).astype(np.float32)
        branch = branch_of(call.skill)
        cond = float(normalized_condition(branch, condition_value(call)))
        rng_state = self._rng.get_state()
        noise = torch.randn(
            (FUTURE_FRAMES, self._ckpt.config.state_dim), generator=self._rng, dtype=torch.float32
        )
        seat_floor_y = None
        if self.seat_guidance and call.skill is Skill.SIT:
            from humanclaw_gym.motion.procedural import seated_pelvis_height

            # canonical y is measured from the support height, like the seat height
            seat_floor_y = seated_pelvis_height(float(call.condition["height_m"]))
        return _Request(self, call, history_n, branch, cond, noise, ref, rng_state, seat_floor_y)

    def _finish(self, req: _Request, sample_n: np.ndarray) -> np.ndarray:
        states = sample_n.astype(np.float64) * self._ckpt.std + self._ckpt.mean
        frames_c = states[:, :FRAME_DIM].copy()
        # wrap every axis-angle into [0, pi] (the network's output is unconstrained)
        rot = frames_c[:, 3:].reshape(-1, NUM_JOINTS, 3)
        frames_c[:, 3:] = rotvec_from_matrix(matrix_from_rotvec(rot)).reshape(-1, 3 * NUM_JOINTS)
        chunk = decanonicalize(frames_c, req.ref)
        if not np.all(np.isfinite(chunk)):
            raise RuntimeError("FlowMotionGenerator produced non-finite frames")
        if req.seat_floor_y is not None:
            from humanclaw_gym.motion.footlock import (
                SEATED_HIP_FLEX_RAD,
                hip_flexion_rad,
                lock_planted_feet,
                raise_heels_for_seat,
                rest_hands_on_thighs,
                sit_back_to,
            )
            from humanclaw_gym.motion.procedural import SIT_START_TO_EDGE_M, sit_back_distance

            assert self._history is not None
            height = float(req.call.condition["height_m"])
            # The procedural synthesizer's seated pose: the pelvis moves back as far as it
            # does on this seat (less above knee height, the thighs then cross the seat's
            # edge near the hips); Sit down never steps, so a foot on the floor stays where
            # it stands (flat where the thighs clear the edge, else on its toes); the hands
            # come to rest on the thighs. A body that is seated already stays where it sits.
            seated = hip_flexion_rad(self._history[-1:])[0] > SEATED_HIP_FLEX_RAD
            back = 0.0 if seated else sit_back_distance(height)
            chunk = sit_back_to(chunk, self._history[-1], back)
            chunk = lock_planted_feet(
                chunk, self._history[-1], self._ground_y, None, never_steps=True
            )
            chunk = raise_heels_for_seat(chunk, self._ground_y, height, back - SIT_START_TO_EDGE_M)
            chunk = rest_hands_on_thighs(chunk)
        return chunk

    def _commit(self, call: SkillCall, chunk: np.ndarray) -> None:
        if call.skill in (Skill.CLIMB_UP, Skill.CLIMB_DOWN):
            step = call.condition["stair_steps"] * STAIR_RISE_M
            lowest = float(sole_heights(chunk[-1]).min())
            if abs(lowest - (self._ground_y + step)) < abs(lowest - self._ground_y):
                self._ground_y += step
        assert self._history is not None
        self._history = np.concatenate([self._history, chunk])[-HISTORY_FRAMES:].copy()


def _run(requests: list[_Request], commit: bool) -> list[np.ndarray]:
    """Integrate a list of requests, grouped by model, and finish (and commit) each."""
    torch = _require_torch()
    from humanclaw_gym.motion.flow.model import velocity_closure
    from humanclaw_gym.motion.flow.sampler import sample_midpoint

    out: list[np.ndarray | None] = [None] * len(requests)
    groups: dict[tuple[int, int], list[int]] = {}
    for i, req in enumerate(requests):
        groups.setdefault((id(req.owner._ckpt), req.owner.steps), []).append(i)
    for (_, steps), idx in groups.items():
        ckpt = requests[idx[0]].owner._ckpt
        history = torch.from_numpy(np.stack([requests[i].history_n for i in idx]))
        branch = torch.tensor([requests[i].branch for i in idx], dtype=torch.int64)
        cond = torch.tensor([requests[i].cond for i in idx], dtype=torch.float32)
        noise = torch.stack([requests[i].noise for i in idx])
        guarded = [row for row, i in enumerate(idx) if requests[i].seat_floor_y is not None]
        with torch.inference_mode():
            velocity = velocity_closure(ckpt.model, history, branch, cond)
            if guarded:
                guard = _SeatGuard(ckpt, guarded, [requests[idx[r]].seat_floor_y for r in guarded])
                velocity = guard.wrap(velocity)
            sample = sample_midpoint(velocity, noise, steps)
            if guarded:
                sample = guard(sample)
        sample_np = sample.numpy()
        for row, i in enumerate(idx):
            req = requests[i]
            chunk = req.owner._finish(req, sample_np[row])
            if commit:
                req.owner._commit(req.call, chunk)
            out[i] = chunk
    return [c.copy() for c in out if c is not None]


class _SeatGuard:
    """Sampling-time constraint for Sit down: the pelvis may not sink below the seated height.

    The network predicts the clean chunk ``x_hat`` at every solver evaluation (the velocity
    is ``(x_hat - x_t) / (1 - t)``). For the guarded rows, every frame whose predicted pelvis
    is below ``floor_y`` (canonical metres above the support, i.e. the procedural
    synthesizer's seated pelvis height for the requested seat) is lifted to it: the root
    height and the height of every joint position move up by the same amount, and the joint
    velocities by its frame-to-frame change, so the state stays consistent. The velocity is
    then recomputed from the corrected ``x_hat``, so later solver steps (and the network,
    which sees the corrected ``x_t``) continue from a body resting on the seat; the final
    sample gets the same projection. This is the replacement ("imputation") form of
    constraint guidance; rows above the seat and all other skills are untouched.
    """

    def __init__(self, ckpt: FlowCheckpoint, rows: list[int], floor_y: list[float]):
        torch = _require_torch()
        from humanclaw_gym.motion.flow.model import SAMPLE_MIN_GAP

        self.rows = torch.tensor(rows, dtype=torch.int64)
        self.floor_y = torch.tensor(floor_y, dtype=torch.float32)[:, None]
        self.min_gap = SAMPLE_MIN_GAP
        mean = torch.from_numpy(ckpt.mean.astype(np.float32))
        std = torch.from_numpy(ckpt.std.astype(np.float32))
        self.root_mean, self.root_std = mean[1], std[1]
        pos_y = FRAME_DIM + 1 + 3 * np.arange(NUM_JOINTS)
        vel_y = pos_y + 3 * NUM_JOINTS
        self.lift_idx = torch.from_numpy(np.concatenate([[1], pos_y]))
        self.lift_scale = 1.0 / std[self.lift_idx]
        self.vel_idx = torch.from_numpy(vel_y)
        self.vel_scale = 1.0 / std[self.vel_idx]
        self.fps = 30.0

    def __call__(self, x_hat: Any) -> Any:
        """Project normalised clean chunks ``(B, 15, 219)`` (returns a new tensor)."""
        torch = _require_torch()
        part = x_hat[self.rows]
        y = part[:, :, 1] * self.root_std + self.root_mean
        lift = (self.floor_y - y).clamp_min(0.0)  # (R, 15) metres
        if not bool((lift > 0).any()):
            return x_hat
        rate = torch.diff(lift, dim=1, prepend=torch.zeros_like(lift[:, :1])) * self.fps
        part = part.clone()
        part[:, :, self.lift_idx] += lift[:, :, None] * self.lift_scale
        part[:, :, self.vel_idx] += rate[:, :, None] * self.vel_scale
        out = x_hat.clone()
        out[self.rows] = part
        return out

    def wrap(self, velocity: Any) -> Any:
        def fn(x: Any, t: Any) -> Any:
            v = velocity(x, t)
            gap = (1.0 - t).clamp_min(self.min_gap)[:, None, None]
            x_hat = x + gap * v
            guarded = self(x_hat)
            return v if guarded is x_hat else (guarded - x) / gap

        return fn


def _check_pairs(
    pairs: Sequence[tuple[FlowMotionGenerator, Any]],
) -> list[tuple[FlowMotionGenerator, SkillCall]]:
    checked = []
    seen: set[int] = set()
    for i, pair in enumerate(pairs):
        if not isinstance(pair, tuple) or len(pair) != 2:
            raise ValueError(f"pairs[{i}] must be a (FlowMotionGenerator, SkillCall) tuple")
        gen, call = pair
        if not isinstance(gen, FlowMotionGenerator):
            raise TypeError(
                f"pairs[{i}][0] must be a FlowMotionGenerator, got {type(gen).__name__}"
            )
        if id(gen) in seen:
            raise ValueError(
                f"pairs[{i}]: the same generator appears twice (one chunk per generator per batch)"
            )
        seen.add(id(gen))
        checked.append((gen, SkillCall.coerce(call)))
    return checked


def generate_many(pairs: Sequence[tuple[FlowMotionGenerator, SkillCall | Any]]) -> list[np.ndarray]:
    """Generate one chunk for each ``(generator, call)`` pair in one batched integration.

    Each generator draws its own noise from its own RNG and advances its own history, so
    the result equals calling ``generator.generate(call)`` for each pair in turn (up to
    float rounding of the batched matrix products). Each generator may appear once.

    Returns:
        one ``float64 (15, 75)`` world chunk per pair, in order.
    """
    checked = _check_pairs(pairs)
    if not checked:
        return []
    return _run([gen._prepare(call) for gen, call in checked], commit=True)


class BatchedMotionService:
    """Batch the motion of several generators that live in one process.

    Two ways to use it:

    * ``service.generate_many([(gen, call), ...])``: compute and commit now (same as
      :func:`generate_many`).
    * ``service.stage([(gen, call), ...])``: compute all chunks in one batch and park each in
      its generator **without** committing; the generator's next ``generate(call)`` with an
      equal call returns the parked chunk and commits it. A different call discards it and
      restores the generator's RNG, so results never depend on whether staging happened.
      This is the hook for a ``SyncVectorEnv`` wrapper: before ``vec_env.step(actions)``,
      stage ``(sub_env motion generator, action)`` for every sub-env whose action is a
      motion skill; each sub-env's own ``step`` then picks its chunk up unchanged.

    Args:
        num_threads: torch intra-op threads for the batched model call (restored after
            it); None uses the process's setting (the generators set 1 by default). One
            process that steps several envs on threads (the batched vector env) gives the
            model call every core: a batch of 8 chunks has enough work per matrix product
            to use them, a single chunk has not. Results depend on the thread count only
            by float rounding; the same count gives the same bits.
    """

    def __init__(self, num_threads: int | None = None) -> None:
        self.num_threads = check_num_threads(num_threads)

    def _threads(self):
        return torch_threads("flow", self.num_threads)

    def generate_many(
        self, pairs: Sequence[tuple[FlowMotionGenerator, SkillCall | Any]]
    ) -> list[np.ndarray]:
        """See :func:`generate_many`."""
        with self._threads():
            return generate_many(pairs)

    def stage(self, pairs: Sequence[tuple[FlowMotionGenerator, SkillCall | Any]]) -> int:
        """Compute and park one chunk per pair (Stop calls are skipped).

        Returns:
            the number of chunks staged.
        """
        checked = [(g, c) for g, c in _check_pairs(pairs) if not c.is_stop]
        if not checked:
            return 0
        requests = [gen._prepare(call) for gen, call in checked]
        with self._threads():
            chunks = _run(requests, commit=False)
        for req, chunk in zip(requests, chunks, strict=True):
            req.owner._staged = _Staged(req.call, chunk, req.rng_state)
        return len(chunks)
