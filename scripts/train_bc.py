"""Train the behaviour-cloning CNN policy on recorded oracle demonstrations.

Reads top to bottom:

1. :class:`Args` (tyro): dataset, network size, optimiser, time budget, output.
2. :func:`load_samples`: one ordered pass of :func:`humanclaw_gym.data.window_batches`
   over the dataset; every window is area-downsampled to ``image_size`` once (the same
   :func:`humanclaw_agents.bc_policy.downsample_frames` the policy uses at run time) and
   kept in memory together with its targets, the previous decision's skill, and the
   target-in-view label stored as policy text by ``scripts/record_demos.py``. ``keep``
   selects demos by their outcome in ``demos_summary.json`` (default: active stop within
   0.2 m of the target).
   Episodes are split into train / held-out by a hash of their id.
3. :func:`compute_losses`: cross entropy on the skill (optionally class-balanced), plus,
   masked to the decisions whose skill reads them, cross entropy on speed (Walk) and
   direction (Turn, Side step), and squared error on the angle (Turn), step-back distance,
   side-step distance and sit height, each normalised to its action-space range; binary
   cross entropy on target visibility.
4. the loop: AdamW, random shifts and brightness jitter, a wall-clock budget
   (``max_minutes``), losses logged every ``log_every`` steps and to ``<output>.log.jsonl``,
   held-out metrics after every epoch, and an atomic checkpoint
   (:func:`humanclaw_agents.bc_policy.save_checkpoint`) at epoch ends (at most once a
   minute) and at the end, holding the weights of the epoch with the lowest held-out loss
   (``keep_best``) or the last weights.

Example::

    python scripts/train_bc.py --dataset outputs/bc/demos --output outputs/bc/bc_policy.pt \\
        --max-minutes 12
"""

from __future__ import annotations

import json
import os
import sys
import time
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import tyro

_SUMMARY_FILE = "demos_summary.json"
_SAVE_EVERY_S = 60.0  # intermediate checkpoints at epoch ends, at most this often


@dataclass
class Args:
    """Train a BC policy on a humanclaw_demos_v1 dataset."""

    dataset: Path = Path("outputs/bc/demos")
    """dataset directory written by scripts/record_demos.py"""
    output: Path = Path("outputs/bc/bc_policy.pt")
    """checkpoint file (written atomically); the log goes to <output>.log.jsonl"""
    history: int = 2
    """ego frames per decision"""
    image_size: int = 112
    """network input side (pixels)"""
    channels: tuple[int, ...] = (32, 64, 96, 128)
    """channels of the stride-2 convolutions"""
    hidden: int = 256
    """width of the fully connected trunk"""
    dropout: float = 0.1
    """dropout before the heads"""
    use_previous_skill: bool = True
    """condition on the skill chosen at the previous decision"""
    batch_size: int = 64
    """samples per optimiser step"""
    lr: float = 1e-3
    """AdamW learning rate"""
    weight_decay: float = 1e-4
    """AdamW weight decay"""
    max_minutes: float = 12.0
    """wall-clock training budget (data loading not included)"""
    max_epochs: int = 1000
    """upper bound on epochs"""
    max_steps: int | None = None
    """upper bound on optimiser steps (None: budget and epochs only)"""
    keep: Literal["success", "nav", "all"] = "nav"
    """which demos to train on (from demos_summary.json): "success" = task success
    (InteractSR for bed/couch/toilet, else NavSR@20cm); "nav" = an active stop within
    0.2 m of the target (NavSR@20cm; also keeps sit-downs without pelvis contact); "all" = every demo"""
    holdout_fraction: float = 0.1
    """fraction of episodes (by a hash of the id) held out for evaluation"""
    keep_best: bool = True
    """write the weights of the epoch with the lowest held-out loss (False: the last ones)"""
    balance_skills: bool = False
    """weight the skill loss by inverse square-root class frequency (on val100 this made
    the policy side-step far more often than the oracle and lowered every success rate)"""
    augment: bool = True
    """random shifts (up to 1/28 of the image) and brightness jitter"""
    regression_weight: float = 1.0
    """weight of the masked regression losses"""
    visible_weight: float = 0.5
    """weight of the visibility loss"""
    seed: int = 0
    """seed of the initialisation, the epoch order and the augmentation"""
    threads: int = 1
    """torch CPU threads"""
    log_every: int = 25
    """log the losses every N optimiser steps"""
    quiet: bool = False
    """no stdout logging"""


