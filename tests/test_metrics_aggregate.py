"""Aggregation of metrics.json files into the paper table, and the ``humanclaw metrics`` CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from humanclaw_gym.cli import main as humanclaw_main
from humanclaw_gym.cli.metrics_cmd import main as metrics_main
from humanclaw_gym.metrics import (
    MAIN_COLUMNS,
    MetricsFileError,
    aggregate,
    aggregate_metric_files,
    format_tables,
    write_metrics_json,
)


def episode(**overrides) -> dict:
    """A complete hand-written humanclaw_metrics_v2 record (the first episode below)."""
    row = {
        "schema": "humanclaw_metrics_v2",
        "rules": "paper",
        "episode_id": "ep1",
        "scene_id": "scene_a",
        "rollout_index": 0,
        "category": "couch",
        "difficulty": "easy",
        "interact": True,
        "target_ids": [5],
        "ended_by": "stop",
        "active_stop": True,
        "steps": 10,
        "find_success": True,
        "geo_find_success": True,
        "first_find_step": 2,
        "first_geo_find_step": 1,
        "max_target_pixels": 900,
        "find_pixel_threshold": 100,
        "final_distance_m": 0.05,
        "nav_success_20cm": True,
        "geo_nav_success_20cm": True,
        "nav_success_1m": True,
        "interact_success": True,
        "geo_interact_success": True,
        "sit_chunks": 1,
        "sit_chunks_with_target_contact": 1,
        "last_chunk_pelvis_target_contact": True,
        "motion_steps": 9,
        "collision_steps": 3,
        "collision_rate": 3 / 9,
        "collision_steps_by_group": {"arm/hand": 1, "torso": 2, "leg/foot": 0, "head": 0},
        "collision_rate_by_group": {
            "arm/hand": 1 / 9,
            "torso": 2 / 9,
            "leg/foot": 0.0,
            "head": 0.0,
        },
        "floor_height_m": 0.0,
        "floor_source": "spawn_raycast",
        "affected_object_count": 1,
        "direct_affected_object_count": 1,
        "affected_object_first_frame": {"10": 3},
        "affected_objects_with_path": 1,
        "affected_object_path_length_m": {"10": 1.0},
        "affected_path_length_sum_m": 1.0,
        "motion_jerk_m_s3": 2.0,
        "generated_frames": 135,
        "motion_anomaly": 4,
        "max_joint_tracking_error_deg": 41.0,
        "initial_penetration_m": 0.0,
        "initial_penetration_flag": False,
        "tokens": {
            "input_tokens": 10000,
            "output_tokens": 500,
            "reasoning_tokens": 100,
            "calls": 10,
            "failed_calls": 0,
            "source": "provider",
        },
        "thresholds": {},
    }
    row.update(overrides)
    return row


SECOND = dict(
    episode_id="ep2",
    category="chair",
    difficulty="hard",
    interact=False,
    ended_by="truncated",
    active_stop=False,
    steps=30,
    find_success=False,
    geo_find_success=True,
    final_distance_m=0.6,
    nav_success_20cm=False,
    geo_nav_success_20cm=False,
    nav_success_1m=False,
    interact_success=None,
    geo_interact_success=None,
    sit_chunks=0,
    sit_chunks_with_target_contact=0,
    last_chunk_pelvis_target_contact=False,
    first_find_step=None,
    motion_steps=30,
    collision_steps=6,
    collision_rate=0.2,
    collision_rate_by_group={"arm/hand": 0.1, "torso": 0.0, "leg/foot": 0.1, "head": 0.0},
    collision_steps_by_group={"arm/hand": 3, "torso": 0, "leg/foot": 3, "head": 0},
    affected_object_count=3,
    direct_affected_object_count=1,
    affected_objects_with_path=3,
    affected_object_path_length_m={"11": 0.1, "12": 0.2, "13": 0.3},
    affected_path_length_sum_m=0.6,
    motion_jerk_m_s3=None,
    motion_anomaly=0,
    max_joint_tracking_error_deg=12.0,
    initial_penetration_m=0.02,
    initial_penetration_flag=True,
    tokens={
        "input_tokens": 20000,
        "output_tokens": 1000,
        "reasoning_tokens": 0,
        "calls": 30,
        "failed_calls": 0,
        "source": "estimated_chars_div_4",
    },
)


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    root = tmp_path / "runs"
    write_metrics_json(root / "shard0" / "ep1" / "metrics.json", episode())
    write_metrics_json(root / "shard1" / "deep" / "ep2" / "metrics.json", episode(**SECOND))
    return root


def test_aggregate_two_files_by_hand(run_dir):
    s = aggregate_metric_files(run_dir)
    main = s["main"]
    assert main["find_sr_pct"] == pytest.approx(50.0)
    assert main["nav_sr_20cm_pct"] == pytest.approx(50.0)
    assert main["interact_sr_pct"] == pytest.approx(100.0)  # over the one interact episode
    assert main["collision_pct"] == pytest.approx((100 * 3 / 9 + 20.0) / 2)
    assert main["disturbed_objects_per_episode"] == pytest.approx((1 + 3) / 2)
    assert main["disturbed_path_m"] == pytest.approx((1.0 + 0.6) / (1 + 3))
    assert main["motion_jerk_m_s3"] == pytest.approx(2.0)  # only ep1 has a score
    assert s["extra"]["motion_anomaly_per_episode"] == pytest.approx((4 + 0) / 2)
    assert main["avg_steps"] == pytest.approx(20.0)
    assert main["input_tokens_per_step"] == pytest.approx(30000 / 40)
    assert main["output_tokens_per_step"] == pytest.approx(1500 / 40)
    assert list(main) == [key for _, key, _ in MAIN_COLUMNS]
    variants = s["variants"]
    assert variants == pytest.approx(
        {
            "geo_find_sr_pct": 100.0,
            "geo_nav_sr_20cm_pct": 50.0,
            "nav_sr_1m_pct": 50.0,
            "geo_interact_sr_pct": 100.0,
        }
    )
    assert s["collision_by_group_pct"] == pytest.approx(
        {"arm/hand": (100 / 9 + 10) / 2, "torso": (200 / 9) / 2, "leg/foot": 5.0, "head": 0.0}
    )
    counts = s["counts"]
    assert counts["episodes"] == 2 and counts["interact_episodes"] == 1
    assert counts["episodes_with_jerk"] == 1 and counts["affected_objects"] == 4
    assert counts["episodes_without_motion"] == 0 and counts["total_steps"] == 40
    assert counts["initial_penetration_flagged"] == 1
    assert counts["motion_anomaly_frames"] == 4 and counts["episodes_with_motion_anomaly"] == 1
    assert counts["episodes_without_anomaly_count"] == 0
    assert s["tokens"]["source"] == "mixed"
    assert s["tokens"]["reasoning_tokens_per_step"] == pytest.approx(100 / 40)
    assert s["by_category"]["couch"]["interact_sr_pct"] == 100.0
    assert s["by_category"]["chair"]["interact_sr_pct"] is None
    assert list(s["by_category"]) == ["chair", "couch"]
    assert s["by_difficulty"]["hard"]["geo_find_sr_pct"] == 100.0
    assert s["source"]["files"] == 2


def test_dtb_distance_is_pooled_not_a_mean_of_episode_means():
    s = aggregate([episode(), episode(**SECOND)])
    pooled = s["main"]["disturbed_path_m"]
    mean_of_means = (1.0 / 1 + 0.6 / 3) / 2
    assert pooled == pytest.approx(0.4)
    assert mean_of_means == pytest.approx(0.6)
    assert pooled != pytest.approx(mean_of_means)


def _still(rules: str) -> dict:
    """An episode that stopped at once (no motion step), scored under ``rules``."""
    empty = None if rules == "strict" else 0.0
    return episode(
        rules=rules,
        episode_id="ep3",
        steps=1,
        motion_steps=0,
        collision_steps=0,
        collision_rate=empty,
        collision_steps_by_group={g: 0 for g in ("arm/hand", "torso", "leg/foot", "head")},
        collision_rate_by_group={g: empty for g in ("arm/hand", "torso", "leg/foot", "head")},
        motion_jerk_m_s3=None,
        tokens={
            "input_tokens": 0,
            "output_tokens": 0,
            "reasoning_tokens": 0,
            "calls": 0,
            "failed_calls": 0,
            "source": "none",
        },
        difficulty=None,
        interact_success=False,
        nav_success_20cm=False,
        nav_success_1m=False,
    )


def test_episodes_without_motion_count_zero_under_paper_rules():
    s = aggregate([episode(), _still("paper")])
    assert s["rules"] == "paper"
    assert s["main"]["collision_pct"] == pytest.approx(100 * 3 / 9 / 2)
    assert s["collision_by_group_pct"]["torso"] == pytest.approx(100 * 2 / 9 / 2)
    assert s["counts"]["episodes_without_motion"] == 1


def test_episodes_without_motion_leave_the_collision_mean_under_strict_rules():
    s = aggregate([episode(rules="strict"), _still("strict")])
    assert s["rules"] == "strict"
    assert s["main"]["collision_pct"] == pytest.approx(100 * 3 / 9)
    assert s["counts"]["episodes_without_motion"] == 1
    assert s["tokens"]["source"] == "provider"  # "none" episodes do not make a run mixed
    assert list(s["by_difficulty"]) == ["easy", "unlabelled"]
    assert s["main"]["avg_steps"] == pytest.approx(5.5)


def test_v1_files_without_motion_anomaly_are_read_and_left_out_of_its_mean():
    old = episode(episode_id="ep0", schema="humanclaw_metrics_v1")
    del old["motion_anomaly"], old["max_joint_tracking_error_deg"]
    s = aggregate([old, episode(**SECOND)])
    assert s["extra"]["motion_anomaly_per_episode"] == 0.0  # only the v2 episode counts
    assert s["counts"]["episodes_without_anomaly_count"] == 1
    assert aggregate([old])["extra"]["motion_anomaly_per_episode"] is None
    assert "Anom./ep" in format_tables(s)


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("motion_anomaly", None, "motion_anomaly must be an integer >= 0, got null"),
        ("motion_anomaly", -1, "motion_anomaly must be an integer >= 0, got -1"),
        ("motion_anomaly", 2.0, "motion_anomaly must be an integer >= 0, got 2.0"),
        ("max_joint_tracking_error_deg", 181.0, r"in \[0, 180\]"),
        ("max_joint_tracking_error_deg", None, "needs a max_joint_tracking_error_deg"),
    ],
)
def test_v2_motion_anomaly_fields_are_checked(field, value, match):
    with pytest.raises(MetricsFileError, match=match):
        aggregate([episode(**{field: value})])


def test_interact_rates_need_interact_episodes():
    s = aggregate([episode(**SECOND)])
    assert s["main"]["interact_sr_pct"] is None and s["variants"]["geo_interact_sr_pct"] is None
    assert "-" in format_tables(s)


def test_corrupt_and_invalid_files_are_named(tmp_path):
    bad = tmp_path / "a" / "metrics.json"
    bad.parent.mkdir(parents=True)
    bad.write_text("{not json")
    with pytest.raises(MetricsFileError, match=str(bad)):
        aggregate_metric_files(tmp_path)
    bad.write_text(json.dumps(episode(schema="other")))
    with pytest.raises(MetricsFileError, match="schema"):
        aggregate_metric_files(tmp_path)
    bad.write_text(json.dumps(episode(interact_success=None)))
    with pytest.raises(MetricsFileError, match="interact_success"):
        aggregate_metric_files(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="no metrics.json"):
        aggregate_metric_files(empty)


def test_format_tables_column_order(run_dir):
    text = format_tables(aggregate_metric_files(run_dir))
    header = text.splitlines()[1]
    labels = [label for label, _, _ in MAIN_COLUMNS]
    positions = [header.index(label) for label in labels]
    assert positions == sorted(positions)
    for title in (
        "Success variants",
        "Collision by body group",
        "Denominators",
        "By category",
        "By difficulty",
    ):
        assert title in text
    assert "GeoFindSR" in text and "GeoInteractSR" in text and "source: mixed" in text


def test_cli_prints_table_and_writes_summary(run_dir, capsys):
    assert metrics_main([str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert "FindSR" in out and "NavSR@20cm" in out and "26.7" in out
    assert not (run_dir / "metrics_summary.json").exists()  # read-only by default

    assert metrics_main([str(run_dir), "--write-json"]) == 0
    capsys.readouterr()
    written = json.loads((run_dir / "metrics_summary.json").read_text())
    assert written["schema"] == "humanclaw_metrics_summary_v2"
    assert written["rules"] == "paper"
    assert written["main"]["avg_steps"] == 20.0
    # the summary file is not picked up as an episode on the next run
    assert aggregate_metric_files(run_dir)["counts"]["episodes"] == 2

    assert humanclaw_main(["metrics", str(run_dir), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["main"] == written["main"]


def test_cli_without_metrics_files(tmp_path, capsys):
    assert metrics_main([str(tmp_path)]) == 2
    assert "no metrics.json" in capsys.readouterr().err
    assert metrics_main([str(tmp_path / "missing")]) == 2


def test_cli_corrupt_file_exit_2(tmp_path, capsys):
    (tmp_path / "metrics.json").write_text("[]")
    assert metrics_main([str(tmp_path)]) == 2
    assert str(tmp_path / "metrics.json") in capsys.readouterr().err


def test_cli_plot(run_dir, tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "plots" / "success.png"
    assert metrics_main([str(run_dir), "--plot", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_plot_without_matplotlib(run_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)  # makes the import fail
    assert metrics_main([str(run_dir), "--plot", str(tmp_path / "x.png")]) == 2
    assert "matplotlib" in capsys.readouterr().err
    assert not (tmp_path / "x.png").exists()


def test_metrics_cli_imports_no_simulator():
    code = (
        "import sys, humanclaw_gym.cli.metrics_cmd\n"
        "bad = [m for m in ('pybullet', 'moderngl', 'torch', 'matplotlib', "
        "'humanclaw_gym.envs.find_nav_interact') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_plot_marks_not_applicable_interact_and_uses_the_interact_n(run_dir):
    """InteractSR without interact episodes is marked n/a (it used to look like 0 %), and
    its bars carry the interact-episode count, not the all-episode n of the tick label."""
    pytest.importorskip("matplotlib")
    from humanclaw_gym.metrics.plot import success_figure

    third = episode(episode_id="ep3", category="chair", difficulty="hard", **{
        k: v for k, v in SECOND.items() if k not in ("episode_id", "category", "difficulty")
    })  # fmt: skip
    summary = aggregate([episode(), episode(**SECOND), third])
    fig = success_figure(summary)
    category_axes = fig.axes[0]
    labels = {t.get_text() for t in category_axes.get_xticklabels()}
    assert labels == {"chair\n(n=2)", "couch\n(n=1)"}
    marks = sorted(t.get_text() for t in category_axes.texts)
    assert marks == ["n/a", "n=1"]  # chairs: not applicable; couch: its one interact episode
    assert "paper metric rules" in category_axes.get_title()
