"""The "Add a metric" and "Add an agent" worked examples of docs/architecture.md, performed
from outside the package as documented.

* a metric: one module with a tracker, one line in ``TRACKERS`` (and its import), done in a
  temporary copy of the package; a run with the copy writes the new field under the next
  layout version, and files written before it (by this package) still load;
* an agent: a module of your own with a class that has ``reset`` and ``act``, run by
  ``humanclaw run --agent module:Class`` from its directory and by ``run_episode``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest

import humanclaw_gym
from humanclaw_gym import SkillCall
from humanclaw_gym.metrics import METRICS_SCHEMA, validate_metrics
from humanclaw_gym.wrappers import MetricsWrapper

ENV_ID = "HumanClawFindNavInteract-v0"
PACKAGE = Path(humanclaw_gym.__file__).resolve().parent

# -- the metric --------------------------------------------------------------------------

TURN_METRIC = '''\
"""Turn count: decisions that turned in place (an example metric)."""

from __future__ import annotations

from typing import Any, ClassVar

from humanclaw_gym.metrics.fields import Column, MetricField, MetricSpec, Reduce
from humanclaw_gym.metrics.tracker import DecisionRecord, EpisodeEnd, EpisodeStart, FrameRecord
from humanclaw_gym.skills import Skill

TURNS_SPEC = MetricSpec(
    name="turns",
    fields=(
        MetricField(
            "turn_steps",
            "int",
            "decisions that turned in place",
            unit="steps",
            minimum=0,
            since=3,
            aggregate="Turns/ep: mean over the episodes that report it",
        ),
        MetricField(
            "turned_frames",
            "int",
            "realized frames of Turn decisions",
            unit="frames",
            minimum=0,
            since=3,
        ),
    ),
    columns=(
        Column("Turns/ep", "turns_per_episode", "extra", ".2f", Reduce("mean", "turn_steps"), 1),
    ),
)


class TurnMetric:
    spec: ClassVar[MetricSpec] = TURNS_SPEC
    needs: ClassVar[frozenset[str]] = frozenset()
    thresholds: ClassVar[dict[str, float | int]] = {}

    def on_reset(self, start: EpisodeStart) -> None:
        self._turns = 0
        self._frames = 0

    def on_decision(self, decision: DecisionRecord) -> None:
        self._turns += decision.skill == Skill.TURN

    def on_frame(self, frame: FrameRecord) -> None:
        self._frames += frame.skill == Skill.TURN

    def summary(self, end: EpisodeEnd) -> dict[str, Any]:
        return {"turn_steps": self._turns, "turned_frames": self._frames}
'''

RUN_WITH_THE_COPY = """\
import json, sys
from pathlib import Path

import gymnasium as gym

import humanclaw_gym
from humanclaw_gym import SkillCall
from humanclaw_gym.metrics import (
    METRIC_NEEDS, METRICS_SCHEMA, METRICS_SCHEMAS, THRESHOLDS, aggregate_metric_files,
    validate_metrics,
)
from humanclaw_gym.metrics.aggregate import EXTRA_COLUMNS
from humanclaw_gym.replay.layout import flat_dir
from humanclaw_gym.wrappers import MetricsWrapper