# ----------------------------------------------------------------------------------------
# data
# ----------------------------------------------------------------------------------------
@dataclass
class Samples:
    """Every window of the dataset, downsampled, with its targets (numpy, in memory)."""

    frames: np.ndarray  # uint8 [N, history, S, S, 3]
    frame_mask: np.ndarray  # bool [N, history]
    skill: np.ndarray  # int64 [N]
    speed: np.ndarray  # int64 [N]
    direction: np.ndarray  # int64 [N]
    regression: np.ndarray  # float32 [N, 4], normalised to [0, 1]
    visible: np.ndarray  # float32 [N], NaN where unknown
    condition: np.ndarray  # float32 [N, condition_dim]
    episode_id: np.ndarray  # str [N]
    info: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.skill.shape[0])

    def subset(self, index: np.ndarray) -> Samples:
        return Samples(
            self.frames[index],
            self.frame_mask[index],
            self.skill[index],
            self.speed[index],
            self.direction[index],
            self.regression[index],
            self.visible[index],
            self.condition[index],
            self.episode_id[index],
            dict(self.info),
        )


def _policy_texts(dataset: Path) -> dict[str, tuple[str | None, ...]]:
    """Per episode id, the stored policy texts (read without images)."""
    from humanclaw_gym.data import EpisodeReadOptions, read_episodes

    texts: dict[str, tuple[str | None, ...]] = {}
    for episode in read_episodes(dataset, EpisodeReadOptions(observation_keys=())):
        if episode.episode_id in texts:
            raise ValueError(
                f"episode id {episode.episode_id!r} is recorded twice in {dataset} (second copy "
                f"{episode.path.name}); remove one copy before training"
            )
        texts[episode.episode_id] = episode.policy_text
    return texts


def kept_episode_ids(dataset: Path, keep: str) -> set[str] | None:
    """Episode ids selected by ``keep`` from ``demos_summary.json`` (None: keep all)."""
    from humanclaw_gym.metrics.thresholds import NAV_DISTANCE_M

    if keep == "all":
        return None
    if keep not in ("success", "nav"):
        raise ValueError(f"keep={keep!r} is not allowed: use 'success', 'nav' or 'all'")
    path = dataset / _SUMMARY_FILE
    if not path.is_file():
        raise FileNotFoundError(
            f"--keep {keep} needs {path} (written by scripts/record_demos.py); pass --keep all "
            "to train on every demo"
        )
    rows = json.loads(path.read_text()).get("episodes", {})
    if keep == "success":
        return {eid for eid, row in rows.items() if row.get("success")}
    return {
        eid
        for eid, row in rows.items()
        if row.get("ended_by") == "stop"
        and row.get("final_distance_m") is not None
        and row["final_distance_m"] <= NAV_DISTANCE_M
    }


def _visibility_label(text: str | None, category: str) -> float:
    """1.0 / 0.0 from a stored policy text by the FindSR claim rule; NaN without text."""
    if text is None:
        return float("nan")
    from humanclaw_gym.metrics.find import category_aliases, claims_target_visible

    return 1.0 if claims_target_visible(text, category_aliases(category)) else 0.0


