"""Single-file PPO (CleanRL style) over ``gym.make_vec`` on HumanClaw.

    pip install -e ".[rl]"          # torch; see docs/learning_rl.md for the CPU-only order
    python scripts/cleanrl_ppo.py --total-steps 4096 --output outputs/cleanrl_ppo

Everything is in this file: the vector env, a Nature-CNN actor-critic, rollouts, GAE and the
clipped PPO update. The env side is the package's public API only:

    envs = gym.make_vec("HumanClawFindNavInteract-v0", num_envs=2, vectorization_mode="sync",
                        wrappers=[GeodesicProgressReward, DiscreteSkills], num_shards=2,
                        split="val100", episode_ids=[...], obs_size=84, privileged=True)
    envs.reset(seed=0)      # sub-env i gets seed i and plays shard i of the episodes

Autoreset is
Gymnasium's ``NEXT_STEP`` mode: the step *after* an episode ended resets that sub-env,
ignores its action and returns reward 0. Those reset steps are kept out of the loss (the
``valid`` mask), and since the observation returned at the end of an episode is its real
final observation, truncated episodes bootstrap from its value while terminated ones do
not.

Writes ``OUTPUT/curve.json`` (every finished episode: env steps so far, return, length;
plus the measured env steps per second), ``OUTPUT/curve.png`` and ``OUTPUT/agent.pt``.
``--async-envs`` steps the sub-envs in worker processes (Gymnasium's ``AsyncVectorEnv``).
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
    """environment steps to train (all sub-envs together)"""
    output: Path = Path("outputs/cleanrl_ppo")
    """where curve.json, curve.png and agent.pt go"""
    episodes: tuple[str, ...] = EPISODES
    """val100 episode ids to train on (sharded over the sub-envs)"""
    num_envs: int = 2
    """sub-envs of the vector env"""
    async_envs: bool = False
    """one worker process per sub-env instead of stepping them in this process"""
    obs_size: int = 84
    """side of the ego image, rendered directly at this size"""
    max_steps: int = 24
    """decision steps per episode before truncation"""
    num_steps: int = 128
    """rollout length per sub-env and update"""
    learning_rate: float = 3e-4
    gamma: float = 0.95
    gae_lambda: float = 0.95
    update_epochs: int = 4
    minibatch_size: int = 64
    clip_coef: float = 0.2
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    seed: int = 0


def make_envs(args: Args) -> gym.vector.VectorEnv:
    # Gymnasium's own sync/async vector env with per-sub-env wrappers; num_shards plus
    # reset(seed=s) (s a multiple of num_envs) gives sub-env i its own shard of episodes.
    envs = gym.make_vec(
        ENV_ID,
        num_envs=args.num_envs,
        vectorization_mode="async" if args.async_envs else "sync",
        wrappers=[GeodesicProgressReward, DiscreteSkills],
        split="val100",
        episode_ids=list(args.episodes),
        num_shards=args.num_envs,
        obs_size=args.obs_size,
        privileged=True,
        max_steps=args.max_steps,
    )
    return gym.wrappers.vector.RecordEpisodeStatistics(envs)


def build_agent(num_actions: int, obs_size: int):
    import torch
    from torch import nn

    def layer(module: nn.Module, std: float = float(np.sqrt(2))) -> nn.Module:
        nn.init.orthogonal_(module.weight, std)
        nn.init.constant_(module.bias, 0.0)
        return module

    class Agent(nn.Module):
        """Nature-CNN trunk shared by the policy (logits) and value heads."""

        def __init__(self) -> None:
            super().__init__()
            convs = nn.Sequential(
                layer(nn.Conv2d(3, 32, 8, stride=4)),
                nn.ReLU(),
                layer(nn.Conv2d(32, 64, 4, stride=2)),
                nn.ReLU(),
                layer(nn.Conv2d(64, 64, 3, stride=1)),
                nn.ReLU(),
                nn.Flatten(),
            )
            with torch.no_grad():
                flat = convs(torch.zeros(1, 3, obs_size, obs_size)).shape[1]
            self.trunk = nn.Sequential(convs, layer(nn.Linear(flat, 512)), nn.ReLU())
            self.actor = layer(nn.Linear(512, num_actions), std=0.01)
            self.critic = layer(nn.Linear(512, 1), std=1.0)

        def features(self, obs: torch.Tensor) -> torch.Tensor:
            # uint8 (B, H, W, 3) -> float (B, 3, H, W) in [0, 1]
            return self.trunk(obs.permute(0, 3, 1, 2).float() / 255.0)

        def value(self, obs: torch.Tensor) -> torch.Tensor:
            return self.critic(self.features(obs)).squeeze(-1)

        def act(self, obs: torch.Tensor, action: torch.Tensor | None = None):
            hidden = self.features(obs)
            dist = torch.distributions.Categorical(logits=self.actor(hidden))
            if action is None:
                action = dist.sample()
            return action, dist.log_prob(action), dist.entropy(), self.critic(hidden).squeeze(-1)

    return Agent()


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

    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    args.output.mkdir(parents=True, exist_ok=True)
    envs = make_envs(args)
    n, t_len = args.num_envs, args.num_steps
    agent = build_agent(int(envs.single_action_space.n), args.obs_size)
    # a seed that is a multiple of num_envs keeps the sub-envs' shards disjoint
    next_obs_np, _ = envs.reset(seed=args.seed * n)
    next_obs = torch.as_tensor(next_obs_np)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)

    obs = torch.zeros((t_len, n, *envs.single_observation_space.shape), dtype=torch.uint8)
    actions = torch.zeros((t_len, n), dtype=torch.long)
    logprobs = torch.zeros((t_len, n))
    rewards = torch.zeros((t_len, n))
    values = torch.zeros((t_len, n))
    terminated = torch.zeros((t_len, n))  # episode ended by Stop at this step
    ended = torch.zeros((t_len, n))  # episode ended (Stop or step limit) at this step
    valid = torch.zeros((t_len, n))  # 0 on NEXT_STEP autoreset steps (action ignored)
    next_reset = torch.zeros(n)  # the next step of this sub-env is an autoreset step

    curve: dict = {"episode_end_step": [], "episode_return": [], "episode_length": []}
    global_step = 0
    t0 = time.perf_counter()
    while global_step < args.total_steps:
        for t in range(t_len):
            obs[t] = next_obs
            valid[t] = 1.0 - next_reset
            with torch.no_grad():
                action, logprob, _, value = agent.act(next_obs)
            actions[t], logprobs[t], values[t] = action, logprob, value
            next_obs_np, reward, term, trunc, info = envs.step(action.numpy())
            global_step += n
            rewards[t] = torch.as_tensor(reward, dtype=torch.float32)
            terminated[t] = torch.as_tensor(term, dtype=torch.float32)
            ended[t] = torch.as_tensor(term | trunc, dtype=torch.float32)
            next_reset = ended[t].clone()
            next_obs = torch.as_tensor(next_obs_np)
            if "episode" in info:
                for i in np.nonzero(info["_episode"])[0]:
                    curve["episode_end_step"].append(global_step)
                    curve["episode_return"].append(float(info["episode"]["r"][i]))
                    curve["episode_length"].append(int(info["episode"]["l"][i]))

        # generalised advantage estimation (see the module docstring for the masks)
        with torch.no_grad():
            next_value = agent.value(next_obs)
            advantages = torch.zeros((t_len, n))
            last = torch.zeros(n)
            for t in reversed(range(t_len)):
                following = next_value if t == t_len - 1 else values[t + 1]
                delta = rewards[t] + args.gamma * following * (1.0 - terminated[t]) - values[t]
                last = delta + args.gamma * args.gae_lambda * (1.0 - ended[t]) * last
                advantages[t] = last
            returns = advantages + values

        flat = {
            "obs": obs.reshape(-1, *obs.shape[2:]),
            "actions": actions.reshape(-1),
            "logprobs": logprobs.reshape(-1),
            "advantages": advantages.reshape(-1),
            "returns": returns.reshape(-1),
        }
        index = np.nonzero(valid.reshape(-1).numpy())[0]
        for _ in range(args.update_epochs):
            rng.shuffle(index)
            for start in range(0, len(index), args.minibatch_size):
                mb = torch.as_tensor(index[start : start + args.minibatch_size])
                _, newlogprob, entropy, newvalue = agent.act(flat["obs"][mb], flat["actions"][mb])
                ratio = (newlogprob - flat["logprobs"][mb]).exp()
                adv = flat["advantages"][mb]
                adv = (adv - adv.mean()) / (adv.std() + 1e-8)
                pg_loss = torch.max(
                    -adv * ratio, -adv * ratio.clamp(1 - args.clip_coef, 1 + args.clip_coef)
                ).mean()
                v_loss = 0.5 * ((newvalue - flat["returns"][mb]) ** 2).mean()
                loss = pg_loss - args.ent_coef * entropy.mean() + args.vf_coef * v_loss
                optimizer.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()

    seconds = time.perf_counter() - t0
    envs.close()
    torch.save(agent.state_dict(), args.output / "agent.pt")
    curve.update(
        total_steps=global_step,
        wall_time_s=seconds,
        steps_per_s=global_step / seconds,
        episodes=list(args.episodes),
    )
    (args.output / "curve.json").write_text(json.dumps(curve, indent=1) + "\n")
    plot_curve(
        curve,
        args.output / "curve.png",
        f"CleanRL-style PPO over gym.make_vec, {n} envs ({curve['steps_per_s']:.1f} env steps/s)",
    )
    print(
        f"{global_step} steps in {seconds:.0f} s ({curve['steps_per_s']:.1f} steps/s), "
        f"{len(curve['episode_return'])} episodes -> {args.output}"
    )
    return curve


if __name__ == "__main__":
    main(tyro.cli(Args))
