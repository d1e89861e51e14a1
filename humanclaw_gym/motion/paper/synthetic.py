"""Random weights in the release's layout and manifest format (torch), for tests and the
benchmark harness: no released file is needed to exercise every code path of
:class:`~humanclaw_gym.motion.paper.PaperMotion`.

:func:`write_synthetic_release` writes a directory shaped like a release checkout with its
weights downloaded::

    <root>/resources/weights/paper_fullval_v1.json    manifest (humanclaw_weight_manifest_v2)
    <root>/resources/seeds/natural_beta0_fk_seed.pt   {"state": (5, 219) float32}
    <root>/weights/paper_fullval_v1/base/motion_dit.pt
    <root>/weights/paper_fullval_v1/skills/<skill>.pt  (bf16-group controls stored as bf16)

so ``PaperMotion(release_dir=root)`` loads it. Every weight is drawn from a normal
distribution (``weight_std``; LayerNorm gains around 1), the sinusoid tables and Fourier
octaves keep their exact values, and the seed state is this package's standing pose with
SMPL conventions (translation = pelvis - ``REST_PELVIS_M``, joint positions by forward
kinematics, zero velocities). The architecture defaults to the release's sizes; smaller
ones make fast tests.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from humanclaw_gym.fileio import atomic_path, write_json_atomic
from humanclaw_gym.motion.paper.manifest import (
    BASE_PAYLOAD_SCHEMA,
    BRANCHES,
    CONTROL_PAYLOAD_SCHEMA,
    MANIFEST_SCHEMA,
    RELEASE_MANIFEST,
    RELEASE_SEED_STATE,
    RELEASE_WEIGHTS_DIR,
    Architecture,
    sha256_file,
)
from humanclaw_gym.motion.paper.networks import new_base, new_branch

__all__ = ["PAPER_BASE_VARIANTS", "REST_PELVIS_M", "SyntheticRelease", "write_synthetic_release"]

#: The SMPL neutral body's rest pelvis (beta = 0), metres: joint 0 minus the translation of
#: any forward-kinematics frame of it (the release's seed state has exactly this offset).
REST_PELVIS_M = (-0.00179506, -0.22333348, 0.02821913)
#: The base variant each skill was evaluated with in the paper.
PAPER_BASE_VARIANTS: dict[str, str] = {
    "walk_forward": "bf16_roundtrip",
    "side_walk": "fp32",
    "step_back": "fp32",
    "turn": "bf16_roundtrip",
    "step_climb_up": "fp32",
    "step_climb_down": "fp32",
    "stand": "bf16_roundtrip",
    "sit": "bf16_roundtrip",
}
_FIXED_BUFFERS = ("pe", "freqs")
_GAINS = ("ln.weight", "q_norm.weight", "k_norm.weight")


@dataclass(frozen=True)
class SyntheticRelease:
    """Paths of a written synthetic release."""

    root: Path
    weights_dir: Path
    manifest: Path
    seed_state: Path


def _randomise(
    module: torch.nn.Module, rng: torch.Generator, std: float
) -> dict[str, torch.Tensor]:
    state = {}
    for name, value in module.state_dict().items():
        if name.rsplit(".", 1)[-1] in _FIXED_BUFFERS:
            state[name] = value.detach().clone()
            continue
        noise = torch.randn(value.shape, generator=rng, dtype=torch.float32) * std
        state[name] = noise + 1.0 if name.endswith(_GAINS) else noise
    return state


def _save(path: Path, schema: str, state: dict[str, torch.Tensor]) -> None:
    with atomic_path(path) as tmp:
        torch.save({"schema": schema, "state_dict": state}, tmp)


def _pinned(path: Path, weights_dir: Path, storage: str) -> dict:
    return {
        "path": path.relative_to(weights_dir).as_posix(),
        "storage": storage,
        "size_bytes": path.stat().st_size,
        "sha256": sha256_file(path),
    }


def standing_seed_state() -> np.ndarray:
    """A ``(5, 219)`` float32 standing seed in the release's canonical SMPL conventions."""
    from humanclaw_gym.body.skeleton import forward_kinematics
    from humanclaw_gym.motion.procedural import ProceduralMotionGenerator

    frames = ProceduralMotionGenerator().reset(np.zeros(3), 0.0, seed=0)
    joints, _ = forward_kinematics(frames)
    state = np.zeros((5, 219))
    state[:, :3] = frames[:, :3] - np.asarray(REST_PELVIS_M)
    state[:, 3:75] = frames[:, 3:75]
    state[:, 75:147] = joints.reshape(5, 72)
    return state.astype(np.float32)


