"""What ``--episodes`` selects: the one rule shared by ``humanclaw run`` and the server.

A selection is ``"one"`` (the first ``val100`` episode), ``"val100"``, ``"val"``, a split
directory (ours, or the reference release's episode folder ``episodes/val`` /
``episodes/val/content`` of Habitat shards), one ``.json.gz`` shard (a split header such
as ``episodes/val/val.json.gz`` reads its folder), or a ``.json`` file: a list of episode ids
(``["id", ...]`` or ``[{"episode_id": ..., ...}, ...]``, resolved against ``val``), one of
our subset files (``humanclaw_subset_v1``) or the reference release's subset file
(``humanclaw_episode_subset_v1``, e.g. its ``val100.json``: ``scene_id`` + per-scene
``episode_id`` rows, read as ids ``<scene>_<n>`` and resolved against the episode folder
next to it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["select_episodes"]


def select_episodes(selection: str) -> list[tuple[str, Any]]:
    """``(split, episode record)`` per selected episode, in selection order.

    Raises:
        ValueError: an unknown selection or a malformed list (naming the file, the index
            and the offending id).
    """
    from humanclaw_gym.episodes.io import load_split

    if selection == "one":
        return [("val100", load_split("val100")[0])]
    path = Path(selection)
    if selection in ("val", "val100") or path.is_dir():
        return [(selection, ep) for ep in load_split(selection)]
    if path.name.endswith(".json.gz") and path.is_file():  # one shard, or a split header
        from humanclaw_gym.episodes.schema import EpisodeFormatError

        try:
            return [(selection, ep) for ep in load_split(path)]
        except EpisodeFormatError as exc:
            raise ValueError(str(exc)) from None
    if path.suffix == ".json" and path.is_file():
        try:
            items = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: not valid JSON ({exc})") from exc
        if isinstance(items, dict) and "schema" in items:
            from humanclaw_gym.episodes.schema import EpisodeFormatError

            try:
                return [(str(path), ep) for ep in load_split(path)]
            except EpisodeFormatError as exc:
                raise ValueError(str(exc)) from None
        if not isinstance(items, list) or not items:
            raise ValueError(
                f"{path}: expected a non-empty JSON list of episode ids or a subset file"
            )
        by_id = {ep.episode_id: ep for ep in load_split("val")}
        out = []
        for i, item in enumerate(items):
            eid = item.get("episode_id") if isinstance(item, dict) else item
            if str(eid) not in by_id:
                raise ValueError(f"{path}[{i}]: episode_id {eid!r} is not in the val split")
            out.append(("val", by_id[str(eid)]))
        return out
    raise ValueError(
        "--episodes must be one, val100, val, a split directory, an episode folder, a "
        ".json.gz shard (or split header), a .json list of episode ids or a subset file, got "
        f"{selection!r}"
    )