def load_samples(args: Args, log: Any = print) -> Samples:
    """Read the dataset once (ordered :func:`window_batches`) into downsampled samples."""
    from humanclaw_agents.bc_policy import REGRESSION_KEYS, build_condition, downsample_frames
    from humanclaw_gym.data import window_batches
    from humanclaw_gym.episodes import instruction_for
    from humanclaw_gym.skills import action_space

    space = action_space()
    bounds = {k: (float(space[k].low[0]), float(space[k].high[0])) for k in REGRESSION_KEYS}
    texts = _policy_texts(args.dataset)
    keep = kept_episode_ids(args.dataset, args.keep)
    chunks: dict[str, list[np.ndarray]] = {
        k: []
        for k in (
            "frames",
            "frame_mask",
            "skill",
            "speed",
            "direction",
            "regression",
            "visible",
            "category",
            "interact",
            "previous",
            "step",
            "episode_id",
        )
    }
    last: tuple[str, int, int] | None = None  # (episode id, step, skill) of the previous window
    skipped = 0
    t0 = time.perf_counter()
    for batch in window_batches(args.dataset, history=args.history, batch_size=32):
        n = len(batch)
        select = np.ones(n, dtype=bool)
        previous = np.full(n, -1, dtype=np.int64)
        for i in range(n):
            eid, step, skill = batch.episode_id[i], int(batch.step[i]), int(batch.skill[i])
            if last is not None and last[0] == eid and last[1] == step - 1:
                previous[i] = last[2]
            elif step != 0:
                raise ValueError(f"window of {eid!r} step {step} arrived out of order")
            last = (eid, step, skill)
            if keep is not None and eid not in keep:
                select[i] = False
        skipped += int((~select).sum())
        if not select.any():
            continue
        idx = np.flatnonzero(select)
        chunks["frames"].append(downsample_frames(batch.frames[idx], args.image_size))
        chunks["frame_mask"].append(batch.frame_mask[idx])
        chunks["skill"].append(batch.skill[idx])
        chunks["speed"].append(batch.actions["speed"][idx])
        chunks["direction"].append(batch.actions["direction"][idx])
        reg = np.stack(
            [
                (batch.actions[k][idx].reshape(-1) - lo) / (hi - lo)
                for k, (lo, hi) in bounds.items()
            ],
            axis=1,
        )
        chunks["regression"].append(reg.astype(np.float32))
        chunks["visible"].append(
            np.array(
                [
                    _visibility_label(
                        texts[batch.episode_id[i]][int(batch.step[i])], batch.target_category[i]
                    )
                    for i in idx
                ],
                dtype=np.float32,
            )
        )
        chunks["category"].append(batch.category_index[idx])
        chunks["interact"].append(
            np.array(
                [
                    batch.instruction[i] == instruction_for(batch.target_category[i], True)
                    for i in idx
                ]
            )
        )
        chunks["previous"].append(previous[idx])
        chunks["step"].append(batch.step[idx])
        chunks["episode_id"].append(np.array([batch.episode_id[i] for i in idx]))
    if not chunks["skill"]:
        raise ValueError(
            f"no training windows in {args.dataset} ({skipped} skipped by --keep {args.keep})"
        )
    cat = {k: np.concatenate(v) for k, v in chunks.items()}
    condition = build_condition(
        cat["category"],
        cat["interact"],
        cat["previous"],
        cat["step"],
        cat["frame_mask"],
        args.use_previous_skill,
    )
    samples = Samples(
        frames=cat["frames"],
        frame_mask=cat["frame_mask"],
        skill=cat["skill"].astype(np.int64),
        speed=cat["speed"].astype(np.int64),
        direction=cat["direction"].astype(np.int64),
        regression=cat["regression"],
        visible=cat["visible"],
        condition=condition,
        episode_id=cat["episode_id"],
        info={
            "windows": int(len(cat["skill"])),
            "episodes": int(len(set(cat["episode_id"].tolist()))),
            "skipped_windows": skipped,
            "load_seconds": round(time.perf_counter() - t0, 1),
        },
    )
    log(
        f"loaded {samples.info['windows']} windows of {samples.info['episodes']} episodes "
        f"({skipped} windows of demos not kept by --keep {args.keep} skipped) in {samples.info['load_seconds']} s"
    )
    return samples


def split_holdout(samples: Samples, fraction: float) -> tuple[Samples, Samples | None]:
    """Split by episode: an episode is held out when crc32(id) % 1000 < fraction * 1000."""
    if not 0.0 <= fraction < 1.0:
        raise ValueError(f"holdout_fraction={fraction!r} is out of range: allowed [0, 1)")
    held = np.array([zlib.crc32(e.encode()) % 1000 < fraction * 1000 for e in samples.episode_id])
    if fraction == 0.0 or not held.any() or held.all():
        return samples, None
    return samples.subset(np.flatnonzero(~held)), samples.subset(np.flatnonzero(held))


