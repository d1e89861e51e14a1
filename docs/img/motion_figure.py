"""Draw docs/img/procedural_motion.png: side views of the procedural generator's output.

Run from the repository root: ``python docs/img/motion_figure.py`` (needs matplotlib).
Top: one gait cycle of a normal walk (two chunks after a warm-up chunk), drawn where the
body really is. Bottom: ``Sit down<0.45>`` onto a 0.45 m seat, then the stand-up chunk that
any motion skill triggers while seated, spread out horizontally for readability.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from humanclaw_gym.body.skeleton import JOINT_NAMES, PARENTS, forward_kinematics  # noqa: E402
from humanclaw_gym.motion import ProceduralMotionGenerator  # noqa: E402
from humanclaw_gym.skills import SkillCall  # noqa: E402

OUT = Path(__file__).with_name("procedural_motion.png")


def _draw(ax, frame: np.ndarray, dz: float, alpha: float) -> None:
    pos, _ = forward_kinematics(frame)
    for j in range(1, len(PARENTS)):
        p = PARENTS[j]
        color = "tab:blue" if JOINT_NAMES[j].startswith("left") else "tab:red"
        if not JOINT_NAMES[j].startswith(("left", "right")):
            color = "0.3"
        ax.plot(
            [pos[p, 2] + dz, pos[j, 2] + dz],
            [pos[p, 1], pos[j, 1]],
            color=color,
            lw=1.6,
            alpha=alpha,
            solid_capstyle="round",
        )


def main() -> None:
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(11, 6.4))
    gen = ProceduralMotionGenerator()
    gen.reset(np.zeros(3), 0.0)  # facing +Z, which the plot shows left to right
    gen.generate(SkillCall.walk("normal"))
    cycle = np.concatenate([gen.generate(SkillCall.walk("normal")) for _ in range(2)])
    for k, i in enumerate(range(0, len(cycle), 2)):
        _draw(top, cycle[i], 0.45 * k, 1.0)
    top.set_title(
        "Walk<forward><normal> x2: one gait cycle, every 2nd frame, spread out 0.45 m apart"
        " (blue = left side)"
    )

    gen.reset(np.zeros(3), 0.0)
    sit = gen.generate(SkillCall.sit(0.45))
    stand = gen.generate(SkillCall.walk("normal"))  # seated: this chunk stands up
    seq = np.concatenate([sit, stand])
    picks = [0, 3, 6, 9, 12, 14, 17, 20, 23, 26, 29]
    for k, i in enumerate(picks):
        dz = 0.75 * k
        # seat: a 0.45 m high box behind the body, under the seated pelvis
        seat_z = sit[-1, 2] + dz
        bottom.add_patch(plt.Rectangle((seat_z - 0.25, 0.0), 0.3, 0.45, color="0.85", zorder=0))
        _draw(bottom, seq[i], dz, 1.0)
        label = f"sit {i + 1}" if i < 15 else f"stand {i - 14}"
        bottom.text(dz, -0.12, label, ha="center", fontsize=7)
    bottom.set_title("Sit down<0.45>, then the stand-up chunk (frame numbers within each chunk)")
    for ax in (top, bottom):
        ax.axhline(0.0, color="k", lw=0.8)
        ax.set_aspect("equal")
        ax.axis("off")
    fig.tight_layout()
    fd, tmp = tempfile.mkstemp(suffix=".png", dir=OUT.parent)
    os.close(fd)
    fig.savefig(tmp, dpi=90)
    os.replace(tmp, OUT)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
