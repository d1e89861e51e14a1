"""Train the flow-matching MotionDiT (base, then one control branch per skill) on CPU.

Reads top to bottom:

1. ``Args``: every knob, with defaults that reproduce the shipped checkpoint's recipe.
2. Data: chunks from the procedural synthesizer (random skill sequences, a style seed per
   episode, continuous parameters), plus optional user mocap (``--mocap clip.npz``: frames
   (T, 75) at 30 fps) and SMPL-X mocap (``--smplx-mocap file.npz --body-model-dir DIR``).
   Mocap windows train the base; those whose root motion matches a skill also train that
   skill's branch (hindsight labels).
3. Normalisation: per-dimension mean/std of all training states (stored in the checkpoint).
4. Stage "base": the MotionDiT without branches learns the velocity field of the
   rectified-flow path ``x_t = (1 - t) noise + t data`` given only the history.
5. Stage "branches": each branch is created as a copy of the trained base's first blocks
   with zero output projections, the base is frozen, and every branch learns from its own
   skill's chunks (batches are balanced across branches and routed per row).
6. The exponential moving average of the weights is written as a checkpoint
   (``humanclaw_flow_motion_v1``: config, normalisation, weights, SHA-256 manifest).

Losses go to tqdm, ``<out>.log.csv`` and the checkpoint metadata. Example (the shipped
checkpoint; see docs/motion_flow.md for the exact command)::

    python scripts/train_motion.py --out humanclaw_gym/assets/motion/flow_default \\
        --time-budget-min 25 --threads 1
"""

from __future__ import annotations

import csv
import json
import math
import os
import platform
import shlex
import sys
import time
from dataclasses import asdict, dataclass

import numpy as np
import torch
import tyro
from tqdm import tqdm

from humanclaw_gym.motion.flow.checkpoint import load_checkpoint, save_checkpoint
from humanclaw_gym.motion.flow.dataset import (
    BRANCHES,
    ChunkSet,
    load_mocap_npz,
    mocap_chunks,
    normalized_condition,
    procedural_chunks,
)
from humanclaw_gym.motion.flow.model import FlowModelConfig, MotionDiT
from humanclaw_gym.motion.flow.sampler import flow_matching_loss


@dataclass
class Args:
    out: str = "runs/flow_motion"
    """checkpoint directory to write (replaced atomically)"""
    episodes: int = 1000
    """procedural episodes (random skill sequences, one style seed each)"""
    calls_per_episode: int = 24
    """skill calls (chunks) per procedural episode"""
    data_seed: int = 0
    """seed of the procedural data set"""
    dataset_cache: str | None = None
    """optional .npz to load the procedural chunks from (or write them to)"""
    mocap: tuple[str, ...] = ()
    """user mocap clips: .npz files with frames (T, 75) at 30 fps"""
    smplx_mocap: tuple[str, ...] = ()
    """AMASS-style SMPL-X clips (trans, root_orient, pose_body, optional betas); needs --body-model-dir"""
    body_model_dir: str | None = None
    """directory with the licensed SMPL-X model files (SMPLX_NEUTRAL.npz, ...)"""
    mocap_stride: int = 5
    """frames between mocap window starts"""
    d_model: int = 128
    n_layers: int = 4
    n_heads: int = 4
    ff_mult: int = 2
    control_layers: int = 2
    cond_features: int = 4
    base_steps: int = 4000
    """maximum optimiser steps of the base stage"""
    branch_steps: int = 4000
    """maximum optimiser steps of the branch stage (all branches together)"""
    time_budget_min: float | None = None
    """wall-clock budget for both training stages (minutes); data building not included"""
    base_fraction: float = 0.4
    """share of the time budget given to the base stage"""
    batch_size: int = 128
    lr: float = 1e-3
    warmup_steps: int = 200
    ema_decay: float = 0.998
    history_noise: float = 0.02
    """std of Gaussian noise added to the normalised history (robustness to own outputs)"""
    loss_weighting: str = "data"
    """time weighting of the velocity loss: data ((1 - t)^2, the implied clean-sample error) or velocity (none)"""
    root_loss_weight: float = 4.0
    """loss weight of the 6 root dimensions (position, orientation) relative to the rest"""
    val_fraction: float = 0.03
    log_every: int = 50
    threads: int = 1
    """torch.set_num_threads (the shipped checkpoint was trained on one thread)"""
    seed: int = 0
    log_csv: str | None = None
    """loss log (CSV); default: <out>.log.csv next to the checkpoint directory"""
    weights_dtype: str = "float32"
    """float32, or float16 to halve the checkpoint size"""
    init_checkpoint: str | None = None
    """fine-tune: start from this checkpoint; its architecture and normalisation are kept (the
    model-size flags are ignored), its branches are trained further instead of re-created,
    and the base stage runs only when --base-steps > 0"""
    train_branches: tuple[str, ...] = ()
    """branch stage: train only these branches (names as in BRANCHES); default all"""


