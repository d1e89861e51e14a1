"""metrics.json files: both layouts read and written, impossible values and duplicated
episodes refused, and a bad file failing ``humanclaw run --metrics --resume`` loudly."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from test_metrics_aggregate import SECOND, episode

from humanclaw_gym.cli.metrics_cmd import main as metrics_main
from humanclaw_gym.metrics import (
    METRIC_SPECS,
    MetricsFileError,
    aggregate,
    aggregate_metric_files,
    read_metric_files,
    read_metrics_record,
    to_reference_layout,
    validate_metrics,
    write_metrics_json,
)

REFERENCE_RUN = Path(__file__).parent / "fixtures" / "reference_run"


def _ours(root: Path) -> Path:
    write_metrics_json(root / "a" / "metrics.json", episode())
    write_metrics_json(root / "b" / "metrics.json", episode(**SECOND, rules="paper"))
    return root


# -- reading the reference layout ------------------------------------------------------------


def test_reference_file_reads_into_our_row():
    data = json.loads(
        (REFERENCE_RUN / "104348028_171512877_ep11_chair/rollout_00/metrics.json").read_text()
    )
    row = read_metrics_record(data, "ref")
    assert row["episode_id"] == "104348028_171512877_11"  # the id our importer gives it
    assert row["rules"] == "paper" and row["imported_from"] == "humanclaw_paper_metrics_v1"
    assert row["ended_by"] == "truncated" and row["active_stop"] is False
    assert row["interact_success"] is None and row["geo_interact_success"] is None
    assert row["floor_source"] == "body_lowest_point_fallback"
    assert row["collision_rate_by_group"] == {
        "arm/hand": 0.1,
        "torso": 0.2,
        "leg/foot": 0.3,
        "head": 0.0,
    }
    assert row["tokens"]["source"] == "mixed" and row["tokens"]["output_tokens"] == 9000
    assert row["difficulty"] is None and row["target_ids"] is None


def test_mixed_directory_aggregates_into_one_table(tmp_path):
    shutil.copytree(REFERENCE_RUN, tmp_path / "reference")
    _ours(tmp_path / "ours")
    summary = aggregate_metric_files(tmp_path)
    assert summary["counts"]["episodes"] == 5 and summary["counts"]["imported_episodes"] == 3
    assert summary["main"]["find_sr_pct"] == pytest.approx(100 * 2 / 5)
    assert list(summary["by_difficulty"]) == ["easy", "hard", "unlabelled"]
    assert metrics_main([str(tmp_path)]) == 0


def test_reference_file_errors_name_the_file_and_field(tmp_path):
    path = tmp_path / "x" / "metrics.json"
    data = json.loads(
        (REFERENCE_RUN / "104348028_171512877_ep1_couch/rollout_00/metrics.json").read_text()
    )
    data["body_scene"]["collision_step_fraction"] = 7.5
    write_metrics_json(path, data)
    with pytest.raises(MetricsFileError, match=rf"{path}: collision_rate must be"):
        aggregate_metric_files(tmp_path)
    del data["success"]["nav_sr_20cm"]
    write_metrics_json(path, data)
    with pytest.raises(MetricsFileError, match=r"success\.nav_sr_20cm is missing"):
        aggregate_metric_files(tmp_path)


# -- writing the reference layout --------------------------------------------------------------


def test_export_upstream_reads_back_identically(tmp_path, capsys):
    source = tmp_path / "src"
    shutil.copytree(REFERENCE_RUN, source / "reference")
    _ours(source / "ours")
    out = tmp_path / "exported"
    assert metrics_main([str(source), "--format", "upstream", "--export", str(out)]) == 0
    files = sorted(out.rglob("metrics.json"))
    assert len(files) == 5
    for f in files:
        assert json.loads(f.read_text())["schema"] == "humanclaw_paper_metrics_v1"
    # the reference release's own run layout
    assert (out / "104348028_171512877_ep11_chair" / "rollout_00" / "metrics.json").is_file()
    before, _ = read_metric_files(source)
    after, _ = read_metric_files(out)
    key = lambda r: r["episode_id"]  # noqa: E731
    assert sorted(after, key=key) == sorted(before, key=key)
    original = aggregate_metric_files(source)
    again = aggregate_metric_files(out)
    original.pop("source"), again.pop("source")
    assert again == original
    # exporting again into the same place is refused (no silent mixing)
    capsys.readouterr()
    assert metrics_main([str(source), "--format", "upstream", "--export", str(out)]) == 2
    assert "already holds" in capsys.readouterr().err


def test_upstream_summary_layout_and_strict_refusal(tmp_path, capsys):
    assert metrics_main([str(REFERENCE_RUN), "--format", "upstream", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    expected = json.loads((REFERENCE_RUN / "summary_expected.json").read_text())
    expected.pop("_comment")
    assert printed == expected
    write_metrics_json(tmp_path / "s" / "metrics.json", episode(rules="strict"))
    with pytest.raises(ValueError, match="paper-rules"):
        to_reference_layout(episode(rules="strict"))
    assert metrics_main([str(tmp_path), "--format", "upstream", "--json"]) == 2
    assert "paper-rules" in capsys.readouterr().err


# -- rules ---------------------------------------------------------------------------------------


def test_rules_recorded_and_checked(tmp_path, capsys):
    _ours(tmp_path)
    write_metrics_json(tmp_path / "c" / "metrics.json", episode(episode_id="ep3", rules="strict"))
    with pytest.raises(MetricsFileError, match="different metric rules"):
        aggregate_metric_files(tmp_path)
    (tmp_path / "c" / "metrics.json").unlink()
    assert aggregate_metric_files(tmp_path)["rules"] == "paper"
    assert metrics_main([str(tmp_path), "--rules", "strict"]) == 2
    err = capsys.readouterr().err
    assert "scored by 'paper' metric rules, but 'strict' were asked for" in err
    assert metrics_main([str(tmp_path), "--rules", "paper"]) == 0
    assert "paper metric rules" in capsys.readouterr().out


def test_v1_files_read_as_strict():
    old = episode(schema="humanclaw_metrics_v1", rules="strict")
    for key in ("rules", "rollout_index", "floor_source"):
        del old[key]
    del old["tokens"]["failed_calls"]
    row = validate_metrics(old)
    assert row["rules"] == "strict" and row["rollout_index"] == 0
    assert aggregate([old])["rules"] == "strict"


# -- impossible values and duplicates (regressions of values the old check accepted) ----------


@pytest.mark.parametrize(
    "change, field",
    [
        ({"collision_rate": -5.0}, "collision_rate"),
        ({"collision_rate": 7.5}, "collision_rate"),
        ({"collision_rate": 0.5}, "collision_rate"),  # not collision_steps / motion_steps
        ({"motion_jerk_m_s3": -1.0}, "motion_jerk_m_s3"),
        ({"category": "spaceship"}, "category"),
        ({"difficulty": "impossible"}, "difficulty"),
        ({"final_distance_m": -0.1}, "final_distance_m"),
        ({"collision_steps": 10}, "collision_steps"),  # more than motion_steps (9)
        (
            {
                "collision_rate_by_group": {
                    "arm/hand": 1.5,
                    "torso": 0.0,
                    "leg/foot": 0.0,
                    "head": 0.0,
                }
            },
            "collision_rate_by_group",
        ),  # fmt: skip
        ({"affected_path_length_sum_m": -1.0}, "affected_path_length_sum_m"),
        ({"ended_by": "truncated"}, "active_stop"),  # active_stop true but not a stop
        ({"steps": True}, "steps"),
        ({"rules": "lenient"}, "rules"),
        ({"rollout_index": -1}, "rollout_index"),
        ({"initial_penetration_m": -0.5}, "initial_penetration_m"),
        ({"tokens": {**episode()["tokens"], "input_tokens": -3}}, "tokens.input_tokens"),
        ({"tokens": {**episode()["tokens"], "source": "guess"}}, "tokens.source"),
    ],
)
def test_impossible_values_are_refused(tmp_path, change, field):
    path = tmp_path / "run" / "metrics.json"
    write_metrics_json(path, episode(**change))
    with pytest.raises(MetricsFileError, match=rf"{path}: .*{field}"):
        aggregate_metric_files(tmp_path)


def test_a_copied_run_directory_is_not_counted_twice(tmp_path, capsys):
    _ours(tmp_path / "run")
    shutil.copytree(tmp_path / "run", tmp_path / "run copy")
    with pytest.raises(MetricsFileError, match="appears twice"):
        aggregate_metric_files(tmp_path)
    assert metrics_main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "'ep1' (rollout 0) appears twice" in err and "run copy" in err
    # a second rollout of the same episode is not a duplicate
    write_metrics_json(tmp_path / "run" / "again" / "metrics.json", episode(rollout_index=1))
    shutil.rmtree(tmp_path / "run copy")
    assert aggregate_metric_files(tmp_path)["counts"]["episodes"] == 3


def test_same_episode_in_both_layouts_is_a_duplicate(tmp_path):
    shutil.copytree(REFERENCE_RUN, tmp_path / "reference")
    row = read_metrics_record(
        json.loads(
            (REFERENCE_RUN / "104348028_171512877_ep1_couch/rollout_00/metrics.json").read_text()
        )
    )
    ours = {**row, "schema": "humanclaw_metrics_v2"}
    ours.pop("imported_from")
    ours.update({k: v for k, v in episode().items() if row.get(k) is None})
    ours["tokens"] = {**ours["tokens"], "failed_calls": 0}
    write_metrics_json(tmp_path / "ours" / "metrics.json", ours)
    with pytest.raises(MetricsFileError, match="104348028_171512877_1"):
        aggregate_metric_files(tmp_path)


def test_every_declared_field_is_checked():
    """Removing any declared field from a valid record is refused, naming that field."""
    names = [f.name for spec in METRIC_SPECS for f in spec.fields]
    assert len(names) == len(set(names))
    for name in names:
        row = episode()
        parts = name.split(".")
        holder = row
        for part in parts[:-1]:
            inner = dict(holder[part])
            holder[part] = inner
            holder = inner
        del holder[parts[-1]]
        with pytest.raises(MetricsFileError, match=re.escape(name)):
            validate_metrics(row)


# -- humanclaw run --metrics --resume with a bad file (regression: exit 0, old summary kept) ---


def test_resume_with_a_bad_metrics_file_fails_naming_it(tmp_path, capsys):
    from humanclaw_gym.cli import main as humanclaw_main

    out = tmp_path / "run"
    args = ["run", "--episodes", "val100", "--limit", "2", "--agent", "random", "--max-steps"]
    args += ["2", "--metrics", "--quiet", "--output", str(out)]
    assert humanclaw_main(args) == 0
    summary_before = (out / "metrics_summary.json").read_text()
    bad = sorted(out.rglob("metrics.json"))[0]
    data = json.loads(bad.read_text())
    data["collision_rate"] = -5.0
    bad.write_text(json.dumps(data))
    capsys.readouterr()
    assert humanclaw_main([*args, "--resume"]) == 1
    err = capsys.readouterr().err
    assert str(bad) in err and "collision_rate" in err
    assert (out / "metrics_summary.json").read_text() == summary_before
