"""VLM-bound evaluation throughput: episodes per hour against ``--workers``.

    python benchmarks/vlm_throughput.py --out benchmarks/report.json --write-docs   # ~25 min
    python benchmarks/vlm_throughput.py --out /tmp/v.json --workers 1 2 --latency 0.5 \\
        --max-steps 2 --episodes-per-worker 1 --executors local                      # smoke

A VLM agent spends most of an episode waiting for its model. This harness measures how far
``humanclaw run`` scales when it does: the PSV agent (a planner and a verifier call per
decision) against the tests' loopback OpenAI-compatible endpoint (``tests/chat_server.py``),
which answers every request after exactly ``--latency`` seconds (2 s by default) with a
fixed valid reply. Each configuration (executor, workers) runs ``episodes-per-worker x
workers`` val100 episodes of ``--max-steps`` decisions through :func:`run_batch`, as
``humanclaw run`` does, and reports

* ``episodes_per_hour`` (episodes / wall time of the whole ``humanclaw run`` process,
  interpreter, worker start-up and, for Ray, starting the local Ray instance included) and
  ``efficiency``: episodes per hour over ``workers`` times the one-worker figure of the
  same executor (1.0 = linear);
* ``steady_episodes_per_hour``: the rate once every worker has finished its first
  episode (the episodes that end between the ``workers``-th completion and the last one,
  over that time), what a long evaluation sees; its ``steady_efficiency`` likewise;
* ``ideal_episode_s``: the model time of one episode (``max_steps x 2 x latency``), and
  ``episode_wall_s_median``: what an episode took in its worker (``episode_result.json``);
* the load average before and after (the machine is shared; a busy machine slows the CPU
  part of every decision);
* ``cpu_s`` and ``cpu_ms_per_decision``: the CPU time of the run's processes (driver,
  workers, and Ray's own processes for Ray) over all its decisions, start-up included;
* memory: the peak resident set size of each worker process (sampled every 0.25 s; local
  worker processes, or Ray's ``ray::`` processes: task workers, idle workers Ray
  prestarted, and its two per-node agents, DashboardAgent and RuntimeEnvAgent) and of all
  of them together.

``memory_growth`` runs one episode in every scene of the ``val`` split in one process, then
some in the first scenes again, and records its RSS after each: what bounds a worker's
memory (one env, one scene at a time, caches of bounded size) shows as a plateau.

The results go into the ``vlm_throughput`` section of ``--out`` (other sections are kept;
with ``--executors local`` only, the section's Ray rows stay, so one executor can be
measured again when the shared machine is quieter; ``times`` says when each ran);
``--write-docs`` rewrites the table in docs/performance.md between the markers
``<!--vlm-throughput-->`` and ``<!--/vlm-throughput-->`` (``tests/test_scaling_docs.py``
checks that the page and the report agree). Targets are reported, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(_ROOT / "tests"))

SECTION = "vlm_throughput"
DOC = _ROOT / "docs" / "performance.md"
DOC_BEGIN, DOC_END = "<!--vlm-throughput-->", "<!--/vlm-throughput-->"
_KEY_ENV = "HUMANCLAW_BENCH_KEY"
_EFFICIENCY_TARGET = 0.8
_TARGET_UP_TO = 8


def _reply(body: dict[str, Any]) -> str:
    from chat_server import prompt_text

    if "You check one proposed action" in prompt_text(body):
        answer = {"verdict": "accept", "reason": "the lane is clear", "final_action_id": 0}
    else:
        answer = {
            "visible_state": "A hallway; the lane ahead is clear.",
            "mid_level_progress_analysis": "Nothing found yet; keep exploring.",
            "mid_level_goal": "walk down the hallway",
            "low_level_action_reasoning": "The floor ahead is free.",
            "action_id": 0,
            "action_name": "Walk<forward><slow>",
            "additional_info": {},
        }
    return json.dumps(answer)


class _Endpoint:
    """The loopback endpoint, answering after a fixed latency."""

    def __init__(self, latency_s: float) -> None:
        from chat_server import ChatServer

        self.latency_s = latency_s
        self.server = ChatServer(self._answer)

    def _answer(self, body: dict[str, Any]) -> str:
        time.sleep(self.latency_s)
        return _reply(body)

    def __enter__(self) -> _Endpoint:
        self.server.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.__exit__(*exc)

    def model_config(self, directory: Path) -> Path:
        path = directory / "model.json"
        path.write_text(
            json.dumps(
                {
                    "backend": "openai_compatible",
                    "model": "loopback-vlm",
                    "base_url": self.server.url + "/v1",
                    "api_key_env": _KEY_ENV,
                    "max_tokens": 512,
                    "temperature": 0.0,
                    "timeout_s": 60,
                }
            )
        )
        return path

    def take_requests(self) -> int:
        with self.server.lock:
            n = len(self.server.requests)
            self.server.requests.clear()  # the bodies hold base64 images: do not keep them
        return n


class _ProcessSampler:
    """Samples, in a thread, the processes below this one: the RSS of the workers (spawned
    local workers or Ray's ``ray::`` processes; with neither, one local worker, the
    ``humanclaw`` process itself, which then runs the episodes) and the CPU time of all of
    them (workers, the driver, Ray's own processes; a process's last sample counts, so up
    to one period of a process that ends between samples is missed)."""

    def __init__(self, period_s: float = 0.25) -> None:
        import psutil

        self._psutil = psutil
        self.period_s = period_s
        self.peak: dict[int, int] = {}
        self.worker_pids: set[int] = set()
        self.direct_pids: set[int] = set()
        self.cpu_s: dict[int, float] = {}
        self.total_peak = {"workers": 0, "direct": 0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def _is_worker(proc: Any) -> bool:
        try:
            name = proc.name()
            cmdline = " ".join(proc.cmdline())
        except Exception:
            return False
        return name.startswith("ray::") or "multiprocessing.spawn" in cmdline

    def _run(self) -> None:
        me = self._psutil.Process()
        while not self._stop.is_set():
            totals = {"workers": 0, "direct": 0}
            for proc in me.children(recursive=True):
                try:
                    rss = proc.memory_info().rss
                    direct = proc.ppid() == me.pid
                    times = proc.cpu_times()
                except Exception:
                    continue
                self.cpu_s[proc.pid] = times.user + times.system
                self.peak[proc.pid] = max(self.peak.get(proc.pid, 0), rss)
                if self._is_worker(proc):
                    self.worker_pids.add(proc.pid)
                    totals["workers"] += rss
                if direct:
                    self.direct_pids.add(proc.pid)
                    totals["direct"] += rss
            for key, value in totals.items():
                self.total_peak[key] = max(self.total_peak[key], value)
            self._stop.wait(self.period_s)

    def __enter__(self) -> _ProcessSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()

    def summary(self) -> dict[str, Any]:
        if self.worker_pids:
            mib = [self.peak[pid] / 2**20 for pid in self.worker_pids]
            total = self.total_peak["workers"]
        else:
            mib = [self.peak[pid] / 2**20 for pid in self.direct_pids]
            total = self.total_peak["direct"]
        return {
            "worker_processes": len(mib),
            "worker_rss_mib_max": max(mib) if mib else None,
            "worker_rss_mib_median": sorted(mib)[len(mib) // 2] if mib else None,
            "workers_rss_mib_total_peak": total / 2**20 if mib else None,
            "cpu_s": sum(self.cpu_s.values()),
        }


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def run_config(
    executor: str,
    workers: int,
    episodes: int,
    model_config: Path,
    max_steps: int,
    root: Path,
) -> dict[str, Any]:
    """One ``humanclaw run`` process, timed from outside; the figures of one row."""
    import subprocess

    out = root / f"{executor}_{workers}"
    argv = [sys.executable, "-m", "humanclaw_gym", "run", "--episodes", "val100"]
    argv += ["--limit", str(episodes), "--agent", "psv", "--model-config", str(model_config)]
    argv += ["--max-steps", str(max_steps), "--workers", str(workers), "--executor", executor]
    argv += ["--output", str(out), "--quiet"]
    load_before = _load()
    with _ProcessSampler() as sampler:
        t0 = time.time()
        proc = subprocess.run(argv, capture_output=True, text=True)
        wall = time.time() - t0
    processes = sampler.summary()
    match = re.search(r"completed (\d+), skipped \d+, failed (\d+)", proc.stdout)
    completed, failed = (int(match[1]), int(match[2])) if match else (0, episodes)
    results = sorted(out.glob("*/rollout_00/episode_result.json"))
    ends = sorted(p.stat().st_mtime for p in results)
    durations = sorted(json.loads(p.read_text())["wall_time_s"] for p in results)
    row = {
        "executor": executor,
        "workers": workers,
        "episodes": episodes,
        "completed": completed,
        "failed": failed,
        "wall_s": wall,
        "episodes_per_hour": 3600.0 * completed / wall,
        "steady_episodes_per_hour": _steady_rate(ends, workers),
        "episode_wall_s_median": durations[len(durations) // 2] if durations else None,
        "cpu_ms_per_decision": 1000.0 * processes["cpu_s"] / max(1, completed * max_steps),
        "load_before": load_before,
        "load_after": _load(),
        **processes,
    }
    if proc.returncode != 0:
        row["stderr_tail"] = proc.stderr[-2000:]
    return row


def _steady_rate(ends: list[float], workers: int) -> float | None:
    """Episodes per hour after every worker finished its first episode: the ``E - w``
    episodes that completed between the ``w``-th and the last completion, over that time
    (the start-up of the workers and of Ray is before the window)."""
    if len(ends) <= workers:
        return None
    window = ends[-1] - ends[workers - 1]
    return 3600.0 * (len(ends) - workers) / window if window > 0 else None


def memory_growth(model_config: Path, revisits: int, root: Path) -> dict[str, Any]:
    """RSS of one worker process after each episode: one episode in every scene of the
    ``val`` split (41 homes), then ``revisits`` more in the first scenes again. What bounds
    a worker's memory (one env holding one scene at a time, caches of bounded size) shows
    as growth while new scenes come in and none once they repeat."""
    import psutil

    from humanclaw_gym.evaluation.batch import (
        RunConfig,
        _worker_init,
        close_worker_envs,
        list_episode_specs,
        run_one_episode,
    )

    first: dict[str, Any] = {}
    for spec in list_episode_specs("val"):
        first.setdefault(spec.scene_id, spec)
    order = list(first.values())
    order += order[:revisits]
    config = RunConfig(
        agent="psv", model_config=str(model_config), max_steps=1, output=str(root / "growth")
    )
    _worker_init()
    me = psutil.Process()
    rss = []
    try:
        for spec in order:
            res = run_one_episode(spec, config)
            if res["status"] != "completed":
                raise RuntimeError(f"memory_growth: {spec.episode_id} failed: {res.get('error')}")
            rss.append(me.memory_info().rss / 2**20)
    finally:
        close_worker_envs()
    scenes = len(first)
    return {
        "scenes": scenes,
        "revisits": revisits,
        "max_steps": 1,
        "rss_mib_after_each": [round(x, 1) for x in rss],
        "rss_mib_after_first_scene": round(rss[0], 1),
        "rss_mib_after_all_scenes": round(rss[scenes - 1], 1),
        "rss_mib_after_revisits": round(rss[-1], 1),
    }


def _fmt(value: Any, spec: str) -> str:
    return "" if value is None else format(value, spec)


def render_table(section: dict[str, Any]) -> str:
    """The Markdown table of docs/performance.md, from the report section."""
    lines = [
        "| executor | workers | episodes | wall (s) | episodes/h | efficiency | "
        "steady episodes/h | steady efficiency | CPU ms / decision | load before / after | "
        "worker RSS max (MiB) | all workers (MiB) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in section["runs"]:
        lines.append(
            f"| {r['executor']} | {r['workers']} | {r['completed']}/{r['episodes']} | "
            f"{r['wall_s']:.1f} | {r['episodes_per_hour']:.0f} | {_fmt(r['efficiency'], '.2f')} | "
            f"{_fmt(r['steady_episodes_per_hour'], '.0f')} | "
            f"{_fmt(r['steady_efficiency'], '.2f')} | {_fmt(r.get('cpu_ms_per_decision'), '.0f')} | "
            f"{r['load_before'][0]:.1f} / {r['load_after'][0]:.1f} | "
            f"{_fmt(r['worker_rss_mib_max'], '.0f')} | {_fmt(r['workers_rss_mib_total_peak'], '.0f')} |"
        )
    return "\n".join(lines)


def write_docs(section: dict[str, Any], doc: Path = DOC) -> None:
    from humanclaw_gym.fileio import write_text_atomic

    text = doc.read_text()
    head, rest = text.split(DOC_BEGIN, 1)
    _, tail = rest.split(DOC_END, 1)
    write_text_atomic(doc, f"{head}{DOC_BEGIN}\n{render_table(section)}\n{DOC_END}{tail}")


def _finish(section: dict[str, Any]) -> None:
    """Efficiencies against one worker of the same executor, and the targets (whole run and
    steady state, workers up to 8, no failed episode)."""
    targets = {}
    for executor in sorted({r["executor"] for r in section["runs"]}):
        rows = [r for r in section["runs"] if r["executor"] == executor]
        one = next((r for r in rows if r["workers"] == 1), None)
        for r in rows:
            for key, eff in (
                ("episodes_per_hour", "efficiency"),
                ("steady_episodes_per_hour", "steady_efficiency"),
            ):
                base = one.get(key) if one else None
                r[eff] = r[key] / (r["workers"] * base) if base and r.get(key) else None
        checked = [r for r in rows if r["workers"] <= _TARGET_UP_TO]
        if not one or not checked:
            continue
        for eff in ("efficiency", "steady_efficiency"):
            name = f"{executor}_{eff}_ge_{_EFFICIENCY_TARGET}_up_to_{_TARGET_UP_TO}_workers"
            targets[name] = all(
                r[eff] is not None and r[eff] >= _EFFICIENCY_TARGET and r["failed"] == 0
                for r in checked
            )
    section["targets"] = targets


def _merged(previous: Any, section: dict[str, Any], executors: list[str]) -> dict[str, Any]:
    """This run's rows, plus the previous section's rows of executors not run now (and its
    memory_growth when skipped now), when the conditions are the same: one executor can be
    measured again when the machine is quieter. ``times`` says when each executor ran."""
    times = {executor: section["time"] for executor in executors}
    if not isinstance(previous, dict) or previous.get("conditions") != section["conditions"]:
        return {**section, "times": times}
    kept = [r for r in previous.get("runs", []) if r["executor"] not in executors]
    old_times = previous.get("times") or {r["executor"]: previous["time"] for r in kept}
    times = {**{r["executor"]: old_times.get(r["executor"]) for r in kept}, **times}
    merged = {**section, "runs": kept + section["runs"], "times": times}
    if "memory_growth" not in section and "memory_growth" in previous:
        merged["memory_growth"] = previous["memory_growth"]
    merged["runs"].sort(key=lambda r: (r["executor"], r["workers"]))
    return merged


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=Path("benchmarks/report.json"))
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    parser.add_argument("--executors", nargs="+", default=["local", "ray"])
    parser.add_argument("--latency", type=float, default=2.0, help="seconds per model reply")
    parser.add_argument("--max-steps", type=int, default=5, help="decisions per episode")
    parser.add_argument("--episodes-per-worker", type=int, default=4)
    parser.add_argument(
        "--growth-revisits",
        type=int,
        default=10,
        help="memory_growth: episodes after one in every val scene (-1 skips the section)",
    )
    parser.add_argument("--write-docs", action="store_true", help="rewrite docs/performance.md")
    args = parser.parse_args()

    from humanclaw_gym.fileio import write_json_atomic

    os.environ[_KEY_ENV] = "loopback"
    os.environ["NO_PROXY"] = "127.0.0.1,localhost"
    for name in [k for k in os.environ if k.lower() in ("http_proxy", "https_proxy", "all_proxy")]:
        del os.environ[name]
    section: dict[str, Any] = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "cpus": os.cpu_count(),
        "conditions": {
            "agent": "psv (planner + verifier: 2 model calls per decision)",
            "latency_s": args.latency,
            "max_steps": args.max_steps,
            "episodes_per_worker": args.episodes_per_worker,
            "episodes": "the first episodes of val100",
            "ideal_episode_s": args.max_steps * 2 * args.latency,
        },
        "load_average_start": _load(),
        "runs": [],
    }
    with tempfile.TemporaryDirectory(prefix="vlm-bench-") as tmp, _Endpoint(args.latency) as ep:
        root = Path(tmp)
        model_config = ep.model_config(root)
        if args.growth_revisits >= 0:
            print("memory of one worker over every val scene ...", flush=True)
            (root / "instant").mkdir()
            with _Endpoint(0.0) as instant:
                instant_config = instant.model_config(root / "instant")
                section["memory_growth"] = memory_growth(instant_config, args.growth_revisits, root)
        for executor in args.executors:
            for workers in args.workers:
                n = workers * args.episodes_per_worker
                print(f"{executor}, {workers} worker(s), {n} episodes ...", flush=True)
                row = run_config(executor, workers, n, model_config, args.max_steps, root)
                row["model_requests"] = ep.take_requests()
                section["runs"].append(row)
                print(
                    f"  {row['wall_s']:.1f} s, {row['episodes_per_hour']:.0f} episodes/h, "
                    f"load {row['load_before'][0]} -> {row['load_after'][0]}, "
                    f"worker RSS max {row['worker_rss_mib_max']}",
                    flush=True,
                )
    section["load_average_end"] = _load()
    report = json.loads(args.out.read_text()) if args.out.is_file() else {}
    section = _merged(report.get(SECTION), section, args.executors)
    _finish(section)
    report[SECTION] = section
    write_json_atomic(args.out, report, sort_keys=True)
    print(render_table(section))
    print(json.dumps(section["targets"], indent=2))
    if args.write_docs:
        write_docs(section)
        print(f"table written to {DOC}")
    print(f"section {SECTION!r} written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
