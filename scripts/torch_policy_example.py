"""A learned torch policy plugged into the same loop (a dozen lines of glue).

    pip install -e ".[torch]"
    python scripts/torch_policy_example.py

The network here is untrained (random weights) to keep the example self-contained; see
scripts/train_bc.py for a policy trained on oracle demonstrations. The glue is the point:
image -> tensor -> logits -> SkillCall -> Decision.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch
from torch import nn

import humanclaw_gym  # noqa: F401
from humanclaw_gym import Decision, Skill, SkillCall
from humanclaw_gym.evaluation import run_episode

# A fixed menu of calls the network chooses from (a discrete head is the simplest decoder).
MENU = [
    SkillCall.walk("normal"),
    SkillCall.turn("left", 30),
    SkillCall.turn("right", 30),
    SkillCall.stop(),
]


class TorchPolicy:
    def __init__(self, net: nn.Module) -> None:
        self.net = net.eval()

    def reset(self, episode_info):
        pass

    @torch.no_grad()
    def act(self, observation: np.ndarray, info) -> Decision:
        x = torch.from_numpy(observation).permute(2, 0, 1)[None].float() / 255.0
        x = nn.functional.interpolate(x, size=(64, 64), mode="area")
        choice = int(self.net(x).argmax())
        call = MENU[choice]
        if call.skill is Skill.STOP and info["step"] < 5:  # never give up immediately
            call = MENU[0]
        return Decision(call)


def main() -> None:
    torch.manual_seed(0)
    net = nn.Sequential(
        nn.Conv2d(3, 8, 5, stride=4), nn.ReLU(), nn.Flatten(), nn.LazyLinear(len(MENU))
    )
    env = gym.make("HumanClawFindNavInteract-v0", split="val100", max_steps=20)
    result = run_episode(env, TorchPolicy(net))
    print(f"{result.episode_id}: {result.ended_by} after {result.steps} steps")
    env.close()


if __name__ == "__main__":
    main()
