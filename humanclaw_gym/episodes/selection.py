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

from pathlib import Path
from typing import Any

__all__ = ["select_episodes"]


def select_episodes(selection: str) -> list[tuple[str, Any]]:
    """``(split, episode record)`` per selected episode, in selection order (see
    :func:`_select`); an episode selected twice is refused.

    Raises:
        ValueError: an unknown selection; ``EpisodeFormatError`` (a ValueError) for a
            malformed file or list, or an episode listed twice (naming the file, the index
            and the offending id).
    """
    from humanclaw_gym.episodes.schema import EpisodeFormatError, shown_id

    selected = _select(selection)
    seen: set[tuple[str, str]] = set()
    for i, (_, ep) in enumerate(selected):
        key = (ep.scene_id, ep.episode_id)
        if key in seen:
            raise EpisodeFormatError(
                f"{selection}: episode {shown_id(ep.episode_id)} is selected twice (entry {i}); "
                "allowed: each episode once"
            )
        seen.add(key)
    return selected


def _select(selection: str) -> list[tuple[str, Any]]:
    """``(split, episode record)`` per selected episode, in selection order."""
    from humanclaw_gym.episodes.io import load_split, read_json_gz
    from humanclaw_gym.episodes.schema import EpisodeFormatError, shown_id

    if selection == "one":
        return [("val100", load_split("val100")[0])]
    path = Path(selection)
    if selection in ("val", "val100") or path.is_dir():
        return [(selection, ep) for ep in load_split(selection)]
    if path.name.endswith(".json.gz") and path.is_file():  # one shard, or a split header
        return [(selection, ep) for ep in load_split(path)]
    if path.suffix == ".json" and path.is_file():
        items = read_json_gz(path)  # EpisodeFormatError (a ValueError) naming the file
        if isinstance(items, dict) and "schema" in items:
            return [(str(path), ep) for ep in load_split(path)]
        if not isinstance(items, list) or not items:
            raise EpisodeFormatError(
                f"{path}: expected a non-empty JSON list of episode ids or a subset file"
            )
        by_id = {ep.episode_id: ep for ep in load_split("val")}
        out = []
        for i, item in enumerate(items):
            eid = item.get("episode_id") if isinstance(item, dict) else item
            if not isinstance(eid, str) or eid not in by_id:
                raise EpisodeFormatError(
                    f"{path}[{i}]: episode_id {shown_id(eid)} is not in the val split"
                )
            out.append(("val", by_id[eid]))
        return out
    raise EpisodeFormatError(
        "--episodes must be one, val100, val, a split directory, an episode folder, a "
        ".json.gz shard (or split header), a .json list of episode ids or a subset file, got "
        f"{shown_id(selection)}" + (" (no such file or directory)" if not path.exists() else "")
    )
