"""Self-contained HTML report of one rollout: what the policy saw, said and did.

The page is built only from the rollout's files (no physics, no motion, no model):

* ``replay_manifest.json`` + the two NPZ files (hash-verified): the realized pose at the end
  of every decision step, from which the ego view the policy saw and the third-person view
  (the env's exo camera: behind the body, beside it once it sits) are re-rendered;
* ``episode_result.json``: each step's action, ``visible_state`` and policy extras
  (goal, verifier verdict);
* ``stepNNN_percept_mid_low.json`` / ``stepNNN_verifier.json`` when a VLM agent wrote them;
* ``metrics.json`` when metrics were on;
* the scene (by id, hash-checked against the manifest) for the top-down map with the
  realized path.

Images are embedded as base64 PNG data URLs, so the single HTML file can be mailed around.
"""

from __future__ import annotations

import base64
import html
import io
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from humanclaw_gym.fileio import write_text_atomic

__all__ = ["write_rollout_report"]


def _png_data_url(image: Any) -> str:
    from PIL import Image

    if isinstance(image, np.ndarray):
        image = Image.fromarray(image)
    buf = io.BytesIO()
    image.save(buf, format="PNG", optimize=True)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _metric_text(value: Any) -> str:
    """A metric for the page: ``n/a`` when not applicable (None), ``yes``/``no`` for flags,
    3 decimals for real numbers, integers as they are."""
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def _read_json(path: Path) -> Any | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError, RecursionError):
        return None