out, old_v2, episode_id = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
env = MetricsWrapper(
    gym.make("HumanClawFindNavInteract-v0", split="val100", max_steps=4),
    output_dir=out / "new",
    episode_dir_fn=flat_dir,
)
env.reset(options={"episode_id": episode_id})
env.step(SkillCall.turn("left", 30))
env.step(SkillCall.walk("slow"))
*_, info = env.step(SkillCall.stop())
env.close()
new = json.loads((out / "new" / "metrics.json").read_text())
old = validate_metrics(json.loads(old_v2.read_text()), str(old_v2))
(out / "old").mkdir()
(out / "old" / "metrics.json").write_text(old_v2.read_text())
summary = aggregate_metric_files(out)
print(json.dumps({
    "package": humanclaw_gym.__file__,
    "schema": METRICS_SCHEMA,
    "schemas": list(METRICS_SCHEMAS),
    "needs": sorted(METRIC_NEEDS),
    "thresholds": dict(THRESHOLDS),
    "keys": list(new),
    "new": {k: new[k] for k in ("schema", "turn_steps", "turned_frames", "steps")},
    "validated": validate_metrics(new)["turn_steps"],
    "old": {k: old[k] for k in ("schema", "turn_steps", "turned_frames")},
    "extra_columns": [list(c) for c in EXTRA_COLUMNS],
    "extra": summary["extra"],
    "episodes": summary["counts"]["episodes"],
}))
"""


def _first_episode_id(index: int = 0) -> str:
    from humanclaw_gym.episodes import load_split

    return load_split("val100")[index].episode_id


def _copy_with_the_metric(root: Path) -> Path:
    """The documented recipe in a copy of the package: one module, one line in TRACKERS."""
    copy = root / "humanclaw_gym"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "metrics" / "turns.py").write_text(TURN_METRIC)
    trackers = copy / "metrics" / "trackers.py"
    text = trackers.read_text()
    assert text.count("    UsageMetric,\n)") == 1  # the tuple's last line, as documented
    text = text.replace("    UsageMetric,\n)", "    UsageMetric,\n    TurnMetric,\n)")
    text = text.replace(
        "from humanclaw_gym.metrics.tracking import MotionAnomalyMetric\n",
        "from humanclaw_gym.metrics.tracking import MotionAnomalyMetric\n"
        "from humanclaw_gym.metrics.turns import TurnMetric\n",
    )
    trackers.write_text(text)
    return root


def test_a_metric_is_one_module_and_one_line_and_older_files_still_load(tmp_path):
    episode_id = _first_episode_id()
    # a file of the current layout, written by this package before the metric existed
    env = MetricsWrapper(gym.make(ENV_ID, split="val100", max_steps=4))
    env.reset(options={"episode_id": _first_episode_id(1)})
    env.step(SkillCall.turn("left", 30))
    *_, info = env.step(SkillCall.stop())
    env.close()
    old_v2 = tmp_path / "old_v2.json"
    old_v2.write_text(json.dumps(info["metrics"]))
    assert info["metrics"]["schema"] == METRICS_SCHEMA == "humanclaw_metrics_v2"

    root = _copy_with_the_metric(tmp_path / "pkg")
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(PACKAGE.parent)])}
    (tmp_path / "run").mkdir()
    result = subprocess.run(
        [sys.executable, "-c", RUN_WITH_THE_COPY, str(tmp_path / "run"), str(old_v2), episode_id],
        capture_output=True, text=True, timeout=600, env=environ, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    got = json.loads(result.stdout.strip().splitlines()[-1])
    assert got["package"].startswith(str(root))  # the copy ran, not the installed package
    # the layout version follows the new fields' since=3; older versions are still read
    assert got["schema"] == "humanclaw_metrics_v3"
    assert got["schemas"] == [
        "humanclaw_metrics_v1",
        "humanclaw_metrics_v2",
        "humanclaw_metrics_v3",
    ]
    assert got["needs"] == ["contacts", "instance"]  # the metric needs nothing more
    assert got["thresholds"] == dict(info["metrics"]["thresholds"])
    # the new fields: after the existing ones, before the thresholds, with the episode's values
    assert got["keys"][:-1] == [k for k in info["metrics"] if k != "thresholds"] + [
        "turn_steps",
        "turned_frames",
    ]
    assert got["keys"][-1] == "thresholds"
    assert got["new"] == {
        "schema": "humanclaw_metrics_v3",
        "turn_steps": 1,
        "turned_frames": 15,
        "steps": 3,
    }
    assert got["validated"] == 1
    # the file written before the metric existed: read, the new fields unknown (null)
    assert got["old"] == {
        "schema": "humanclaw_metrics_v2",
        "turn_steps": None,
        "turned_frames": None,
    }
    # its column joins the "Other metrics" table; the old episode does not report it
    assert ["Turns/ep", "turns_per_episode", ".2f"] in got["extra_columns"]
    assert got["episodes"] == 2 and got["extra"]["turns_per_episode"] == 1.0
    # and this package, without the metric, refuses the newer layout naming it
    new_file = tmp_path / "run" / "new" / "metrics.json"
    with pytest.raises(ValueError, match="humanclaw_metrics_v3"):
        validate_metrics(json.loads(new_file.read_text()), str(new_file))


# -- the agent ---------------------------------------------------------------------------

AGENT_MODULE = '''\
"""An agent of one's own: turn left twice, then stop, saying what it sees."""

from humanclaw_gym import Decision, SkillCall


class TurnTwicePolicy:
    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def reset(self, episode_info):
        self.category = episode_info["target_category"]
        self.steps = 0

    def act(self, observation, info):
        self.steps += 1
        if self.steps > 2:
            return Decision(SkillCall.stop(), visible_state=f"I see no {self.category}.")
        return Decision(SkillCall.turn("left", 30), visible_state="I am looking around.")
'''


def test_an_agent_is_a_class_run_by_module_path_and_by_run_episode(tmp_path, monkeypatch):
    from humanclaw_gym.cli import main
    from humanclaw_gym.evaluation import run_episode

    (tmp_path / "my_agent_x7.py").write_text(AGENT_MODULE)
    episodes = tmp_path / "one.json"
    episodes.write_text(json.dumps([_first_episode_id()]))
    monkeypatch.chdir(tmp_path)  # --agent modules are looked up in the current directory
    monkeypatch.syspath_prepend(str(tmp_path))
    code = main(
        ["run", "--agent", "my_agent_x7:TurnTwicePolicy", "--episodes", str(episodes),
         "--metrics", "--output", str(tmp_path / "out"), "--quiet"]
    )  # fmt: skip
    assert code == 0
    (metrics_file,) = (tmp_path / "out").rglob("metrics.json")
    metrics = validate_metrics(json.loads(metrics_file.read_text()))
    assert (metrics["steps"], metrics["ended_by"], metrics["motion_steps"]) == (3, "stop", 2)
    result = json.loads(metrics_file.with_name("episode_result.json").read_text())
    assert [a["action"] for a in result["actions"]] == ["Turn<left><30>"] * 2 + ["Stop/Stand"]

    from my_agent_x7 import TurnTwicePolicy  # the same class in Python

    env = gym.make(ENV_ID, split="val100", max_steps=5)
    try:
        res = run_episode(env, TurnTwicePolicy(), episode_id=_first_episode_id())
    finally:
        env.close()
    assert (res.steps, res.ended_by) == (3, "stop")