def write_synthetic_release(
    root: str | os.PathLike[str],
    *,
    hidden_dim: int = 512,
    num_layers: int = 10,
    num_heads: int = 8,
    mlp_ratio: float = 2.0,
    use_qk_norm: bool = False,
    nfe_steps: int = 30,
    n_freqs: int = 6,
    weight_std: float = 0.02,
    seed: int = 0,
) -> SyntheticRelease:
    """Write random weights, a manifest and a seed state in the release's layout.

    Args:
        root: the directory to write (it becomes a ``release_dir``).
        hidden_dim, num_layers, num_heads, mlp_ratio, use_qk_norm: the base architecture
            (defaults: the release's; ``x_dim`` 219, 5 history and 15 future frames).
        nfe_steps: solver steps of every skill.
        n_freqs: octaves of the Fourier encoders.
        weight_std: standard deviation of every random weight.
        seed: the random stream.
    """
    root = Path(root)
    weights_dir = root / RELEASE_WEIGHTS_DIR
    arch = Architecture(
        219, hidden_dim, num_layers, num_heads, float(mlp_ratio), 5, 15, nfe_steps, use_qk_norm
    )
    rng = torch.Generator().manual_seed(int(seed))
    base_path = weights_dir / "base" / "motion_dit.pt"
    _save(base_path, BASE_PAYLOAD_SCHEMA, _randomise(new_base(arch), rng, weight_std))
    skills = {}
    for name, spec in BRANCHES.items():
        state = _randomise(new_branch(arch, name, n_freqs), rng, weight_std)
        variant = PAPER_BASE_VARIANTS[name]
        if variant == "bf16_roundtrip":  # the release stores these on the bf16 grid
            state = {k: v.to(torch.bfloat16) for k, v in state.items()}
        path = weights_dir / "skills" / f"{name}.pt"
        _save(path, CONTROL_PAYLOAD_SCHEMA, state)
        entry = {
            **_pinned(path, weights_dir, "control_state_v1"),
            "base_variant": variant,
            "network": spec.network,
            "kind": spec.kind,
            "nfe_steps": nfe_steps,
        }
        if spec.n_freqs:
            entry["n_freqs"] = n_freqs
        skills[name] = entry
    manifest = {
        "schema": MANIFEST_SCHEMA,
        "profile": "synthetic",
        "selection_policy": "exact_step_only",
        "checkpoint_step": 0,
        "base": {
            **_pinned(base_path, weights_dir, "motion_dit_state_v1"),
            "architecture": arch.to_dict(),
        },
        "base_variants": {
            "fp32": {"transform": "identity"},
            "bf16_roundtrip": {"transform": "bf16_roundtrip"},
        },
        "skills": skills,
        "notes": ["random weights written by humanclaw_gym.motion.paper.synthetic"],
    }
    manifest_path = root / RELEASE_MANIFEST
    write_json_atomic(manifest_path, manifest)
    seed_path = root / RELEASE_SEED_STATE
    with atomic_path(seed_path) as tmp:
        torch.save({"state": torch.from_numpy(standing_seed_state())}, tmp)
    return SyntheticRelease(root, weights_dir, manifest_path, seed_path)
