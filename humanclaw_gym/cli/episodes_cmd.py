"""``humanclaw episodes --split val``: counts of a split by category, difficulty and scene.

Loads only the episode shards (no simulator, no scene geometry).
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Sequence
from typing import Annotated, Any

import tyro

from humanclaw_gym.episodes import DIFFICULTY_LABELS, Episode, EpisodeFormatError, load_split
from humanclaw_gym.scenes.spec import TARGET_CATEGORIES

__all__ = ["format_table", "main", "run_episodes", "split_summary"]


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def format_table(
    headers: Sequence[str], rows: Sequence[Sequence[Any]], total: Sequence[Any] | None = None
) -> str:
    """Aligned text table: numeric columns right-aligned, text columns left-aligned; an
    optional totals row under a rule."""
    body = [[str(c) for c in row] for row in rows]
    foot = [str(c) for c in total] if total is not None else None
    cells = [list(headers)] + body + ([foot] if foot is not None else [])
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    numeric = [
        i > 0 and all(_is_number(r[i]) or r[i] == "" for r in body) for i in range(len(headers))
    ]

    def line(row: Sequence[str]) -> str:
        parts = [
            c.rjust(w) if num else c.ljust(w)
            for c, w, num in zip(row, widths, numeric, strict=True)
        ]
        return "  ".join(parts).rstrip()

    rule = "  ".join("-" * w for w in widths)
    out = [line(list(headers)), rule] + [line(r) for r in body]
    if foot is not None:
        out += [rule, line(foot)]
    return "\n".join(out) + "\n"


def split_summary(split: str, episodes: Sequence[Episode]) -> dict[str, Any]:
    """Counts of a split as a JSON-ready dict."""
    cats = [c for c in TARGET_CATEGORIES if any(e.object_category == c for e in episodes)]
    cats += sorted({e.object_category for e in episodes} - set(cats))
    diffs = list(DIFFICULTY_LABELS) + (
        ["unknown"] if any(e.info.difficulty is None for e in episodes) else []
    )

    def diff(e: Episode) -> str:
        return e.info.difficulty or "unknown"

    by_category = {}
    for c in cats:
        sub = [e for e in episodes if e.object_category == c]
        d = Counter(diff(e) for e in sub)
        by_category[c] = {
            "episodes": len(sub),
            "interact": sum(e.interact for e in sub),
            **{k: d[k] for k in diffs},
        }
    d_all = Counter(diff(e) for e in episodes)
    scenes: dict[str, list[Episode]] = {}
    for e in episodes:
        scenes.setdefault(e.scene_id, []).append(e)
    by_scene = {}
    for sid, sub in scenes.items():
        c = Counter(e.object_category for e in sub)
        d = Counter(diff(e) for e in sub)
        by_scene[sid] = {
            "episodes": len(sub),
            "interact": sum(e.interact for e in sub),
            "by_category": {k: c[k] for k in cats},
            "by_difficulty": {k: d[k] for k in diffs},
        }
    return {
        "split": split,
        "num_episodes": len(episodes),
        "num_interact": sum(e.interact for e in episodes),
        "num_scenes": len(scenes),
        "by_category": by_category,
        "by_difficulty": {k: d_all[k] for k in diffs},
        "by_scene": by_scene,
    }


def _format_summary(s: dict[str, Any], by_scene: bool) -> str:
    cats = list(s["by_category"])
    diffs = list(s["by_difficulty"])
    out = [
        f"split {s['split']}: {s['num_episodes']} episodes in {s['num_scenes']} scenes ({s['num_interact']} interact)",
        "",
    ]
    rows = [
        [c, v["episodes"], v["interact"], *[v[d] for d in diffs]]
        for c, v in s["by_category"].items()
    ]
    total = ["total", s["num_episodes"], s["num_interact"], *[s["by_difficulty"][d] for d in diffs]]
    out.append(format_table(["category", "episodes", "interact", *diffs], rows, total))
    n = max(s["num_episodes"], 1)
    rows = [[d, k, f"{100.0 * k / n:.1f}"] for d, k in s["by_difficulty"].items()]
    out.append(
        format_table(["difficulty", "episodes", "%"], rows, ["total", s["num_episodes"], "100.0"])
    )
    if by_scene:
        rows = [
            [
                sid,
                v["episodes"],
                v["interact"],
                *[v["by_category"][c] for c in cats],
                *[v["by_difficulty"][d] for d in diffs],
            ]
            for sid, v in s["by_scene"].items()
        ]
        total = [
            "total",
            s["num_episodes"],
            s["num_interact"],
            *[s["by_category"][c]["episodes"] for c in cats],
            *[s["by_difficulty"][d] for d in diffs],
        ]
        out.append(format_table(["scene", "episodes", "interact", *cats, *diffs], rows, total))
    return "\n".join(out)


def run_episodes(
    split: str = "val",
    as_json: Annotated[bool, tyro.conf.arg(name="json")] = False,
    by_scene: bool = True,
) -> int:
    """Print how many episodes a split has by category, difficulty and scene.

    Args:
        split: a shipped split (val, val100), a split directory, a .json.gz shard or a JSON
            list of episode ids.
        as_json: print the counts as JSON instead of tables.
        by_scene: include the per-scene table.
    """
    try:
        episodes = load_split(split)
    except (KeyError, FileNotFoundError) as exc:
        print(f"humanclaw episodes: error: {exc.args[0] if exc.args else exc}", file=sys.stderr)
        return 2
    except EpisodeFormatError as exc:  # a user's file: exit code 2, as every user error
        print(f"humanclaw episodes: error: invalid split: {exc}", file=sys.stderr)
        return 2
    summary = split_summary(split, episodes)
    if as_json:
        print(json.dumps(summary, indent=2))
    else:
        print(_format_summary(summary, by_scene), end="")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``humanclaw episodes``."""
    return int(
        tyro.cli(
            run_episodes, args=sys.argv[1:] if argv is None else argv, prog="humanclaw episodes"
        )
    )


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
