"""``PaperMotion``: the paper's motion model from a user's weight download (``"paper"``).

The published HumanClawBench table was produced with the release's MotionDiT plus one
control branch per skill. Given the weights its authors distribute (and the release's
manifest and seed state), this generator runs them behind our
:class:`~humanclaw_gym.backends.protocols.MotionGenerator` protocol:

1. the :class:`~humanclaw_gym.skills.SkillCall` becomes the release's skill and condition
   (:mod:`.conditioning`) and the skill's network input (:func:`.networks.condition_tensor`);
2. noise ``torch.randn((1, 15, 219))`` is drawn (from the episode's generator, see below)
   and integrated with the midpoint method over the skill's ``nfe_steps`` (30) through the
   base variant and the skill's control branch, conditioned on the 5-frame canonical history;
3. the 15 canonical frames are placed in the world and the last five re-canonicalised as
   the next history (:mod:`.placement`), exactly as the release's runner does;
4. the release's chunk (SMPL translation, root and joint axis-angles in its motion world,
   float32; :attr:`PaperMotion.release_chunk`) becomes our frame layout: world = the
   release's motion world turned by 180 degrees about +Y (x and z negated: the Habitat
   world of the reference episodes and of our scene datasets), and the SMPL translation
   plus the rest pelvis (turned by the start heading) = the pelvis position.

Noise. :meth:`~PaperMotion.reset` (the protocol; the env passes the episode seed) seeds the
generator the noise is drawn from (``generator`` when one was given, else one of its own
on ``device``), so an episode's motion does not depend on what ran before it in the
process. :meth:`~PaperMotion.reset_release` seeds nothing: noise comes from ``generator``
when given, else from torch's global generator, as in the release's runner, so the same
``torch.manual_seed`` before each chunk on CPU reproduces the release's chunk.

Batching. :func:`generate_many` and :class:`BatchedMotionService` (the hook of the vector
envs) compute the chunks of several generators in as few model calls as possible: rows are
grouped by base variant, the base's layers run once per group for all its rows, each
skill's control layers once for the rows of that skill. Results equal single calls up to
the float rounding of larger matrix products (docs/motion.md gives the measured size).
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from humanclaw_gym.backends.protocols import MotionCapabilities
from humanclaw_gym.body.skeleton import FRAME_DIM
from humanclaw_gym.motion.paper.conditioning import release_condition
from humanclaw_gym.motion.paper.manifest import (
    BRANCHES,
    PaperWeightsError,
    read_manifest,
    resolve_sources,
)
from humanclaw_gym.motion.paper.manifest import weights_record as _weights_record
from humanclaw_gym.motion.torch_threads import (
    check_num_threads,
    require_torch,
    set_num_threads,
    torch_threads,
)
from humanclaw_gym.rotations import matrix_from_rotvec, rot_y, rotvec_from_matrix
from humanclaw_gym.skills import SkillCall

__all__ = [
    "BatchedMotionService",
    "PaperMotion",
    "PaperMotionError",
    "generate_many",
]

_HISTORY = 5
_FUTURE = 15
_STATE = 219
#: Our world from the release's motion world: a half turn about +Y (x and z negated).
_HALF_TURN = rot_y(math.pi)
_SEED_FK_TOL_M = 1e-4
#: Largest seed state file read, bytes (the release's is 6.4 KB).
MAX_SEED_STATE_BYTES = 1 << 20
#: Largest magnitude of a seed state value (metres, radians, metres per frame; the
#: release's largest is 1.5): beyond it the networks overflow float32.
MAX_SEED_STATE_ABS = 100.0


class PaperMotionError(RuntimeError):
    """A chunk could not be generated (a non-finite result names the skill and its file)."""


def _require_torch() -> Any:
    return require_torch("paper")


def _device(value: Any) -> Any:
    torch = _require_torch()
    try:
        dev = torch.device(value)
    except (TypeError, RuntimeError):
        raise ValueError(
            f"device={value!r} is invalid: allowed 'cpu', 'cuda' or 'cuda:N'"
        ) from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            f"device={value!r} needs a CUDA build of torch and a visible GPU "
            "(torch.cuda.is_available() is False): use device='cpu'"
        )
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"device={value!r} is invalid: allowed 'cpu', 'cuda' or 'cuda:N'")
    return dev


def _load_seed_state(seed_state: Any, path: Any) -> Any:
    """The ``(5, 219)`` float32 seed state with neck and head zeroed, checked; a file is
    read and checked once per process per file state (:mod:`.verified`), each caller
    getting its own copy."""
    if path is None:
        return _checked_seed_state(seed_state, None)
    from humanclaw_gym.motion.paper.verified import once

    return once("seed_state", path, lambda: _read_seed_state(path)).clone()


def _read_seed_state(path: Any) -> Any:
    """The seed state file read (weights only) and checked."""
    return _checked_seed_state(None, path)


def _checked_seed_state(seed_state: Any, path: Any) -> Any:
    torch = _require_torch()
    import io

    from humanclaw_gym.fileio import FileContentError, read_bytes_limited
    from humanclaw_gym.motion.paper.manifest import _one_line
    from humanclaw_gym.motion.paper.placement import zero_neck_head

    where = "seed_state" if path is None else f"seed state {path}"
    if path is not None:
        try:
            data = read_bytes_limited(path, MAX_SEED_STATE_BYTES, "seed state")
            value = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
        except (FileContentError, FileNotFoundError) as exc:
            raise PaperWeightsError(f"paper motion: {_one_line(exc)}", path) from None
        except Exception as exc:
            raise PaperWeightsError(
                f"paper motion: {where} cannot be read as a weights-only torch file: "
                f"{type(exc).__name__}: {_one_line(exc)}",
                path,
            ) from None
        if isinstance(value, dict):
            if "state" not in value:
                raise PaperWeightsError(f"paper motion: {where} has no 'state' entry", path)
            value = value["state"]
    else:
        value = seed_state
    try:
        state = torch.as_tensor(
            np.asarray(value, dtype=np.float32) if not torch.is_tensor(value) else value,
            dtype=torch.float32,
        )
    except (TypeError, ValueError, RuntimeError, OverflowError) as exc:
        raise PaperWeightsError(
            f"paper motion: {where} is not numeric: {_one_line(exc)}", path
        ) from None
    if tuple(state.shape) != (_HISTORY, _STATE) or not bool(torch.isfinite(state).all()):
        raise PaperWeightsError(
            f"paper motion: {where} has shape {tuple(state.shape)}: allowed a finite "
            f"({_HISTORY}, {_STATE}) state",
            path,
        )
    largest = float(state.abs().max())
    if largest > MAX_SEED_STATE_ABS:
        raise PaperWeightsError(
            f"paper motion: {where} holds a value of magnitude {largest:.3g}: allowed at most "
            f"{MAX_SEED_STATE_ABS} (metres, radians, metres per frame)",
            path,
        )
    state = state.clone()
    state[:, 6:75] = zero_neck_head(state[:, 6:75])
    return state


def _rest_pelvis(seed: Any, path: Any) -> np.ndarray:
    """The SMPL rest pelvis ``J0``: joint 0 minus the translation of the (forward-kinematics)
    seed frames, the same in every frame."""
    offsets = (seed[:, 75:78] - seed[:, 0:3]).double().numpy()
    if float(np.abs(offsets - offsets[0]).max()) > _SEED_FK_TOL_M:
        raise PaperWeightsError(
            "paper motion: the seed state's joint 0 minus its translation differs between frames "
            f"by more than {_SEED_FK_TOL_M} m: not a forward-kinematics state",
            path,
        )
    return offsets[0].copy()


@dataclass
class _Request:
    owner: PaperMotion
    call: SkillCall
    skill: Any  # LoadedSkill
    cond: Any  # (1, k) tensor or None
    noise: Any  # (1, 15, 219)
    rng_state: Any


@dataclass
class _Result:
    call: SkillCall
    frames: np.ndarray  # ours, float64 (15, 75)
    release_chunk: np.ndarray  # the release's, float32 (15, 75)
    next_state: Any
    next_T: Any
    next_floor: Any
    rng_state: Any


class PaperMotion:
    """The release's MotionDiT and eight skill branches (see the module docstring).

    Args:
        weights_dir: the downloaded weights (``base/motion_dit.pt``, ``skills/*.pt``);
            default ``<release_dir>/weights/paper_fullval_v1``.
        manifest: the weight manifest; default
            ``<release_dir>/resources/weights/paper_fullval_v1.json``.
        seed_state: the ``(5, 219)`` seed state (a ``.pt`` file or an array); default
            ``<release_dir>/resources/seeds/natural_beta0_fk_seed.pt``.
        release_dir: a checkout of the reference release (for the defaults above).
        device: ``"cpu"`` or ``"cuda"`` / ``"cuda:N"``; everything runs in float32.
        generator: a ``torch.Generator`` on ``device`` to draw the noise from (see Noise).
        num_threads: ``torch.set_num_threads`` for this process (None leaves it alone).

    Every file is checked (size and SHA-256, then payload schema, tensor names, shapes,
    dtypes and finiteness) before the generator exists, once per process per file state
    (:mod:`.verified`: what the paper profile's check or ``BackendConfig.check()`` worked
    out is not worked out again); the networks are shared with every other ``PaperMotion``
    of the process that reads the same files on the same device.

    Raises:
        PaperWeightsError: a missing, altered or malformed file, naming it and its skill.
        ValueError: an invalid device, generator or thread count.
        ImportError: PyTorch is not installed.
    """

    #: It executes the release's skill branches (``manifest.BRANCHES``; Stop/Stand's stand
    #: branch is never asked for): the eight built-in skills only.
    capabilities = MotionCapabilities(
        name="paper",
        motion_keys=frozenset(
            b.skill.spec.motion_key for b in BRANCHES.values() if b.skill.spec.motion_key
        ),
        batched=True,
    )

    def __init__(
        self,
        weights_dir: str | os.PathLike[str] | None = None,
        manifest: str | os.PathLike[str] | None = None,
        seed_state: Any = None,
        release_dir: str | os.PathLike[str] | None = None,
        device: Any = "cpu",
        generator: Any = None,
        num_threads: int | None = None,
    ) -> None:
        torch = _require_torch()
        from humanclaw_gym.motion.paper.verified import file_sha256
        from humanclaw_gym.motion.paper.weights import load_models

        self.device = _device(device)
        if generator is not None:
            if not isinstance(generator, torch.Generator):
                raise ValueError(
                    f"generator={generator!r} is invalid: allowed a torch.Generator or None"
                )
            if torch.device(generator.device).type != self.device.type:
                raise ValueError(
                    f"generator is on {generator.device}, the model on {self.device}: pass a "
                    "generator of the model's device"
                )
        set_num_threads(torch, check_num_threads(num_threads))
        sources = resolve_sources(weights_dir, manifest, seed_state, release_dir)
        self.manifest = read_manifest(sources.manifest)
        seed = _load_seed_state(seed_state, sources.seed_state)
        self._rest_pelvis_m = _rest_pelvis(seed, sources.seed_state)
        self._models = load_models(self.manifest, sources.weights_dir, self.device)
        self._seed = seed.to(self.device)
        self.weights_dir = sources.weights_dir
        self.weights_info = {
            "generator": "paper",
            "manifest_sha256": self.manifest.sha256,
            "profile": self.manifest.profile,
            "checkpoint_step": self.manifest.checkpoint_step,
            "seed_state_sha256": None
            if sources.seed_state is None
            else file_sha256(sources.seed_state),
            "device": str(self.device),
            "dtype": "float32",
        }
        self.fps = 30.0
        self.frames_per_chunk = _FUTURE
        self.history_frames = _HISTORY
        self._user_rng = generator
        self._rng: Any = generator
        self._state: Any = None  # (1, 5, 219) canonical history
        self._T: Any = None  # (4, 4) placement in the release's motion world
        self._floor: Any = 0.0
        self._offset_m = np.zeros(3)  # pelvis = translation + this (our world)
        self._history: np.ndarray | None = None
        self._staged: _Result | None = None
        self.release_start: np.ndarray | None = None
        self.release_chunk: np.ndarray | None = None

    # ---- the fingerprint's description (no torch, no weights read) ---------------------
    @staticmethod
    def weights_record(**options: Any) -> dict[str, Any]:
        """What names this generator's results for the options it would be built with (the
        manifest's and the seed state's SHA-256, device, dtype); reads two small files."""
        return _weights_record(**options)

    # ---- protocol -----------------------------------------------------------------------
    def reset(self, start_position: np.ndarray, start_yaw_rad: float, seed: int = 0) -> np.ndarray:
        """Start an episode at ``start_position`` (x, floor y, z) facing ``start_yaw_rad``,
        as the release starts the equivalent reference episode (``init_offset = (-x, z,
        y)``, ``init_yaw = start_yaw - 180`` degrees); seeds the noise with ``seed``.

        Returns:
            ``float64 (5, 75)``: the seed state's frames placed at the start (the seed's
            translation above the start point, its pelvis a few cm ahead, as the release
            places it).
        """
        torch = _require_torch()
        start = np.asarray(start_position, dtype=np.float64)
        if start.shape != (3,) or not np.all(np.isfinite(start)):
            raise ValueError(
                f"start_position={start_position!r} is invalid: allowed 3 finite numbers"
            )
        if not np.isfinite(float(start_yaw_rad)):
            raise ValueError(f"start_yaw_rad={start_yaw_rad!r} is invalid: allowed a finite number")
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ValueError(f"seed={seed!r} is invalid: allowed an int >= 0")
        init_yaw = (math.degrees(float(start_yaw_rad)) - 180.0 + 180.0) % 360.0 - 180.0
        history = self._place((-start[0], start[2], start[1]), init_yaw)
        rng = self._user_rng if self._user_rng is not None else torch.Generator(device=self.device)
        rng.manual_seed(int(seed))
        self._rng = rng
        return history

    def reset_release(self, init_offset: Sequence[float], init_yaw_deg: float) -> np.ndarray:
        """Start an episode from the release's episode fields, exactly as its runner does.

        Args:
            init_offset: the episode's ``init_offset`` (x, z, y storage order of the
                release's motion world).
            init_yaw_deg: the episode's ``init_yaw`` (degrees about +Y).

        Returns:
            ``float64 (5, 75)`` seed frames in our world (see :meth:`reset`); the release's
            own start frame is :attr:`release_start`. Noise is then drawn from
            ``generator``, or torch's global generator when none was given.
        """
        offset = np.asarray(init_offset, dtype=np.float64)
        if offset.shape != (3,) or not np.all(np.isfinite(offset)):
            raise ValueError(f"init_offset={init_offset!r} is invalid: allowed 3 finite numbers")
        if not np.isfinite(float(init_yaw_deg)):
            raise ValueError(f"init_yaw_deg={init_yaw_deg!r} is invalid: allowed a finite number")
        history = self._place(tuple(float(v) for v in init_offset), float(init_yaw_deg))
        self._rng = self._user_rng
        return history

    def generate(self, call: SkillCall | Any) -> np.ndarray:
        """The next chunk of ``call`` (any form :meth:`SkillCall.coerce` accepts).

        Stop/Stand runs the release's stand branch (the env never asks for it: a Stop ends
        the episode).

        Returns:
            ``float64 (15, 75)`` world frames continuing the history.

        Raises:
            RuntimeError: before a reset.
            PaperMotionError: the network produced non-finite values (nothing changes).
        """
        call = SkillCall.coerce(call)
        staged = self._staged
        if staged is not None:
            self._staged = None
            if staged.call == call:
                self._commit(staged)
                return staged.frames.copy()
            self._set_rng_state(staged.rng_state)  # as if the staged chunk never happened
        return _run([self._prepare(call)], commit=True)[0]

    def history(self) -> np.ndarray:
        """Copy of the current ``(5, 75)`` world history."""
        if self._history is None:
            raise RuntimeError("PaperMotion.history called before reset()")
        return self._history.copy()

    def close(self) -> None:
        """Drop the episode state (the shared networks stay loaded). Idempotent."""
        self._state = None
        self._history = None
        self._staged = None

    @staticmethod
    def generate_batch(calls: Sequence[Any], generators: Sequence[PaperMotion]) -> list[np.ndarray]:
        """``[g.generate(c) for c, g in zip(calls, generators)]`` in one batched run."""
        if len(calls) != len(generators):
            raise ValueError(f"generate_batch: {len(calls)} calls but {len(generators)} generators")
        return generate_many(list(zip(generators, calls, strict=True)))

    # ---- placing the seed -------------------------------------------------------------
    def _place(self, init_offset: tuple[float, float, float], init_yaw_deg: float) -> np.ndarray:
        torch = _require_torch()
        from scipy.spatial.transform import Rotation

        offset = np.array(init_offset, dtype=np.float32)
        T = torch.eye(4)
        if init_yaw_deg != 0.0:
            yaw = np.radians(init_yaw_deg)
            T[:3, :3] = torch.tensor(
                Rotation.from_rotvec([0, yaw, 0]).as_matrix(), dtype=torch.float32
            )
        T[0, 3] = float(offset[0])
        T[1, 3] = float(offset[2])
        T[2, 3] = float(-offset[1])
        self._T = T.to(self.device)
        self._floor = 0.0
        self._state = self._seed.unsqueeze(0).clone()
        self._staged = None
        self.release_chunk = None

        seed = self._seed.cpu().numpy()
        R = T[:3, :3].numpy()
        t = T[:3, 3].numpy()
        first = seed[0, :75]
        orient0 = Rotation.from_matrix(R @ Rotation.from_rotvec(first[3:6]).as_matrix())
        self.release_start = np.concatenate(
            [
                (R @ first[:3] + t).astype(np.float32),
                orient0.as_rotvec().astype(np.float32),
                first[6:75],
            ]
        )
        # our world: the start heading turns the rest pelvis once, for the whole episode
        self._offset_m = rot_y(math.radians(init_yaw_deg) + math.pi) @ self._rest_pelvis_m
        R64, t64 = R.astype(np.float64), t.astype(np.float64)
        frames = seed[:, :75].astype(np.float64)
        world = np.empty_like(frames)
        world[:, :3] = frames[:, :3] @ R64.T + t64
        world[:, 3:6] = rotvec_from_matrix(R64 @ matrix_from_rotvec(frames[:, 3:6]))
        world[:, 6:] = frames[:, 6:]
        self._history = self._ours(world)
        return self._history.copy()

    def _ours(self, xb: np.ndarray) -> np.ndarray:
        """The release's ``(F, 75)`` frames (motion world, SMPL translation) -> ours."""
        xb = np.asarray(xb, dtype=np.float64)
        out = np.empty((xb.shape[0], FRAME_DIM))
        out[:, :3] = xb[:, :3] @ _HALF_TURN.T + self._offset_m
        out[:, 3:6] = rotvec_from_matrix(_HALF_TURN @ matrix_from_rotvec(xb[:, 3:6]))
        out[:, 6:] = xb[:, 6:75]
        return out

    # ---- noise --------------------------------------------------------------------------
    def _rng_state(self) -> Any:
        torch = _require_torch()
        if self._rng is not None:
            return self._rng.get_state()
        if self.device.type == "cuda":
            return torch.cuda.get_rng_state(self.device)
        return torch.get_rng_state()

    def _set_rng_state(self, state: Any) -> None:
        torch = _require_torch()
        if self._rng is not None:
            self._rng.set_state(state)
        elif self.device.type == "cuda":
            torch.cuda.set_rng_state(state, self.device)
        else:
            torch.set_rng_state(state)

    # ---- one request --------------------------------------------------------------------
    def _prepare(self, call: SkillCall) -> _Request:
        torch = _require_torch()
        from humanclaw_gym.motion.paper.networks import condition_tensor

        if self._state is None:
            raise RuntimeError("PaperMotion.generate called before reset()")
        if self._staged is not None:  # a staged chunk not consumed: give its noise back
            self._set_rng_state(self._staged.rng_state)
            self._staged = None
        name, raw = release_condition(call)
        skill = self._models.skills[name]
        cond = condition_tensor(name, raw, self.device)
        rng_state = self._rng_state()
        noise = torch.randn(
            (1, _FUTURE, _STATE), generator=self._rng, device=self.device, dtype=torch.float32
        )
        return _Request(self, call, skill, cond, noise, rng_state)

    def _finish(self, req: _Request, sample: Any) -> _Result:
        torch = _require_torch()
        from humanclaw_gym.motion.paper.placement import next_history, to_world

        if not bool(torch.isfinite(sample).all()):
            raise PaperMotionError(
                f"paper motion: skill {req.skill.name!r} ({req.skill.file}) produced non-finite "
                f"values for {req.call}"
            )
        transl, orient, pose, joints = to_world(sample, self._T, self._floor)
        release = (
            torch.cat([transl, orient, pose], dim=-1).cpu().numpy().astype(np.float32, copy=False)
        )
        if not np.all(np.isfinite(release)):
            raise PaperMotionError(
                f"paper motion: skill {req.skill.name!r} ({req.skill.file}) produced a chunk "
                f"that cannot be placed in the world for {req.call}"
            )
        state, T, floor = next_history(
            transl[-_HISTORY:],
            orient[-_HISTORY:],
            pose[-_HISTORY:],
            joints[-_HISTORY:],
            sample[-_HISTORY:, 147:219],
            self._T[:3, :3],
        )
        return _Result(
            req.call, self._ours(release), release, state.unsqueeze(0), T, floor, req.rng_state
        )

    def _commit(self, result: _Result) -> None:
        self._state = result.next_state
        self._T = result.next_T
        self._floor = result.next_floor
        self.release_chunk = result.release_chunk.copy()
        assert self._history is not None
        self._history = result.frames[-_HISTORY:].copy()


# ----------------------------------------------------------------------------------------
# integration (single and batched)
# ----------------------------------------------------------------------------------------
def _integrate(group: list[_Request]) -> Any:
    """Midpoint integration of one group (same models, base variant and step count):
    ``(rows, 15, 219)`` samples in the order of ``group``."""
    torch = _require_torch()
    models = group[0].owner._models
    first = group[0].skill
    base = first.base
    nfe = first.nfe_steps
    base_table = models.base_table(first.variant, nfe)
    order = sorted(range(len(group)), key=lambda i: group[i].skill.name)
    rows = [group[i] for i in order]
    segments = []
    start = 0
    while start < len(rows):
        skill = rows[start].skill
        stop = start
        while stop < len(rows) and rows[stop].skill is skill:
            stop += 1
        conds = [r.cond for r in rows[start:stop]]
        cond = skill.branch.condition(None if conds[0] is None else torch.cat(conds))
        segments.append((skill.branch, slice(start, stop), cond, models.skill_table(skill)))
        start = stop
    history = torch.cat([r.owner._state for r in rows])
    sample = torch.cat([r.noise for r in rows])
    layers = len(base.blocks)

    def velocity(x: Any, k: int) -> Any:
        tokens = base.tokens(torch.cat([history, x], dim=1))
        for i in range(layers):
            h_base = base.blocks[i](tokens, base_table.blocks[k][i])
            if len(segments) == 1:
                branch, _, cond, table = segments[0]
                h_ctrl = branch.ctrl_blocks[i](tokens + cond, table.blocks[k][i])
                tokens = h_base + branch.zero_linears[i](h_ctrl)
                continue
            parts = [
                branch.zero_linears[i](
                    branch.ctrl_blocks[i](tokens[rows_] + cond, table.blocks[k][i])
                )
                for branch, rows_, cond, table in segments
            ]
            tokens = h_base + torch.cat(parts)
        return base.final_layer(tokens, base_table.final[k])[:, _HISTORY:]

    dt = 1.0 / nfe
    for step in range(nfe):
        v = velocity(sample, 2 * step)
        midpoint = sample + dt * 0.5 * v
        v_mid = velocity(midpoint, 2 * step + 1)
        sample = sample + dt * v_mid
    out = torch.empty_like(sample)
    out[torch.tensor(order, device=sample.device)] = sample
    return out


def _compute(requests: list[_Request]) -> list[_Result]:
    """Integrate requests grouped by models, base variant and steps, and finish each; on
    any failure every request's noise goes back and the error propagates."""
    torch = _require_torch()
    groups: dict[tuple, list[int]] = {}
    for i, req in enumerate(requests):
        key = (id(req.owner._models), req.skill.variant, req.skill.nfe_steps, req.owner.device)
        groups.setdefault(key, []).append(i)
    results: list[_Result | None] = [None] * len(requests)
    try:
        with torch.inference_mode():
            for idx in groups.values():
                samples = _integrate([requests[i] for i in idx])
                for row, i in enumerate(idx):
                    results[i] = requests[i].owner._finish(requests[i], samples[row])
    except BaseException:
        for req in requests:  # nothing happened: the noise goes back
            req.owner._set_rng_state(req.rng_state)
        raise
    return [r for r in results if r is not None]


def _prepare_all(pairs: list[tuple[PaperMotion, SkillCall]]) -> list[_Request]:
    requests: list[_Request] = []
    try:
        for gen, call in pairs:
            requests.append(gen._prepare(call))
    except BaseException:
        for req in requests:
            req.owner._set_rng_state(req.rng_state)
        raise
    return requests


def _run(requests: list[_Request], commit: bool) -> list[np.ndarray]:
    """Compute the requests, then commit them all (only when every one succeeded)."""
    results = _compute(requests)
    if commit:
        for req, result in zip(requests, results, strict=True):
            req.owner._commit(result)
    return [r.frames.copy() for r in results]


def _check_pairs(pairs: Sequence[tuple[PaperMotion, Any]]) -> list[tuple[PaperMotion, SkillCall]]:
    checked = []
    seen: set[int] = set()
    for i, pair in enumerate(pairs):
        if not isinstance(pair, tuple) or len(pair) != 2:
            raise ValueError(f"pairs[{i}] must be a (PaperMotion, SkillCall) tuple")
        gen, call = pair
        if not isinstance(gen, PaperMotion):
            raise TypeError(f"pairs[{i}][0] must be a PaperMotion, got {type(gen).__name__}")
        if id(gen) in seen:
            raise ValueError(
                f"pairs[{i}]: the same generator appears twice (one chunk per generator)"
            )
        seen.add(id(gen))
        checked.append((gen, SkillCall.coerce(call)))
    return checked


def generate_many(pairs: Sequence[tuple[PaperMotion, SkillCall | Any]]) -> list[np.ndarray]:
    """One chunk per ``(generator, call)`` pair, computed together (see the module
    docstring); each generator draws its own noise and advances its own history, so the
    result equals ``generator.generate(call)`` per pair up to float rounding.

    Returns:
        one ``float64 (15, 75)`` world chunk per pair, in order.
    """
    checked = _check_pairs(pairs)
    if not checked:
        return []
    return _run(_prepare_all(checked), commit=True)


class BatchedMotionService:
    """Batch the paper motion of several generators living in one process.

    ``generate_many(pairs)`` computes and commits now; ``stage(pairs)`` computes every chunk
    together and parks each in its generator, whose next ``generate(call)`` with the same
    call returns it (another call discards it and restores that generator's noise): the
    hook of :class:`~humanclaw_gym.envs.vector.BatchedMotionSyncVectorEnv` and the batched
    vector env.

    Args:
        num_threads: torch threads for the batched call (restored after it); None leaves
            the process's setting.
    """

    def __init__(self, num_threads: int | None = None) -> None:
        self.num_threads = check_num_threads(num_threads)
        self._lock = threading.Lock()

    def _threads(self):
        return torch_threads("paper", self.num_threads)

    def generate_many(
        self, pairs: Sequence[tuple[PaperMotion, SkillCall | Any]]
    ) -> list[np.ndarray]:
        """See :func:`generate_many`."""
        with self._lock, self._threads():
            return generate_many(pairs)

    def stage(self, pairs: Sequence[tuple[PaperMotion, SkillCall | Any]]) -> int:
        """Compute and park one chunk per pair (Stop calls are skipped: they end an episode).

        Returns:
            the number of chunks staged.
        """
        checked = [(g, c) for g, c in _check_pairs(pairs) if not c.is_stop]
        if not checked:
            return 0
        with self._lock, self._threads():
            requests = _prepare_all(checked)
            results = _compute(requests)
        for req, result in zip(requests, results, strict=True):
            req.owner._staged = result
        return len(results)
