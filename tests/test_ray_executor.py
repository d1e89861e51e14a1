"""The Ray executor runs the same per-episode function as the local one, with identical results."""

from __future__ import annotations

import json

import numpy as np
import pytest

from humanclaw_gym.evaluation.batch import RunConfig, list_episode_specs, rollout_dir, run_batch

ray = pytest.importorskip("ray")


@pytest.mark.slow
def test_local_and_ray_executors_agree(tmp_path):
    specs = list_episode_specs("val100")[:3]
    local = RunConfig(
        agent="random", output=str(tmp_path / "local"), metrics=True, seed=4, max_steps=3
    )
    remote = RunConfig(
        agent="random", output=str(tmp_path / "ray"), metrics=True, seed=4, max_steps=3
    )
    a = run_batch(specs, local, workers=1, progress=False)
    b = run_batch(specs, remote, workers=2, executor="ray", progress=False)
    assert (a.completed, b.completed) == (3, 3)
    for spec in specs:
        da, db = rollout_dir(local.output, spec), rollout_dir(remote.output, spec)
        ra = json.loads((da / "episode_result.json").read_text())
        rb = json.loads((db / "episode_result.json").read_text())
        assert [x["action"] for x in ra["actions"]] == [x["action"] for x in rb["actions"]]
        ta, tb = np.load(da / "trajectory_after.npz"), np.load(db / "trajectory_after.npz")
        np.testing.assert_array_equal(ta["realized"], tb["realized"])
        ma = json.loads((da / "metrics.json").read_text())
        mb = json.loads((db / "metrics.json").read_text())
        assert ma == mb
