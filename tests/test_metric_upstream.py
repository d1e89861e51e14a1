"""A metric's reference (upstream) mapping is declared with its fields, so a new tracker never
breaks the reference layout (docs/metrics.md, "Adding a metric"; docs/architecture.md).

Performed from outside the package: a copy of it gets a tracker module whose fields are one
of each kind (``escaped_object_count`` names its key in the reference layout,
``escape_first_frame`` has none) and one line in ``TRACKERS``, as the metric recipe says.
A fresh interpreter running that copy then

* reads the reference release's files (the fixtures): the mapped field from its key, the
  other ``null``; files written in the reference layout before the tracker existed lack
  the key and read as ``null`` too (the field may be null);
* runs an episode, and ``humanclaw metrics --format upstream`` (summary and ``--export``)
  exits 0 on a directory mixing that run and the reference files; the exported files hold
  the mapped field under its reference key and the other in the extra object, and read back
  into the same rows.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import humanclaw_gym

PACKAGE = Path(humanclaw_gym.__file__).resolve().parent
REFERENCE_RUN = Path(__file__).parent / "fixtures" / "reference_run"

ESCAPE_METRIC = '''\
"""Escaped objects: movable objects that fell more than 5 m below the floor (left the scene)."""

from __future__ import annotations

from typing import Any, ClassVar

from humanclaw_gym.metrics.fields import Column, MetricField, MetricSpec, Reduce
from humanclaw_gym.metrics.tracker import DecisionRecord, EpisodeEnd, EpisodeStart, FrameRecord

ESCAPE_DROP_M = 5.0

ESCAPE_SPEC = MetricSpec(
    name="escape",
    fields=(
        MetricField(
            "escaped_object_count",
            "int",
            "movable objects that fell more than 5 m below the floor (null: not recorded)",
            minimum=0,
            nullable=True,
            since=3,
            upstream="body_scene.scene_escaped_dynamic_object_count",
        ),
        MetricField(
            "escape_first_frame",
            "int",
            "first frame an object escaped (null: none did)",
            unit="frame",
            minimum=0,
            nullable=True,
            since=3,
        ),
    ),
    columns=(
        Column("Esc./ep", "escaped_per_episode", "extra", ".2f",
               Reduce("mean", "escaped_object_count"), 1),
    ),
)


class EscapeMetric:
    spec: ClassVar[MetricSpec] = ESCAPE_SPEC
    needs: ClassVar[frozenset[str]] = frozenset()
    thresholds: ClassVar[dict[str, float | int]] = {"escape_drop_m": ESCAPE_DROP_M}

    def on_reset(self, start: EpisodeStart) -> None:
        self._floor = start.floor_height_m
        self._escaped: set[int] = set()
        self._first: int | None = None
        self._frames = 0

    def on_decision(self, decision: DecisionRecord) -> None:
        pass

    def on_frame(self, frame: FrameRecord) -> None:
        for object_id, position in zip(frame.object_ids, frame.object_positions):
            if position[1] < self._floor - ESCAPE_DROP_M and object_id not in self._escaped:
                self._escaped.add(object_id)
                self._first = self._frames if self._first is None else self._first
        self._frames += 1

    def summary(self, end: EpisodeEnd) -> dict[str, Any]:
        return {"escaped_object_count": len(self._escaped), "escape_first_frame": self._first}
'''

SCRIPT = """\
import json, subprocess, sys
from pathlib import Path

import gymnasium as gym

import humanclaw_gym
from humanclaw_gym import SkillCall
from humanclaw_gym.metrics import read_metric_files
from humanclaw_gym.metrics.formats import read_metrics_record
from humanclaw_gym.replay.layout import flat_dir
from humanclaw_gym.wrappers import MetricsWrapper

root, reference, old_export, episode_id = (Path(a) for a in sys.argv[1:5])
out = {"package": humanclaw_gym.__file__}
# the reference release's files and a reference-layout file written before the tracker
refs = sorted(reference.rglob("metrics.json"))
rows = [read_metrics_record(json.loads(f.read_text()), str(f)) for f in refs]
out["reference"] = [[r["escaped_object_count"], r["escape_first_frame"]] for r in rows]
old = read_metrics_record(json.loads(old_export.read_text()), str(old_export))
out["old_export"] = [old["escaped_object_count"], old["escape_first_frame"]]
# a run with the tracker, beside the reference files
env = MetricsWrapper(gym.make("HumanClawFindNavInteract-v0", split="val100", max_steps=3),
                     output_dir=root / "mixed" / "ours", episode_dir_fn=flat_dir)