# ----------------------------------------------------------------------------------------
# losses
# ----------------------------------------------------------------------------------------
def skill_weights(skill: np.ndarray, balance: bool) -> np.ndarray:
    """Per-class weights of the skill loss: inverse square-root frequency, mean 1 over the
    classes present (absent classes get 0), or all ones."""
    if not balance:
        return np.ones(8, dtype=np.float32)
    counts = np.bincount(skill, minlength=8).astype(np.float64)
    weights = np.where(counts > 0, 1.0 / np.sqrt(np.maximum(counts, 1.0)), 0.0)
    present = counts > 0
    weights[present] /= weights[present].mean()
    return weights.astype(np.float32)


def compute_losses(
    out: dict[str, Any], batch: dict[str, Any], class_weights: Any, args: Args
) -> dict[str, Any]:
    """Loss terms of one batch (torch scalars); ``total`` is their weighted sum."""
    import torch
    import torch.nn.functional as F

    from humanclaw_agents.bc_policy import REGRESSION_KEYS, REGRESSION_SKILL
    from humanclaw_gym.skills import Skill

    skill = batch["skill"]
    losses: dict[str, Any] = {"skill": F.cross_entropy(out["skill"], skill, weight=class_weights)}

    def masked_ce(logits: Any, target: Any, mask: Any) -> Any:
        if not bool(mask.any()):
            return logits.sum() * 0.0
        return F.cross_entropy(logits[mask], target[mask])

    losses["speed"] = masked_ce(out["speed"], batch["speed"], skill == int(Skill.WALK))
    turns = (skill == int(Skill.TURN)) | (skill == int(Skill.SIDE_STEP))
    losses["direction"] = masked_ce(out["direction"], batch["direction"], turns)
    reg_terms = []
    for i, key in enumerate(REGRESSION_KEYS):
        mask = skill == int(REGRESSION_SKILL[key])
        if bool(mask.any()):
            reg_terms.append(F.mse_loss(out["regression"][mask, i], batch["regression"][mask, i]))
    losses["regression"] = (
        torch.stack(reg_terms).sum() if reg_terms else out["regression"].sum() * 0.0
    )
    visible = batch["visible"]
    known = ~torch.isnan(visible)
    if bool(known.any()):
        losses["visible"] = F.binary_cross_entropy_with_logits(
            out["visible"][known], visible[known]
        )
    else:
        losses["visible"] = out["visible"].sum() * 0.0
    losses["total"] = (
        losses["skill"]
        + losses["speed"]
        + losses["direction"]
        + args.regression_weight * losses["regression"]
        + args.visible_weight * losses["visible"]
    )
    return losses


def _to_torch(samples: Samples, index: np.ndarray) -> dict[str, Any]:
    import torch

    from humanclaw_agents.bc_policy import frames_to_tensor

    return {
        "images": frames_to_tensor(samples.frames[index], samples.frame_mask[index]),
        "condition": torch.from_numpy(samples.condition[index]),
        "skill": torch.from_numpy(samples.skill[index]),
        "speed": torch.from_numpy(samples.speed[index]),
        "direction": torch.from_numpy(samples.direction[index]),
        "regression": torch.from_numpy(samples.regression[index]),
        "visible": torch.from_numpy(samples.visible[index]),
    }


def augment(images: Any, generator: Any, max_shift: int) -> Any:
    """Random integer shift (edge padding) and brightness/contrast jitter, per sample."""
    import torch
    import torch.nn.functional as F

    b, _, h, w = images.shape
    if max_shift > 0:
        padded = F.pad(images, (max_shift,) * 4, mode="replicate")
        shifts = torch.randint(0, 2 * max_shift + 1, (b, 2), generator=generator)
        images = torch.stack(
            [
                padded[i, :, int(dy) : int(dy) + h, int(dx) : int(dx) + w]
                for i, (dy, dx) in enumerate(shifts)
            ]
        )
    gain = 1.0 + 0.2 * (torch.rand(b, 1, 1, 1, generator=generator) - 0.5) * 2
    bias = 0.05 * (torch.rand(b, 1, 1, 1, generator=generator) - 0.5) * 2
    return images * gain + bias


