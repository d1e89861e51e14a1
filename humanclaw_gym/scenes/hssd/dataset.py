"""A Habitat scene dataset on disk: which scenes it has, and loading one as a SceneSpec.

:func:`open_scene_dataset` takes the ``*.scene_dataset_config.json`` file or its folder
(e.g. ``data/humanclaw-hssd-val41/`` prepared by the reference release's
``prepare-hssd``) and indexes its configs (a folder listing; nothing heavy). Scenes are
parsed and their meshes loaded on :meth:`SceneDataset.load_scene`, and kept (a few per
process) so that consecutive episodes of one scene share them.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any

from humanclaw_gym.scenes.hssd.configs import (
    DatasetIndex,
    SceneDatasetError,
    find_dataset_config,
    read_asset_config,
    read_dataset_index,
    read_scene_instance,
)
from humanclaw_gym.scenes.spec import SceneSpec

__all__ = ["SceneDataset", "open_scene_dataset"]

_SCENES_KEPT = 3


class SceneDataset:
    """One scene dataset (see the module docstring).

    Args:
        path: the ``*.scene_dataset_config.json`` or the folder holding exactly one.

    Raises:
        SceneDatasetError: no dataset config there, or it (or its lexicon) is malformed.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.config_path = find_dataset_config(path)
        self.index: DatasetIndex = read_dataset_index(self.config_path)
        self._scenes: OrderedDict[str, SceneSpec] = OrderedDict()

    def __repr__(self) -> str:
        return f"SceneDataset({str(self.config_path)!r}, {len(self.scene_ids)} scenes)"

    @property
    def scene_ids(self) -> tuple[str, ...]:
        """Ids of the scene instances the dataset config's paths list (sorted)."""
        return tuple(self.index.scenes)

    def has_scene(self, scene_id: str) -> bool:
        return scene_id in self.index.scenes

    def scene_path(self, scene_id: str) -> Path:
        """The scene instance file of ``scene_id``.

        Raises:
            SceneDatasetError: the dataset has no such scene (naming the dataset).
        """
        path = self.index.scenes.get(scene_id)
        if path is None:
            sample = ", ".join(self.scene_ids[:3]) or "none"
            raise SceneDatasetError(
                f"scene {scene_id!r} is not in the scene dataset {self.config_path} "
                f"({len(self.scene_ids)} scenes, e.g. {sample}); point scene_dataset "
                "(--scene-dataset) at the dataset that holds it"
            )
        return Path(path)

    def missing_scenes(self, scene_ids: Iterable[str]) -> list[str]:
        """The ids (first-seen order) the dataset does not hold.

        Raises:
            ValueError: ``scene_ids`` is a bare string or not a list of id strings.
        """
        from humanclaw_gym.id_lists import check_id_list

        out: dict[str, None] = {}
        for sid in check_id_list(scene_ids, "scene_ids"):
            if sid not in self.index.scenes:
                out.setdefault(sid, None)
        return list(out)

    def load_scene(self, scene_id: str) -> SceneSpec:
        """Parse a scene instance and load its meshes (kept for the next calls).

        Raises:
            SceneDatasetError: unknown scene, malformed config, missing or unreadable
                asset (each naming the file and what refers to it).
        """
        hit = self._scenes.get(scene_id)
        if hit is not None:
            self._scenes.move_to_end(scene_id)
            return hit
        from humanclaw_gym.scenes.hssd.scene import build_scene

        instance = read_scene_instance(self.scene_path(scene_id), str(self.config_path))
        scene = build_scene(self.index, instance)
        self._scenes[scene_id] = scene
        while len(self._scenes) > _SCENES_KEPT:
            self._scenes.popitem(last=False)
        return scene

    def asset_report(self, scene_ids: Iterable[str] | None = None) -> dict[str, Any]:
        """Check every config and asset file the scenes refer to, without loading meshes.

        Returns:
            ``{"scenes": n, "objects": n, "configs": n, "assets": n, "missing": [...],
            "errors": [...]}`` where ``missing`` lists ``"<asset> (referred to by
            <config>)"`` and ``errors`` unreadable or malformed files (one line each).

        Raises:
            ValueError: ``scene_ids`` is a bare string or not a list of id strings.
        """
        from humanclaw_gym.id_lists import check_id_list

        ids = list(self.scene_ids) if scene_ids is None else check_id_list(scene_ids, "scene_ids")
        configs: dict[str, Any] = {}
        assets: dict[str, str] = {}
        errors: list[str] = []
        objects = 0
        for sid in ids:
            try:
                inst = read_scene_instance(self.scene_path(sid), str(self.config_path))
            except SceneDatasetError as exc:
                errors.append(str(exc))
                continue
            refs = []
            if inst.stage_template is not None:
                refs.append(("stage", inst.stage_template, f"{inst.path} stage_instance"))
            refs += [
                ("object", o.template, f"{inst.path} object_instances[{o.index}]")
                for o in inst.objects
            ]
            objects += len(inst.objects)
            for kind, template, where in refs:
                try:
                    path = self.index.template_path(kind, template, where)
                    if path not in configs:
                        configs[path] = read_asset_config(
                            Path(path), kind, where, Path(self.index.root)
                        )
                except SceneDatasetError as exc:
                    errors.append(str(exc))
                    continue
                cfg = configs[path]
                for asset in (cfg.render_asset, cfg.collision_asset):
                    if asset is not None:
                        assets.setdefault(asset, cfg.path)
        missing = [f"{a} (referred to by {c})" for a, c in assets.items() if not Path(a).is_file()]
        return {
            "scenes": len(ids),
            "objects": objects,
            "configs": len(configs),
            "assets": len(assets),
            "missing": missing,
            "errors": errors,
        }


@lru_cache(maxsize=4)
def _open(resolved: str) -> SceneDataset:
    return SceneDataset(resolved)


def open_scene_dataset(path: str | os.PathLike[str]) -> SceneDataset:
    """The :class:`SceneDataset` at ``path`` (one shared instance per config file and
    process, so its loaded scenes are reused).

    Raises:
        SceneDatasetError: see :class:`SceneDataset`.
    """
    return _open(str(find_dataset_config(path)))