env.reset(options={"episode_id": str(episode_id)})
env.step(SkillCall.turn("left", 30))
env.step(SkillCall.stop())
env.close()
new = json.loads((root / "mixed" / "ours" / "metrics.json").read_text())
out["new"] = [new["schema"], new["escaped_object_count"], new["escape_first_frame"]]
import shutil
shutil.copytree(reference, root / "mixed" / "reference")
cli = [sys.executable, "-m", "humanclaw_gym", "metrics", str(root / "mixed"), "--format", "upstream"]
summary = subprocess.run([*cli, "--json"], capture_output=True, text=True)
export = subprocess.run([*cli, "--export", str(root / "exported")], capture_output=True, text=True)
out["codes"] = [summary.returncode, export.returncode, export.stderr[-500:]]
before, _ = read_metric_files(root / "mixed")
after, _ = read_metric_files(root / "exported")
key = lambda r: r["episode_id"]
out["same_rows"] = sorted(after, key=key) == sorted(before, key=key)
exported = [json.loads(f.read_text()) for f in sorted((root / "exported").rglob("metrics.json"))]
mine = [e for e in exported if e["episode"]["scene_id"] == new["scene_id"]][0]
out["exported"] = [
    mine["body_scene"]["scene_escaped_dynamic_object_count"],
    list(mine["body_scene"])[-1],
    "escape_first_frame" in mine["humanclaw_gym"],
    "escaped_object_count" in mine["humanclaw_gym"],
]
print(json.dumps(out))
"""


def _copy_with_the_metric(root: Path) -> Path:
    """The package copied under ``root`` with the tracker module and its line in TRACKERS."""
    copy = root / "humanclaw_gym"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "metrics" / "escape.py").write_text(ESCAPE_METRIC)
    trackers = copy / "metrics" / "trackers.py"
    text = trackers.read_text()
    assert text.count("    UsageMetric,\n)") == 1  # the tuple's last line
    text = text.replace("    UsageMetric,\n)", "    UsageMetric,\n    EscapeMetric,\n)")
    text = text.replace(
        "from humanclaw_gym.metrics.tracking import MotionAnomalyMetric\n",
        "from humanclaw_gym.metrics.escape import EscapeMetric\n"
        "from humanclaw_gym.metrics.tracking import MotionAnomalyMetric\n",
    )
    trackers.write_text(text)
    return root


def test_a_new_tracker_reads_and_writes_the_reference_layout(tmp_path: Path) -> None:
    from humanclaw_gym.episodes import load_split
    from humanclaw_gym.metrics.formats import read_metrics_record, to_reference_layout

    # a reference-layout file written by this package (before the tracker existed)
    first = sorted(REFERENCE_RUN.rglob("metrics.json"))[0]
    old_export = tmp_path / "old_export.json"
    row = read_metrics_record(json.loads(first.read_text()), str(first))
    old_export.write_text(json.dumps(to_reference_layout(row)))

    root = _copy_with_the_metric(tmp_path / "pkg")
    environ = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(root), str(PACKAGE.parent)]),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    (tmp_path / "run").mkdir()
    episode_id = load_split("val100")[0].episode_id
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "run"), str(REFERENCE_RUN),
         str(old_export), episode_id],
        capture_output=True, text=True, timeout=900, env=environ, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["package"].startswith(str(root))  # the copy ran
    # the reference files: the mapped field read from its key where a file has it (one of
    # the fixtures records 0), null where it does not; the field without a reference key null
    recorded = [
        json.loads(f.read_text())["body_scene"].get("scene_escaped_dynamic_object_count")
        for f in sorted(REFERENCE_RUN.rglob("metrics.json"))
    ]
    assert 0 in recorded and None in recorded
    assert got["reference"] == [[value, None] for value in recorded]
    assert got["old_export"] == [None, None]  # written before the tracker: no such key
    assert got["new"] == ["humanclaw_metrics_v3", 0, None]
    # humanclaw metrics --format upstream: the summary and the export both succeed
    assert got["codes"][:2] == [0, 0], got["codes"][2]
    assert got["same_rows"] is True
    # written: under its reference key, appended to its section; the other in the extra
    assert got["exported"] == [0, "scene_escaped_dynamic_object_count", True, False]