def build_dataset(args: Args) -> tuple[ChunkSet, dict]:
    """Procedural chunks (+ mocap chunks) and a summary for the metadata."""
    if args.dataset_cache and os.path.exists(args.dataset_cache):
        proc = ChunkSet.load(args.dataset_cache)
        print(f"loaded {len(proc)} procedural chunks from {args.dataset_cache}")
    else:
        with tqdm(total=args.episodes, desc="procedural data", unit="ep") as bar:
            proc = procedural_chunks(
                args.episodes, args.calls_per_episode, seed=args.data_seed, progress=bar.update
            )
        if args.dataset_cache:
            proc.save(args.dataset_cache)
    sets = [proc]
    for path in args.mocap:
        sets.append(mocap_chunks(load_mocap_npz(path), stride=args.mocap_stride))
    if args.smplx_mocap:
        if not args.body_model_dir:
            raise SystemExit(
                "--smplx-mocap needs --body-model-dir (the licensed SMPL-X model files)"
            )
        from humanclaw_gym.body.smplx_model import SmplxBody
        from humanclaw_gym.motion.flow.smplx_io import smplx_clip_to_chunks

        body = SmplxBody(args.body_model_dir)
        for path in args.smplx_mocap:
            sets.append(smplx_clip_to_chunks(path, body, stride=args.mocap_stride))
    data = ChunkSet.concatenate(sets)
    summary = {
        "procedural_chunks": len(proc),
        "mocap_chunks": len(data) - len(proc),
        "per_branch": {name: int((data.branch == i).sum()) for i, name in enumerate(BRANCHES)},
        "unlabelled": int((data.branch < 0).sum()),
    }
    return data, summary


def normalization(data: ChunkSet) -> tuple[np.ndarray, np.ndarray]:
    """Per-dimension mean/std over every history and future state (std floored)."""
    states = np.concatenate(
        [
            data.history.reshape(-1, data.history.shape[-1]),
            data.future.reshape(-1, data.future.shape[-1]),
        ]
    ).astype(np.float64)
    mean = states.mean(axis=0)
    std = np.maximum(states.std(axis=0), 1e-3)
    return mean, std


def lr_at(step: int, progress: float, args: Args) -> float:
    """Linear warm-up, then cosine decay over the stage's progress (0..1)."""
    warm = min(1.0, (step + 1) / max(1, args.warmup_steps))
    return args.lr * warm * (0.05 + 0.95 * 0.5 * (1.0 + math.cos(math.pi * min(progress, 1.0))))


class Ema:
    """Exponential moving average of the parameters a stage trains; the rest of the state
    is copied as it is (so frozen weights stay bit-identical)."""

    def __init__(self, model: torch.nn.Module, decay: float, params: list) -> None:
        self.decay = decay
        trained = {id(p) for p in params}
        self.averaged = {n for n, p in model.named_parameters() if id(p) in trained}
        self.shadow = {k: v.detach().clone() for k, v in model.state_dict().items()}

    @torch.no_grad()
    def update(self, model: torch.nn.Module, step: int) -> None:
        d = min(self.decay, (1.0 + step) / (10.0 + step))
        for k, v in model.state_dict().items():
            if k in self.averaged:
                self.shadow[k].mul_(d).add_(v.detach(), alpha=1.0 - d)
            else:
                self.shadow[k].copy_(v)


