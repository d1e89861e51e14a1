"""Draw docs/img/skill_strips.jpg: what each skill looks like after physics, seen by the exo camera.

Run from the repository root: ``python docs/img/skill_strips.py [--physics mujoco]``.
Every row starts the body standing still in a small test room (a floor, a 0.5 m bed, a
flight of stairs) and plays one skill through the half-physics with the procedural
generator; six frames of the env's exo camera (behind the body; beside it once it sits)
are taken evenly over the row's chunks (the middle two thirds of each image). The last two rows are Sit down (the sit, then the
hold) with the procedural and with the learned (flow) generator: the side view shows the
feet on the floor and the hands on the thighs.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

from humanclaw_gym.backends import registry
from humanclaw_gym.render import ModernglRenderer, exo_camera
from humanclaw_gym.scenes.navgrid import APPROACH_OFFSET_M
from humanclaw_gym.scenes.spec import STAIR_RISE_M, STAIR_RUN_M, Part, Room, SceneObject, SceneSpec

OUT = Path(__file__).with_name("skill_strips.jpg")
TILE = 150
FRAMES = 6
BED_H = 0.5


def scene() -> SceneSpec:
    """Floor, a bed behind the start (its front edge APPROACH_OFFSET_M behind the pelvis)
    and three stair steps ahead of a start 4 m to the side."""
    wood, linen = (0.62, 0.46, 0.32), (0.85, 0.85, 0.8)
    objects = [
        SceneObject(1, "floor", "floor", (0.0, -0.05, 0.0), 0.0,
                    (Part("box", (6.0, 0.05, 6.0), color=wood, material="wood"),)),
        SceneObject(2, "bed", "bed", (0.0, 0.0, -(APPROACH_OFFSET_M + 1.0)), 0.0,
                    (Part("box", (0.8, BED_H / 2, 1.0), (0.0, BED_H / 2, 0.0), linen, "fabric"),)),
    ]  # fmt: skip
    for k in range(3):
        objects.append(
            SceneObject(
                3 + k, f"stair_{k}", "stairs",
                (4.0, 0.0, 0.45 + STAIR_RUN_M * (k + 0.5)), 0.0,
                (Part("box", (0.6, STAIR_RISE_M * (k + 1) / 2, STAIR_RUN_M / 2),
                      (0.0, STAIR_RISE_M * (k + 1) / 2, 0.0), (0.7, 0.55, 0.4), "wood"),),
            )
        )  # fmt: skip
    return SceneSpec("skill_strips", (Room(0, "bedroom", (-6, -6), (6, 6)),), tuple(objects))


ROWS = (
    ("Walk<forward><normal> x3", (0.0, 0.0), ["Walk<forward><normal>"] * 3, "procedural"),
    ("Turn<left><90>", (0.0, 0.0), ["Turn<left><90>"], "procedural"),
    ("Side step<right><0.4>", (0.0, 0.0), ["Side step<right><0.4>"], "procedural"),
    ("Step back<0.5>", (0.0, 1.5), ["Step back<0.5>"], "procedural"),
    ("Climb upstairs x2", (4.0, 0.0), ["Walk<forward><slow>", "Climb upstairs<normal>",
                                      "Climb upstairs<normal>"], "procedural"),
    ("Sit down<0.5> (procedural)", (0.0, 0.0), [f"Sit down<{BED_H}>"] * 2, "procedural"),
    ("Sit down<0.5> (learned)", (0.0, 0.0), [f"Sit down<{BED_H}>"] * 2, "flow"),
)  # fmt: skip


def _generator(name: str):
    if name == "flow":
        from humanclaw_gym.motion.flow.generator import FlowMotionGenerator

        return FlowMotionGenerator()
    from humanclaw_gym.motion import ProceduralMotionGenerator

    return ProceduralMotionGenerator()


def row_images(physics_name: str, spec: SceneSpec, renderer, row) -> list[np.ndarray]:
    label, (x, z), calls, motion = row
    physics = registry.create("physics", physics_name)
    physics.build(spec)
    try:
        gen = _generator(motion)
        history = gen.reset(np.array([x, 0.0, z]), 0.0, seed=0)
        physics.reset(history[-1])
        poses = [physics.link_poses()]
        for call in calls:
            for frame in gen.generate(call):
                physics.step_frame(frame)
                poses.append(physics.link_poses())
    finally:
        physics.close()
    pick = np.linspace(0, len(poses) - 1, FRAMES).round().astype(int)
    out = []
    for i in pick:
        renderer.set_body_pose(poses[i])
        cam = exo_camera(poses[i], width=3 * TILE, height=3 * TILE, scene=spec)
        rgb = renderer.render(cam).rgb[TILE // 2 : -TILE // 2, TILE // 2 : -TILE // 2]
        image = Image.fromarray(rgb).resize((TILE, TILE), Image.LANCZOS)  # the middle 2/3
        out.append(np.asarray(image))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--physics", default="pybullet", choices=("pybullet", "mujoco"))
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    spec = scene()
    renderer = ModernglRenderer()
    label_w = 170
    sheet = Image.new("RGB", (label_w + FRAMES * TILE, len(ROWS) * TILE), (250, 250, 250))
    draw = ImageDraw.Draw(sheet)
    try:
        renderer.build(spec)
        for r, row in enumerate(ROWS):
            for c, tile in enumerate(row_images(args.physics, spec, renderer, row)):
                sheet.paste(Image.fromarray(tile), (label_w + c * TILE, r * TILE))
            draw.text((8, r * TILE + TILE // 2 - 8), row[0], fill=(20, 20, 20))
    finally:
        renderer.close()
    sheet.save(args.out, quality=82, optimize=True)
    print(f"wrote {args.out} ({sheet.size[0]}x{sheet.size[1]}, {args.out.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