def _step_views(bundle: Any, renderer_name: str, width: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(ego, exo)`` images at each decision step (step 0 = the reset view): the ego view
    the policy saw, and the third-person view (behind the body, beside it once it sits)."""
    from humanclaw_gym.episodes import load_scene
    from humanclaw_gym.render.cameras import ego_camera, exo_camera
    from humanclaw_gym.replay.render import link_poses_from_frames, make_renderer

    scene = load_scene(bundle.scene_id)
    renderer, _, _ = make_renderer(renderer_name)
    views = []
    try:
        renderer.build(scene)
        poses = [(bundle.initial_realized, bundle.initial_object_poses)]
        per = int(bundle.frames_per_step)
        for k in range(len(bundle.step_start_frame)):
            end = min((k + 1) * per, len(bundle.realized)) - 1
            if end < 0:
                break
            poses.append((bundle.realized[end], bundle.object_poses[end]))
        ids = [int(i) for i in bundle.object_ids]
        for frame, obj in poses:
            link = link_poses_from_frames(frame)
            renderer.set_body_pose(link)
            if ids:
                renderer.set_object_poses(ids, obj)
            ego = renderer.render(ego_camera(link, width=width, height=width)).rgb
            exo = renderer.render(exo_camera(link, width=width, height=width, scene=scene)).rgb
            views.append((ego, exo))
    finally:
        renderer.close()
    return views


#: Header cells wrap between words only (``overflow-wrap: anywhere`` broke them mid-word).
_HEADER_CSS = "text-align: left; overflow-wrap: normal; word-break: normal; hyphens: manual;"
_DECISION_HEADERS = (
    "step",
    "ego view (what the policy saw)",
    "third person (beside the body once it sits)",
    "visible_state",
    "goal",
    "action",
    "verifier",
    "extras",
)


def _header(text: str) -> str:
    """A header cell's HTML: escaped, with a line-break opportunity after each ``_`` (so
    ``visible_state`` may wrap as ``visible_`` / ``state`` rather than mid-word)."""
    return html.escape(text).replace("_", "_<wbr>")


def write_rollout_report(
    rollout_dir: str | os.PathLike[str],
    output: str | os.PathLike[str] | None = None,
    renderer: str = "auto",
    image_size: int = 224,
) -> Path:
    """Write ``report.html`` for one rollout directory; returns its path."""
    from humanclaw_gym.episodes import load_scene
    from humanclaw_gym.replay.bundle import load_bundle
    from humanclaw_gym.scenes.maps import render_map

    rollout_dir = Path(rollout_dir)
    bundle = load_bundle(rollout_dir)
    result = _read_json(rollout_dir / "episode_result.json") or {}
    metrics = _read_json(rollout_dir / "metrics.json")
    manifest = bundle.manifest
    scene = load_scene(bundle.scene_id)
    if scene.content_hash() != bundle.scene_content_hash:
        raise ValueError(
            f"{rollout_dir}: scene {bundle.scene_id} differs from the one recorded (content hash mismatch)"
        )
    episode = None
    try:
        from humanclaw_gym.episodes import load_split

        for split in ("val", "val100"):
            for ep in load_split(split):
                if ep.episode_id == bundle.episode_id:
                    episode = ep
                    break
            if episode is not None:
                break
    except Exception:
        episode = None
    path = np.concatenate(
        [bundle.initial_realized[None, [0, 2]], bundle.realized[:, [0, 2]]], axis=0
    )
    map_img = render_map(
        scene, episode=episode, path_xz=path, title=f"{bundle.scene_id} / {bundle.episode_id}"
    )  # the agent's realized path and, with the episode, the shortest path (both labelled)
    views = _step_views(bundle, renderer, image_size)

    actions = result.get("actions", [])
    rows = []
    for i, rec in enumerate(actions):
        view, exo = views[min(i, len(views) - 1)] if views else (None, None)
        planner = _read_json(rollout_dir / f"step{i:03d}_percept_mid_low.json") or {}
        verifier = _read_json(rollout_dir / f"step{i:03d}_verifier.json")
        extras = rec.get("extras") or {}
        parsed = planner.get("response") or planner.get("parsed") or {}
        goal = extras.get("mid_level_goal") or (
            parsed.get("mid_level_goal") if isinstance(parsed, dict) else None
        )
        verdict = extras.get("verifier")
        if verifier is not None and verdict is None:
            verdict = (verifier.get("response") or {}).get("verdict")
        cells = [
            f"<td class='n'>{i}</td>",
            f"<td><img src='{_png_data_url(view)}' width='{image_size}'></td>"
            if view is not None
            else "<td></td>",
            f"<td><img src='{_png_data_url(exo)}' width='{image_size}'></td>"
            if exo is not None
            else "<td></td>",
            f"<td>{html.escape(rec.get('visible_state') or '')}</td>",
            f"<td>{html.escape(str(goal or ''))}</td>",
            f"<td><code>{html.escape(rec.get('action', ''))}</code></td>",
            f"<td>{html.escape(str(verdict or ''))}</td>",
            f"<td class='x'>{html.escape(json.dumps(extras, default=str)[:300])}</td>",
        ]
        rows.append("<tr>" + "".join(cells) + "</tr>")

    metric_rows = ""
    if metrics:
        keep = [
            "find_success", "geo_find_success", "nav_success_20cm", "geo_nav_success_20cm",
            "nav_success_1m", "interact_success", "geo_interact_success", "final_distance_m",
            "collision_rate", "motion_jerk_m_s3", "steps",
        ]  # fmt: skip
        metric_rows = "".join(
            f"<tr><th>{k}</th><td class='num'>{html.escape(_metric_text(metrics.get(k)))}</td></tr>"
            for k in keep
            if k in metrics
        )
    instruction = html.escape(episode.instruction if episode is not None else "")
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>HumanClaw rollout {html.escape(bundle.episode_id)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body {{ font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }}
table {{ border-collapse: collapse; max-width: 100%; }}
td, th {{ border: 1px solid #ccc; padding: 4px 8px; vertical-align: top; }}
td {{ overflow-wrap: anywhere; }}
th {{ {_HEADER_CSS} }}
td.n, td.num {{ text-align: right; font-variant-numeric: tabular-nums; }}
td.x {{ font-size: 11px; color: #666; }}
.head {{ display: flex; flex-wrap: wrap; gap: 1em 2em; align-items: flex-start; }}
.head > div {{ min-width: 0; max-width: 100%; }}
img {{ max-width: 100%; height: auto; }}
table.decisions {{ width: 100%; table-layout: fixed; }}
table.decisions col.step {{ width: 3em; }} table.decisions col.view {{ width: 22%; }}
table.decisions th {{ font-size: 13px; }}
table.decisions td {{ overflow-wrap: break-word; }}
</style></head><body>
<h1>Rollout {html.escape(bundle.episode_id)} in {html.escape(bundle.scene_id)}</h1>
<p><b>Instruction:</b> {instruction} &nbsp; <b>Ended by:</b> {html.escape(str(result.get("ended_by", manifest.get("ended_by"))))}
&nbsp; <b>Steps:</b> {html.escape(str(result.get("steps", manifest.get("steps"))))}</p>
<div class="head"><div><h2>Map: agent path and shortest path</h2><img src="{_png_data_url(map_img)}" alt="top-down map" style="width:640px"></div>
<div><h2>Metrics</h2>{"<table>" + metric_rows + "</table>" if metric_rows else "<p>(no metrics.json)</p>"}</div></div>
<h2>Decisions</h2>
<table class="decisions"><colgroup><col class="step"><col class="view"><col class="view"><col><col><col><col><col></colgroup>
<tr>{"".join(f"<th>{_header(h)}</th>" for h in _DECISION_HEADERS)}</tr>
{"".join(rows)}
</table>
<p style="color:#888">Generated by humanclaw-gym from the hash-verified replay bundle; ego and third-person views re-rendered from the realized poses.</p>
</body></html>
"""
    out = Path(output) if output is not None else rollout_dir / "report.html"
    write_text_atomic(out, page)
    return out