def main(args: Args) -> dict:
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    t_start = time.time()

    # ---- data -----------------------------------------------------------------------
    unknown = sorted(set(args.train_branches) - set(BRANCHES))
    if unknown:
        raise SystemExit(f"--train-branches: unknown {unknown}; allowed {list(BRANCHES)}")
    init = load_checkpoint(args.init_checkpoint) if args.init_checkpoint else None
    data, data_summary = build_dataset(args)
    # a fine-tuned model must see its states normalised exactly as before
    mean, std = (init.mean, init.std) if init is not None else normalization(data)
    hist = torch.from_numpy(((data.history - mean) / std).astype(np.float32))
    fut = torch.from_numpy(((data.future - mean) / std).astype(np.float32))
    branch = torch.from_numpy(data.branch)
    labelled = data.branch >= 0
    cond_np = np.zeros(len(data), dtype=np.float32)
    cond_np[labelled] = normalized_condition(data.branch[labelled], data.condition[labelled])
    cond = torch.from_numpy(cond_np)
    order = rng.permutation(len(data))
    n_val = max(1, int(args.val_fraction * len(data)))
    val_idx, train_idx = order[:n_val], order[n_val:]
    train_by_branch = [train_idx[data.branch[train_idx] == b] for b in range(len(BRANCHES))]
    data_seconds = time.time() - t_start
    print(f"{len(data)} chunks ({data_summary}), built in {data_seconds:.0f} s")

    # ---- model ----------------------------------------------------------------------
    config = FlowModelConfig(
        d_model=args.d_model,
        n_layers=args.n_layers,
        n_heads=args.n_heads,
        ff_mult=args.ff_mult,
        control_layers=args.control_layers,
        cond_features=args.cond_features,
        branches=BRANCHES,
    )
    if init is not None:
        config, model = init.config, init.model
        model.train()
        for p in model.parameters():
            p.requires_grad_(True)
    else:
        model = MotionDiT(config)
    weights = torch.ones(config.state_dim)
    weights[:6] = args.root_loss_weight
    weights = weights / weights.mean()

    log_path = args.log_csv or os.path.abspath(args.out.rstrip("/")) + ".log.csv"
    log_path = os.path.abspath(log_path)
    os.makedirs(os.path.dirname(log_path), exist_ok=True)
    log_file = open(log_path, "w", newline="")
    log = csv.writer(log_file)
    log.writerow(["stage", "step", "seconds", "lr", "train_loss", "val_loss"])
    history_log: dict[str, list] = {"base": [], "branches": []}

    def batch(idx: np.ndarray, with_branch: bool) -> tuple:
        i = torch.from_numpy(idx)
        h = hist[i]
        if args.history_noise > 0:
            h = h + args.history_noise * torch.randn(h.shape, generator=gen)
        if with_branch:
            return h, fut[i], branch[i], cond[i]
        return h, fut[i], None, None

    @torch.no_grad()
    def val_loss(with_branch: bool) -> float:
        idx = val_idx if not with_branch else val_idx[data.branch[val_idx] >= 0]
        g = torch.Generator().manual_seed(1234)
        total = 0.0
        for s in range(0, len(idx), 256):
            part = idx[s : s + 256]
            i = torch.from_numpy(part)
            h, x1 = hist[i], fut[i]
            b, c = (branch[i], cond[i]) if with_branch else (None, None)
            loss = flow_matching_loss(
                lambda x, t, h=h, b=b, c=c: model(x, t, h, b, c),
                x1,
                g,
                weights,
                args.loss_weighting,
            )
            total += float(loss) * len(part)
        return total / max(1, len(idx))

    def run_stage(name: str, params: list, steps: int, budget_s: float | None, sample) -> None:
        opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.0)
        ema = Ema(model, args.ema_decay, params)
        t0 = time.time()
        bar = tqdm(total=steps, desc=f"stage {name}", unit="step")
        running = None
        step = 0
        for step in range(steps):
            elapsed = time.time() - t0
            progress = step / steps
            if budget_s is not None:
                progress = max(progress, elapsed / budget_s)
                if elapsed >= budget_s:
                    break
            lr = lr_at(step, progress, args)
            for group in opt.param_groups:
                group["lr"] = lr
            h, x1, b, c = sample()
            loss = flow_matching_loss(
                lambda x, t, h=h, b=b, c=c: model(x, t, h, b, c),
                x1,
                gen,
                weights,
                args.loss_weighting,
            )
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            ema.update(model, step)
            value = loss.item()
            running = value if running is None else 0.98 * running + 0.02 * value
            bar.update(1)
            if step % args.log_every == 0 or step == steps - 1:
                bar.set_postfix(loss=f"{running:.4f}", lr=f"{lr:.1e}")
                vl = ""
                if step % (args.log_every * 10) == 0:
                    vl = f"{val_loss(name == 'branches'):.5f}"
                log.writerow(
                    [name, step, f"{time.time() - t0:.1f}", f"{lr:.3e}", f"{running:.5f}", vl]
                )
                log_file.flush()
        bar.close()
        model.load_state_dict(ema.shadow)
        final_val = val_loss(name == "branches")
        log.writerow(
            [name, step + 1, f"{time.time() - t0:.1f}", "", f"{running:.5f}", f"{final_val:.5f}"]
        )
        log_file.flush()
        history_log[name] = {
            "steps": step + 1,
            "seconds": round(time.time() - t0, 1),
            "final_train_loss_ema": running,
            "final_val_loss": final_val,
        }
        print(f"stage {name}: {step + 1} steps, val loss (EMA weights) {final_val:.5f}")

    budget = None if args.time_budget_min is None else args.time_budget_min * 60.0
    base_budget = None if budget is None else budget * args.base_fraction

    # ---- stage 1: the base ------------------------------------------------------------
    def sample_base() -> tuple:
        return batch(rng.choice(train_idx, size=args.batch_size), with_branch=False)

    if args.base_steps > 0:
        run_stage("base", model.base_parameters(), args.base_steps, base_budget, sample_base)

    # ---- stage 2: one control branch per skill, base frozen ---------------------------
    if init is None:
        model.reset_control()  # fresh branches from the trained base
    for p in model.base_parameters():
        p.requires_grad_(False)
    chosen = [BRANCHES.index(name) for name in args.train_branches] or range(len(BRANCHES))
    for b, name in enumerate(BRANCHES):
        for p in model.control[name].parameters():
            p.requires_grad_(b in chosen)
    active = [b for b in chosen if len(train_by_branch[b])]

    def sample_branches() -> tuple:
        picks = rng.choice(active, size=args.batch_size)
        idx = np.array([rng.choice(train_by_branch[b]) for b in picks])
        return batch(idx, with_branch=True)

    branch_budget = None if budget is None else budget - (time.time() - t_start - data_seconds)
    run_stage(
        "branches",
        [p for p in model.control.parameters() if p.requires_grad],
        args.branch_steps,
        branch_budget,
        sample_branches,
    )
    log_file.close()

    # ---- checkpoint -------------------------------------------------------------------
    metadata = {
        "command": "python scripts/train_motion.py " + shlex.join(sys.argv[1:]),
        "args": asdict(args),
        "data": data_summary,
        "stages": history_log,
        "data_seconds": round(data_seconds, 1),
        "total_seconds": round(time.time() - t_start, 1),
        "init_checkpoint": None
        if init is None
        else {
            "path": str(init.path),
            "manifest_sha256": init.manifest_sha256,
            "command": init.metadata.get("command"),
        },
        "torch": torch.__version__,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "created_unix": int(time.time()),
    }
    path = save_checkpoint(args.out, model, mean, std, metadata, weights_dtype=args.weights_dtype)
    print(f"wrote {path} ({sum(f.stat().st_size for f in path.iterdir()) / 1e6:.2f} MB)")
    print(json.dumps(history_log, indent=2))
    return metadata


if __name__ == "__main__":
    main(tyro.cli(Args))
