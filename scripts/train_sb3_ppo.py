"""Train Stable-Baselines3 PPO on HumanClaw: discrete skills, a shaped reward, two envs.

    pip install -e ".[rl]"          # see docs/learning_rl.md for the CPU-only torch order
    python scripts/train_sb3_ppo.py --total-steps 4096 --output outputs/sb3_ppo

What it builds, all from the package's public API:

* each of the 2 sub-envs is ``gym.make("HumanClawFindNavInteract-v0", privileged=True,
  obs_size=84, ...)`` playing its own shard of a few short val100 episodes;
* :class:`~humanclaw_gym.wrappers.GeodesicProgressReward` (metres of geodesic progress to
  the target, a step cost, a bonus for a successful Stop; it reads hidden state, hence
  ``privileged=True``: this is learning, not a benchmark run);
* :class:`~humanclaw_gym.wrappers.DiscreteSkills`: ``Discrete(24)``, the default menu of
  SkillCalls (every skill, parameters on a small grid);
* SB3's ``Monitor`` and ``DummyVecEnv``, then ``PPO("CnnPolicy", ...)``.

Writes ``OUTPUT/curve.json`` (every finished episode: env steps so far, return, length;
plus the measured env steps per second), ``OUTPUT/curve.png`` (the learning curve) and
``OUTPUT/ppo.zip`` (the policy).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import gymnasium as gym
import numpy as np
import tyro

import humanclaw_gym  # noqa: F401  (registers the env)
from humanclaw_gym.envs import ENV_ID
from humanclaw_gym.wrappers import DiscreteSkills, GeodesicProgressReward

#: Four short val100 find episodes (no sitting), so that a few thousand steps show learning.
EPISODES = ("hc_val_031_014", "hc_val_004_010", "hc_val_031_010", "hc_val_004_013")


@dataclass
class Args:
    total_steps: int = 4096
    """environment steps to train (both sub-envs together)"""
    output: Path = Path("outputs/sb3_ppo")
    """where curve.json, curve.png and ppo.zip go"""
    episodes: tuple[str, ...] = EPISODES
    """val100 episode ids to train on (split into 2 shards)"""
    obs_size: int = 84
    """side of the ego image, rendered directly at this size"""
    max_steps: int = 24
    """decision steps per episode before truncation"""
    n_steps: int = 128
    """rollout length per sub-env and PPO update"""
    seed: int = 0
    """seed of PPO and of the envs"""


def make_env(index: int, args: Args):
    def thunk() -> gym.Env:
        from stable_baselines3.common.monitor import Monitor

        env = gym.make(
            ENV_ID,
            split="val100",
            episode_ids=list(args.episodes),
            num_shards=2,
            shard_index=index,
            obs_size=args.obs_size,
            privileged=True,
            max_steps=args.max_steps,
        )
        return Monitor(DiscreteSkills(GeodesicProgressReward(env)))

    return thunk


def plot_curve(curve: dict, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = np.asarray(curve["episode_end_step"], dtype=float)
    returns = np.asarray(curve["episode_return"], dtype=float)
    fig, ax = plt.subplots(figsize=(6.4, 3.6), dpi=100)
    ax.plot(steps, returns, ".", color="#9ab", label="episode return")
    if len(returns) >= 10:
        k = max(5, len(returns) // 10)
        mean = np.convolve(returns, np.ones(k) / k, mode="valid")
        ax.plot(steps[k - 1 :], mean, color="#c33", label=f"mean of {k} episodes")
    ax.set_xlabel("environment steps")
    ax.set_ylabel("shaped return")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main(args: Args) -> dict:
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.vec_env import DummyVecEnv

    torch.set_num_threads(1)
    args.output.mkdir(parents=True, exist_ok=True)
    curve: dict = {"episode_end_step": [], "episode_return": [], "episode_length": []}

    class Record(BaseCallback):
        def _on_step(self) -> bool:
            for info in self.locals["infos"]:
                if "episode" in info:
                    curve["episode_end_step"].append(int(self.num_timesteps))
                    curve["episode_return"].append(float(info["episode"]["r"]))
                    curve["episode_length"].append(int(info["episode"]["l"]))
            return True

    envs = DummyVecEnv([make_env(i, args) for i in range(2)])
    envs.seed(args.seed)
    model = PPO(
        "CnnPolicy",
        envs,
        n_steps=args.n_steps,
        batch_size=64,
        n_epochs=4,
        learning_rate=3e-4,
        gamma=0.95,
        ent_coef=0.01,
        seed=args.seed,
        verbose=0,
        device="cpu",
    )
    t0 = time.perf_counter()
    model.learn(total_timesteps=args.total_steps, callback=Record())
    seconds = time.perf_counter() - t0
    envs.close()
    model.save(args.output / "ppo.zip")
    curve.update(
        total_steps=int(model.num_timesteps),
        wall_time_s=seconds,
        steps_per_s=model.num_timesteps / seconds,
        episodes=list(args.episodes),
    )
    (args.output / "curve.json").write_text(json.dumps(curve, indent=1) + "\n")
    plot_curve(
        curve,
        args.output / "curve.png",
        f"SB3 PPO, DiscreteSkills + GeodesicProgressReward, 2 envs "
        f"({curve['steps_per_s']:.1f} env steps/s)",
    )
    print(
        f"{model.num_timesteps} steps in {seconds:.0f} s ({curve['steps_per_s']:.1f} steps/s), "
        f"{len(curve['episode_return'])} episodes -> {args.output}"
    )
    return curve


if __name__ == "__main__":
    main(tyro.cli(Args))
