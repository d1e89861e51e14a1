"""The documented figures: regenerate them, and keep the docs equal to them.

``docs/results/val100_<name>_metrics_summary.json`` (and, for the image-goal task,
``docs/results/imagegoal_<name>_metrics_summary.json``) are the single source of every
benchmark figure quoted in the README and ``docs/``. This script

* ``run``: reruns the baselines below (``humanclaw run ... --metrics``) and copies each
  ``metrics_summary.json`` (it records the package versions and git revision) into
  ``docs/results/``; for the oracle runs of ``FIDELITY`` it also measures their motion
  (``benchmarks/motion_fidelity.py``) into ``docs/results/motion_fidelity_<name>.json``;
* ``fidelity``: only that measurement, from the kept runs;
* ``docs``: writes the figures into the docs wherever a marker asks for one, and with
  ``--check`` only reports docs that disagree with the JSON (``tests/test_docs_results.py``
  runs that check, so a doc cannot drift from the results).

Markers (HTML comments, invisible in rendered Markdown):

* a value: ``<!--r:oracle:main.nav_sr_20cm_pct:.1f-->98.0<!--/r-->`` (baseline, dotted
  key path into its summary, format spec); ``<!--r:oracle:rules:s-->paper<!--/r-->`` names
  the metric rules the figures were scored by; a name with its own
  ``docs/results/<name>.json`` reads that file (``paper_differences``: written by
  ``benchmarks/paper_differences.py --release PATH``);
* a whole table: ``<!--table:baselines-main-->`` ... ``<!--/table-->`` (see ``TABLES``).

Baselines that need the reference release (``Baseline.release``: e.g. its hand-merged body
as ``--body-asset``) run only with ``run --release PATH`` (a checkout of the release); without
it they are skipped and their kept JSON (and doc rows) stay as they are. A table row of such
a baseline whose JSON is missing is left out, never filled in.

Usage::

    python scripts/make_results.py run --workers 2          # about 10 minutes on 2 cores
    python scripts/make_results.py run --only random
    python scripts/make_results.py run --only oracle_release_body oracle_release_body_mujoco \
        --release /path/to/HumanCLAW                        # the release's body
    python scripts/make_results.py fidelity                 # remeasure the kept runs' motion
    python scripts/make_results.py docs                     # rewrite the docs from the JSON
    python scripts/make_results.py docs --check             # exit 1 when a doc disagrees
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tyro

from humanclaw_gym.fileio import write_json_atomic, write_text_atomic

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "docs" / "results"
DOCS = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))


@dataclass(frozen=True)
class Baseline:
    """One documented run: its label in tables and the ``humanclaw run`` arguments.

    ``release``: ``(option, path inside the release checkout)`` pairs appended to the
    arguments as ``option RELEASE/path`` (the baseline runs only with ``--release``).
    ``task`` is the ``--task`` of the run (None: the benchmark's, no flag), ``episodes``
    its ``--episodes``.
    """

    name: str
    label: str
    args: tuple[str, ...]
    release: tuple[tuple[str, str], ...] = ()
    episodes: str = "val100"
    task: str | None = None

    @property
    def command(self) -> str:
        """The documented command (a release path shown as ``RELEASE/...``)."""
        task = () if self.task is None else ("--task", self.task)
        shown = [
            *self.args,
            *(a for option, rel in self.release for a in (option, f"RELEASE/{rel}")),
        ]
        return " ".join(("humanclaw run", *task, "--episodes", self.episodes, *shown))

    @property
    def summary_file(self) -> str:
        """The summary's file name under ``docs/results``."""
        if self.task is None:
            return f"{self.episodes}_{self.name}_metrics_summary.json"
        return f"{self.name}_metrics_summary.json"


#: The reference release's default body, inside its checkout.
_RELEASE_BODY = "resources/agent/neutral_beta0_handmerged"

BASELINES: tuple[Baseline, ...] = (
    Baseline("oracle", "oracle (privileged)", ("--agent", "oracle")),
    Baseline(
        "oracle_flow",
        "oracle, learned motion (`--motion flow`)",
        ("--agent", "oracle", "--motion", "flow"),
    ),
    Baseline("random", "random (seed 0)", ("--agent", "random", "--seed", "0")),
    Baseline(
        "bc",
        "behaviour cloning (CNN, [learned_policy.md](learned_policy.md))",
        ("--agent", "bc"),
    ),
    Baseline(
        "oracle_mujoco",
        "oracle, MuJoCo physics (`--physics mujoco`)",
        ("--agent", "oracle", "--physics", "mujoco"),
    ),
    Baseline(
        "oracle_flow_mujoco",
        "oracle, learned motion, MuJoCo physics",
        ("--agent", "oracle", "--motion", "flow", "--physics", "mujoco"),
    ),
    Baseline(
        "oracle_release_body",
        "oracle, the release's hand-merged body (`--body-asset`)",
        ("--agent", "oracle"),
        (("--body-asset", _RELEASE_BODY),),
    ),
    Baseline(
        "oracle_release_body_mujoco",
        "oracle, the release's hand-merged body, MuJoCo physics",
        ("--agent", "oracle", "--physics", "mujoco"),
        (("--body-asset", _RELEASE_BODY),),
    ),
    # image-goal navigation (docs/tasks.md)
    Baseline(
        "imagegoal_oracle",
        "oracle (privileged)",
        ("--agent", "oracle"),
        episodes="imagegoal_val100",
        task="image_goal",
    ),
    Baseline(
        "imagegoal_oracle_mujoco",
        "oracle, MuJoCo physics (`--physics mujoco`)",
        ("--agent", "oracle", "--physics", "mujoco"),
        episodes="imagegoal_val100",
        task="image_goal",
    ),
    Baseline(
        "imagegoal_random",
        "random (seed 0)",
        ("--agent", "random", "--seed", "0"),
        episodes="imagegoal_val100",
        task="image_goal",
    ),
    Baseline(
        "imagegoal_random_mujoco",
        "random (seed 0), MuJoCo physics",
        ("--agent", "random", "--seed", "0", "--physics", "mujoco"),
        episodes="imagegoal_val100",
        task="image_goal",
    ),
)
#: The oracle runs whose motion ``benchmarks/motion_fidelity.py`` measures
#: (``docs/results/motion_fidelity_<name>.json``, the tables of docs/motion.md).
FIDELITY: tuple[str, ...] = (
    "oracle",
    "oracle_flow",
    "oracle_mujoco",
    "oracle_flow_mujoco",
    "oracle_release_body",
    "oracle_release_body_mujoco",
)


def summary_path(name: str) -> Path:
    """``docs/results/<name>.json`` when it exists (other measurements, e.g.
    ``paper_differences`` from ``benchmarks/paper_differences.py``), else the baseline's
    summary (``val100_<name>_metrics_summary.json`` for the benchmark's, ``<name>_metrics_
    summary.json`` for another task's)."""
    direct = RESULTS / f"{name}.json"
    if direct.is_file():
        return direct
    baseline = next((b for b in BASELINES if b.name == name), None)
    if baseline is not None:
        return RESULTS / baseline.summary_file
    return RESULTS / f"val100_{name}_metrics_summary.json"


def fidelity_path(name: str) -> Path:
    return RESULTS / f"motion_fidelity_{name}.json"


def load_fidelity(name: str) -> dict[str, Any]:
    path = fidelity_path(name)
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: run `python scripts/make_results.py run`")
    return json.loads(path.read_text(encoding="utf-8"))


def load_summary(name: str) -> dict[str, Any]:
    path = summary_path(name)
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: run `python scripts/make_results.py run`")
    return json.loads(path.read_text(encoding="utf-8"))


def lookup(summary: dict[str, Any], dotted: str) -> Any:
    if dotted == "rules" and "rules" not in summary:
        # written before the metric-rules setting: scored by what is now called "strict"
        return "strict"
    value: Any = summary
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            raise KeyError(f"no {dotted!r} in the summary (missing {part!r})")
        value = value[part]
    return value


def fmt(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


# ----------------------------------------------------------------------------------------
# tables
# ----------------------------------------------------------------------------------------
_MAIN_COLUMNS = (
    ("FindSR", "main.find_sr_pct", ".1f"),
    ("NavSR@20cm", "main.nav_sr_20cm_pct", ".1f"),
    ("InteractSR", "main.interact_sr_pct", ".1f"),
    ("Coll. %", "main.collision_pct", ".1f"),
    ("#Dtb/ep", "main.disturbed_objects_per_episode", ".2f"),
    ("dDtb (m)", "main.disturbed_path_m", ".3f"),
    ("Motion Jerk (m/s^3)", "main.motion_jerk_m_s3", ".2f"),
    ("avg steps", "main.avg_steps", ".1f"),
)
_VARIANT_COLUMNS = (
    ("GeoFindSR", "variants.geo_find_sr_pct", ".1f"),
    ("GeoNavSR@20cm", "variants.geo_nav_sr_20cm_pct", ".1f"),
    ("NavSR@1m", "variants.nav_sr_1m_pct", ".1f"),
    ("GeoInteractSR", "variants.geo_interact_sr_pct", ".1f"),
)


def _documented(baselines: tuple[Baseline, ...]) -> list[Baseline]:
    """The baselines with figures: all, but one that needs the release only when its JSON
    was kept (made with ``run --release``)."""
    return [b for b in baselines if not b.release or summary_path(b.name).is_file()]


_IMAGEGOAL_COLUMNS = (
    ("SR", "main.sr_pct", ".1f"),
    ("SPL", "main.spl_pct", ".1f"),
    ("dist. to goal (m)", "main.distance_to_goal_m", ".2f"),
    ("Coll. %", "main.collision_pct", ".1f"),
    ("Motion Jerk (m/s^3)", "main.motion_jerk_m_s3", ".2f"),
    ("avg steps", "main.avg_steps", ".1f"),
)


def _table(columns: tuple[tuple[str, str, str], ...], task: str | None = None) -> str:
    """One row per baseline of ``task`` (None: the benchmark's)."""
    head = "| policy | " + " | ".join(c[0] for c in columns) + " |"
    rule = "|---|" + "---|" * len(columns)
    rows = []
    for b in (b for b in _documented(BASELINES) if b.task == task):
        s = load_summary(b.name)
        cells = [fmt(lookup(s, path), spec) for _, path, spec in columns]
        rows.append(f"| {b.label} | " + " | ".join(cells) + " |")
    return "\n".join([head, rule, *rows])


def _pct(value: Any) -> str:
    return "-" if value is None else f"{100.0 * value:.1f}"


def _fidelity_table() -> str:
    """Per run and skill: the field metrics of the realized motion (benchmarks/motion_fidelity.py)."""
    head = (
        "| run | skill | frames | foot skate % (generated) | floating % | penetration max (cm) "
        "| joint-limit frames | joint gap p95 / max (cm) |"
    )
    rows = [head, "|---|---|---|---|---|---|---|---|"]
    for name in _fidelity_runs():
        field = load_fidelity(name)["field"]
        label = next(b.label for b in BASELINES if b.name == name)
        for skill, row in [("all", field["all"]), *field["per_skill"].items()]:
            gap = row["joint_gap_m"]
            rows.append(
                f"| {label} | {skill} | {row['frames']} | {_pct(row['foot_skate_ratio'])} "
                f"({_pct(row['foot_skate_ratio_generated'])}) "
                f"| {_pct(row['floating_share'])} | {_pct(row['penetration_max_m'])} "
                f"| {row['joint_limit_violation_frames']} "
                f"| {_pct(gap['p95'])} / {_pct(gap['max'])} |"
            )
    return "\n".join(rows)


def _fidelity_runs() -> list[str]:
    """The FIDELITY runs with a measurement (one that needs the release only when kept)."""
    needs = {b.name for b in BASELINES if b.release}
    return [n for n in FIDELITY if n not in needs or fidelity_path(n).is_file()]


def _sits_table() -> str:
    """Per run: the seated pose at the end of every Sit down, bone lengths and the gates."""
    head = (
        "| run | Sits | heels > 4 cm | hands held out | bad Sits | heel height median / max (cm) "
        "| wrist below shoulder min / median (cm) | bone length dev. max (mm) | gates failed |"
    )
    rows = [head, "|---|---|---|---|---|---|---|---|---|"]
    for name in _fidelity_runs():
        report = load_fidelity(name)
        field = report["field"]
        label = next(b.label for b in BASELINES if b.name == name)
        heel, wrist = field["sit_heel_above_floor_m"], field["sit_wrist_below_shoulder_m"]
        failed = [k for k, ok in report["gates"].items() if not ok]
        rows.append(
            f"| {label} | {field['sits']} | {field['sits_heels_up']} "
            f"| {field['sits_hands_held_out']} | {field['bad_sits']} "
            f"| {_pct(heel['median'])} / {_pct(heel['max'])} "
            f"| {_pct(wrist['min'])} / {_pct(wrist['median'])} "
            f"| {1000.0 * field['all']['bone_length_deviation_max_m']:.3f} "
            f"| {', '.join(failed) if failed else 'none'} |"
        )
    return "\n".join(rows)


TABLES = {
    "baselines-main": lambda: _table(_MAIN_COLUMNS),
    "baselines-variants": lambda: _table(_VARIANT_COLUMNS),
    "imagegoal-main": lambda: _table(_IMAGEGOAL_COLUMNS, "image_goal"),
    "motion-fidelity": _fidelity_table,
    "motion-fidelity-sits": _sits_table,
}

_VALUE_RE = re.compile(
    r"<!--r:(?P<name>\w+):(?P<path>[\w.@/-]+):(?P<spec>[^>]*?)-->(?P<old>.*?)<!--/r-->"
)
#: A table between its markers; an empty one (the two markers on consecutive lines) as well.
_TABLE_RE = re.compile(r"(<!--table:(?P<name>[\w-]+)-->\n)(?P<old>.*?)(\n?<!--/table-->)", re.S)


def render(text: str) -> str:
    """``text`` with every marker's content replaced by the current figure."""

    def value(m: re.Match[str]) -> str:
        new = fmt(lookup(load_summary(m["name"]), m["path"]), m["spec"])
        return m.group(0).replace(f"-->{m['old']}<!--/r-->", f"-->{new}<!--/r-->")

    def table(m: re.Match[str]) -> str:
        if m["name"] not in TABLES:
            raise KeyError(f"unknown table {m['name']!r}: known {sorted(TABLES)}")
        return m.group(1) + TABLES[m["name"]]() + "\n<!--/table-->"

    return _VALUE_RE.sub(value, _TABLE_RE.sub(table, text))


def check_docs(paths: tuple[Path, ...] = DOCS) -> list[str]:
    """The docs whose markers disagree with the results (empty when all agree)."""
    return [str(p.relative_to(ROOT)) for p in paths if render(p.read_text()) != p.read_text()]


# ----------------------------------------------------------------------------------------
# commands
# ----------------------------------------------------------------------------------------
@dataclass
class RunArgs:
    """Rerun the baselines and refresh docs/results/*.json."""

    only: tuple[str, ...] = ()
    """baseline names to run (default: all)"""
    workers: int = 2
    """worker processes per run"""
    keep: Path = ROOT / "outputs" / "results"
    """where the run directories are kept (KEEP/<name>; replaced on a rerun), e.g. for
    benchmarks/physics_parity.py and benchmarks/motion_fidelity.py"""
    release: Path | None = None
    """a checkout of the reference release: runs the baselines that need it (its body);
    without it they are skipped"""


@dataclass
class FidelityArgs:
    """Measure the motion of the kept oracle runs (no rerun) into docs/results."""

    only: tuple[str, ...] = ()
    """runs to measure (default: all of FIDELITY)"""
    keep: Path = ROOT / "outputs" / "results"
    """where the run directories are kept"""


@dataclass
class DocsArgs:
    """Write the figures into the docs (or only check them)."""

    check: bool = False
    """report docs that disagree with docs/results and exit 1; change nothing"""


def run(args: RunArgs) -> int:
    chosen = [b for b in BASELINES if not args.only or b.name in args.only]
    unknown = sorted(set(args.only) - {b.name for b in BASELINES})
    if unknown:
        print(f"unknown baselines {unknown}: known {[b.name for b in BASELINES]}", file=sys.stderr)
        return 2
    for b in chosen:
        if b.release and args.release is None:
            print(f"  {b.name}: skipped (needs --release PATH, a reference release checkout)")
            continue
        extra: list[str] = []
        for option, rel in b.release:
            assert args.release is not None
            path = args.release / rel
            if not path.exists():
                print(f"--release {args.release}: {rel} is missing", file=sys.stderr)
                return 2
            extra += [option, str(path)]
        out = args.keep / b.name
        if out.exists():
            shutil.rmtree(out)
        task = () if b.task is None else ("--task", b.task)
        cmd = [
            sys.executable, "-m", "humanclaw_gym", "run", *task, "--episodes", b.episodes,
            *b.args, *extra, "--metrics", "--workers", str(args.workers), "--output", str(out),
            "--quiet",
        ]  # fmt: skip
        print("$", " ".join(cmd[2:]), flush=True)
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        RESULTS.mkdir(parents=True, exist_ok=True)
        summary = json.loads((out / "metrics_summary.json").read_text())
        summary["source"] = {"command": b.command}
        write_json_atomic(summary_path(b.name), summary, sort_keys=True)
        print(f"  {b.name}: {time.perf_counter() - t0:.0f} s -> {summary_path(b.name)}")
        if b.name in FIDELITY:
            fidelity(FidelityArgs(only=(b.name,), keep=args.keep))
    return 0


def fidelity(args: FidelityArgs) -> int:
    """Measure the kept runs' motion (benchmarks/motion_fidelity.py) into docs/results."""
    chosen = [n for n in FIDELITY if not args.only or n in args.only]
    for name in chosen:
        out = args.keep / name
        tmp = args.keep / f"{name}_motion_fidelity.json"
        cmd = [
            sys.executable, str(ROOT / "benchmarks" / "motion_fidelity.py"), str(out),
            "--out-json", str(tmp),
        ]  # fmt: skip
        print("$", " ".join(cmd[1:]), flush=True)
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        report = json.loads(tmp.read_text())
        report["run_dir"] = f"outputs/results/{name}"  # the same on every machine
        report["source"] = {
            "command": f"python benchmarks/motion_fidelity.py RUN_DIR (RUN_DIR: {name} run)"
        }
        RESULTS.mkdir(parents=True, exist_ok=True)
        write_json_atomic(fidelity_path(name), report, sort_keys=True)
        print(f"  {name}: -> {fidelity_path(name)}")
    return 0


def docs(args: DocsArgs) -> int:
    stale = check_docs()
    if args.check:
        for path in stale:
            print(f"{path}: figures differ from docs/results (python scripts/make_results.py docs)")
        return 1 if stale else 0
    for path in DOCS:
        text = path.read_text()
        new = render(text)
        if new != text:
            write_text_atomic(path, new)
            print(f"updated {path.relative_to(ROOT)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    command: Any = tyro.extras.subcommand_cli_from_dict(
        {"run": RunArgs, "fidelity": FidelityArgs, "docs": DocsArgs},
        args=argv,
        prog="make_results.py",
    )
    if isinstance(command, RunArgs):
        return run(command)
    return fidelity(command) if isinstance(command, FidelityArgs) else docs(command)


if __name__ == "__main__":
    sys.exit(main())