def evaluate(model: Any, samples: Samples, class_weights: Any, args: Args) -> dict[str, float]:
    """Mean held-out losses and skill / visibility accuracy (eval mode, no augmentation)."""
    import torch

    model.eval()
    totals: dict[str, float] = {}
    correct = visible_correct = visible_known = 0
    n = len(samples)
    with torch.inference_mode():
        for start in range(0, n, 256):
            index = np.arange(start, min(n, start + 256))
            batch = _to_torch(samples, index)
            out = model(batch["images"], batch["condition"])
            losses = compute_losses(out, batch, class_weights, args)
            for k, v in losses.items():
                totals[k] = totals.get(k, 0.0) + float(v) * len(index)
            correct += int((out["skill"].argmax(1) == batch["skill"]).sum())
            known = ~torch.isnan(batch["visible"])
            visible_known += int(known.sum())
            visible_correct += int(
                ((out["visible"][known] > 0).float() == batch["visible"][known]).sum()
            )
    model.train()
    result = {f"loss_{k}": v / n for k, v in totals.items()}
    result["skill_accuracy"] = correct / n
    if visible_known:
        result["visible_accuracy"] = visible_correct / visible_known
    return result


# ----------------------------------------------------------------------------------------
# main
# ----------------------------------------------------------------------------------------
def main(args: Args) -> dict[str, Any]:
    """Train and write the checkpoint; returns the training summary saved in it."""
    import torch

    from humanclaw_agents.bc_policy import BCConfig, build_model, current_env_spec, save_checkpoint

    if args.max_minutes <= 0:
        raise ValueError(f"--max-minutes={args.max_minutes} must be > 0")
    if args.batch_size < 1:
        raise ValueError(f"--batch-size={args.batch_size} must be >= 1")
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    def log(message: str) -> None:
        if not args.quiet:
            print(message, flush=True)

    config = BCConfig(
        image_size=args.image_size,
        history=args.history,
        channels=tuple(args.channels),
        hidden=args.hidden,
        dropout=args.dropout,
        use_previous_skill=args.use_previous_skill,
    )
    env_spec = current_env_spec()
    _check_dataset_layout(args.dataset, env_spec)
    samples = load_samples(args, log)
    train, holdout = split_holdout(samples, args.holdout_fraction)
    log(f"train windows {len(train)}, held-out windows {0 if holdout is None else len(holdout)}")
    class_weights = torch.from_numpy(skill_weights(train.skill, args.balance_skills))

    model = build_model(config)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    generator = torch.Generator().manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    max_shift = args.image_size // 28 if args.augment else 0
    log_path = args.output.with_name(args.output.name + ".log.jsonl")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    log_path.unlink(missing_ok=True)

    history: list[dict[str, Any]] = []
    epoch_results: list[dict[str, Any]] = []
    step = 0
    budget_s = args.max_minutes * 60.0
    t0 = last_save = time.perf_counter()
    stop_reason = "max_epochs"
    running: dict[str, float] = {}

    best: dict[str, Any] | None = None  # the epoch with the lowest held-out loss

    def exported() -> Any:
        """The model to write: the best held-out epoch's weights, or the current ones."""
        if not args.keep_best or best is None:
            return model
        copy = build_model(config)
        copy.load_state_dict(best["state"])
        return copy

    def write_log(row: dict[str, Any]) -> None:
        with open(log_path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(row) + "\n")

    def summary() -> dict[str, Any]:
        return {
            "dataset": str(args.dataset),
            "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(args).items()},
            "data": samples.info,
            "train_windows": len(train),
            "holdout_windows": 0 if holdout is None else len(holdout),
            "skill_counts": np.bincount(train.skill, minlength=8).tolist(),
            "steps": step,
            "epochs": len(epoch_results),
            "seconds": round(time.perf_counter() - t0, 1),
            "stop_reason": stop_reason,
            "selected": (
                {"epoch": best["epoch"], "step": best["step"], "holdout_loss_total": best["loss"]}
                if args.keep_best and best is not None
                else {"epoch": len(epoch_results) - 1, "step": step, "holdout_loss_total": None}
            ),
            "loss_history": history,
            "epoch_results": epoch_results,
        }

    for epoch in range(args.max_epochs):
        order = rng.permutation(len(train))
        last_start = max(len(order) - args.batch_size + 1, 1)  # full batches only
        for start in range(0, last_start, args.batch_size):
            index = np.sort(order[start : start + args.batch_size])
            batch = _to_torch(train, index)
            images = augment(batch["images"], generator, max_shift) if args.augment else None
            out = model(batch["images"] if images is None else images, batch["condition"])
            losses = compute_losses(out, batch, class_weights, args)
            optimizer.zero_grad(set_to_none=True)
            losses["total"].backward()
            optimizer.step()
            step += 1
            for k, v in losses.items():
                running[k] = running.get(k, 0.0) + float(v.detach())
            running["n"] = running.get("n", 0.0) + 1
            if step % args.log_every == 0 or step == 1:
                row = {
                    "step": step,
                    "epoch": epoch,
                    "seconds": round(time.perf_counter() - t0, 1),
                    **{
                        f"loss_{k}": round(v / running["n"], 5)
                        for k, v in running.items()
                        if k != "n"
                    },
                }
                history.append(row)
                write_log(row)
                log(
                    f"step {step} epoch {epoch} {row['seconds']:.0f}s total "
                    f"{row['loss_total']:.4f} skill {row['loss_skill']:.4f} "
                    f"reg {row['loss_regression']:.4f} vis {row['loss_visible']:.4f}"
                )
                running = {}
            if args.max_steps is not None and step >= args.max_steps:
                stop_reason = "max_steps"
                break
            if time.perf_counter() - t0 >= budget_s:
                stop_reason = "max_minutes"
                break
        result: dict[str, Any] = {"epoch": epoch, "step": step}
        if holdout is not None:
            result.update(
                {
                    f"holdout_{k}": round(v, 5)
                    for k, v in evaluate(model, holdout, class_weights, args).items()
                }
            )
        epoch_results.append(result)
        write_log(result)
        if holdout is not None and (best is None or result["holdout_loss_total"] < best["loss"]):
            best = {
                "epoch": epoch,
                "step": step,
                "loss": result["holdout_loss_total"],
                "state": {k: v.detach().clone() for k, v in model.state_dict().items()},
            }
        if holdout is not None:
            log(
                f"epoch {epoch}: held-out skill accuracy {result['holdout_skill_accuracy']:.3f}, "
                f"loss {result['holdout_loss_total']:.4f}"
            )
        if time.perf_counter() - last_save >= _SAVE_EVERY_S:
            save_checkpoint(args.output, exported(), config, env_spec, summary())
            last_save = time.perf_counter()
        if stop_reason in ("max_steps", "max_minutes"):
            break
    final = summary()
    metadata = save_checkpoint(args.output, exported(), config, env_spec, final)
    log(
        f"wrote {args.output} after {step} steps / {len(epoch_results)} epochs "
        f"({final['seconds']:.0f} s, {stop_reason}); weights of epoch "
        f"{final['selected']['epoch']}, sha256 {metadata['weights_sha256']}"
    )
    return final


def _check_dataset_layout(dataset: Path, env_spec: dict[str, Any]) -> None:
    """The dataset's recorded action keys must be the current action space's."""
    run_file = dataset / "run.json"
    if not run_file.is_file():
        raise FileNotFoundError(f"{dataset} has no run.json; is it a humanclaw_demos_v1 dataset?")
    recorded = [f["key"] for f in json.loads(run_file.read_text()).get("action_layout", [])]
    current = [e["key"] for e in env_spec["action_layout"]]
    if recorded != current:
        raise ValueError(
            f"{run_file}: action_layout keys {recorded} differ from the current action space "
            f"{current}; record the demos again"
        )


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main(tyro.cli(Args))
    sys.exit(0)
