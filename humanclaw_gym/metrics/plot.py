"""Bar charts of success by category and by difficulty (optional ``plot`` extra: matplotlib)."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from humanclaw_gym.fileio import atomic_path

__all__ = ["plot_success_breakdown", "success_figure"]

_SERIES = (
    ("FindSR", "find_sr_pct"),
    ("NavSR@20cm", "nav_sr_20cm_pct"),
    ("InteractSR", "interact_sr_pct"),
    ("GeoFindSR", "geo_find_sr_pct"),
    ("GeoNavSR@20cm", "geo_nav_sr_20cm_pct"),
)


def _require_matplotlib() -> Any:
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise RuntimeError(
            "plotting needs matplotlib, which is not installed; "
            "install it with: pip install 'humanclaw-gym[plot]'"
        ) from exc
    return Figure


# series whose denominator is the interact episodes of a group, not all its episodes
_INTERACT_KEYS = frozenset({"interact_sr_pct", "geo_interact_sr_pct"})


def plot_success_breakdown(summary: Mapping[str, Any], path: str | os.PathLike[str]) -> Path:
    """Draw success rates by category and by difficulty (two panels) and save atomically.

    Each group's tick label gives its number of episodes, the denominator of every series
    except InteractSR, whose bars carry their own ``n`` (the group's interact episodes). A
    rate without a denominator (InteractSR of chairs, say) is drawn as no bar with an
    ``n/a`` mark, never as 0 %. The title names the metric rules of the summary.

    Args:
        summary: a summary from :func:`humanclaw_gym.metrics.aggregate`.
        path: output image; the format follows the suffix (``.png``, ``.pdf``, ``.svg``).

    Returns:
        The written path.

    Raises:
        RuntimeError: when matplotlib is not installed.
    """
    path = Path(path)
    fmt = path.suffix.lstrip(".").lower()
    if not fmt:
        raise ValueError(f"plot path needs a file suffix such as .png, got {str(path)!r}")
    fig = success_figure(summary)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format=fmt, dpi=120)
    return path


def success_figure(summary: Mapping[str, Any]) -> Any:
    """The matplotlib ``Figure`` drawn by :func:`plot_success_breakdown` (not saved)."""
    figure_cls = _require_matplotlib()
    rules = summary.get("rules", "paper")
    panels = (("by category", summary["by_category"]), ("by difficulty", summary["by_difficulty"]))
    fig = figure_cls(figsize=(12, 4.8), layout="constrained")
    axes = fig.subplots(1, 2, sharey=True)
    width = 0.8 / len(_SERIES)
    for ax, (title, groups) in zip(axes, panels, strict=True):
        names = list(groups)
        for k, (label, key) in enumerate(_SERIES):
            xs = [i + (k - (len(_SERIES) - 1) / 2) * width for i in range(len(names))]
            values = [groups[name].get(key) for name in names]
            heights = [math.nan if v is None else v for v in values]
            bars = ax.bar(xs, heights, width, label=label if ax is axes[0] else None)
            if key not in _INTERACT_KEYS:
                continue
            colour = bars.patches[0].get_facecolor() if bars.patches else None
            for x, value, name in zip(xs, values, names, strict=True):
                n = groups[name].get("interact_episodes", 0)
                text = "n/a" if value is None else f"n={n}"
                y = 1.0 if value is None else value + 1.0
                ax.text(x, y, text, ha="center", va="bottom", rotation=90, fontsize=7, color=colour)
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels([f"{n}\n(n={groups[n]['episodes']})" for n in names])
        ax.set_title(f"Success {title} ({rules} metric rules)")
        ax.set_ylim(0, 110)
        ax.set_yticks(range(0, 101, 20))
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("success (%)")
    fig.legend(loc="outside upper center", ncol=len(_SERIES), fontsize="small")
    fig.supxlabel(
        "n under a group: its episodes; InteractSR bars: their interact episodes; "
        "n/a: no interact episode (not 0 %)",
        fontsize=8,
    )
    return fig
