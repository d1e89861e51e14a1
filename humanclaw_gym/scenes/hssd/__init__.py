"""Scenes from Habitat scene datasets (HSSD as prepared by the reference release).

Quick use::

    from humanclaw_gym.scenes.hssd import open_scene_dataset

    dataset = open_scene_dataset("data/humanclaw-hssd-val41")  # folder or config file
    scene = dataset.load_scene("102343992")                     # SceneSpec with mesh parts

Modules: :mod:`~humanclaw_gym.scenes.hssd.configs` (the JSON configs),
:mod:`~humanclaw_gym.scenes.hssd.scene` (a scene instance as a SceneSpec),
:mod:`~humanclaw_gym.scenes.hssd.dataset` (a dataset on disk),
:mod:`~humanclaw_gym.scenes.hssd.synthetic` (a small synthetic dataset in the same format,
for tests and benchmarks; needs ``trimesh``). Mesh files are read by
:mod:`humanclaw_gym.scenes.meshes`; see ``docs/scenes.md``.
"""

from __future__ import annotations

from humanclaw_gym.scenes.hssd.configs import SceneDatasetError
from humanclaw_gym.scenes.hssd.dataset import SceneDataset, open_scene_dataset

__all__ = ["SceneDataset", "SceneDatasetError", "open_scene_dataset"]
