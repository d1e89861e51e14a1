"""Speed and memory of the paper's motion model (``motion="paper"``) on this machine.

    python benchmarks/paper_motion.py --out benchmarks/paper_motion_report.json
    python benchmarks/paper_motion.py --out /tmp/p.json --release /path/to/HumanCLAW
    python benchmarks/paper_motion.py --out /tmp/p.json --weights DIR --release DIR

Without ``--weights`` the harness writes random weights of the release's architecture
(MotionDiT 512 wide, 10 layers, 8 heads; eight control branches; about 1.1 GB) in the
release's layout into a temporary directory (``--tmp``), so no download is needed: speed
does not depend on the values. Measured:

* ``load``: verifying and loading every file (size, SHA-256, weights-only unpickling,
  strict checks, two base variants), and the parameter memory: the distinct tensors held
  against what eight private copies of the base would take;
* ``one_decision``: one chunk (``generate``) with torch on 1 thread and on every CPU, and
  its parts: preparing the request (condition, noise), the 60 velocity evaluations of the
  midpoint solver (split into the base's layers, the skill's control layers and the
  rest), placing the chunk in the world and re-canonicalising the history;
* ``batch``: 8 generators' chunks of mixed skills in one batched call
  (:func:`~humanclaw_gym.motion.paper.generate_many`) against one decision, on the same
  thread count, alternately;
* ``gemm_rows`` (always; alone with ``--gemm-only``, a few seconds): the floor a CPU puts
  under the batch target. Every layer of an evaluation is a matrix product of the
  decision's 20 tokens with one of the architecture's weight matrices (512 x 1536,
  512 x 512, 512 x 1024, 1024 x 512); a batch of 8 multiplies 8 times the rows, so it can
  only be cheaper than 8 decisions by what the larger products gain in speed per row. The
  harness times the four products at 20 and at 8 x 20 rows on one thread and reports that
  gain and ``batch_over_one_floor`` = 8 / gain: no implementation on this CPU can make a
  batch of 8 cost less than that many decisions, even with every row on one network;
* ``release_runner`` (``--release DIR``, a checkout of the reference release): the
  release's own ``MotionSkillRunner`` on the same weights and machine, run in a child
  process with the release's ``src`` on its path (its eight chunks, then ours, on every
  CPU); its chunks are compared with ours for the same torch seed.

Targets (flags, never asserted): a batch of 8 costs <= 3 x one decision (same threads);
one decision is no slower than the release's runner (when measured). The machine may be
shared: the report records the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from humanclaw_gym.fileio import json_default, write_json_atomic

CALLS = (
    "Walk<forward><normal>",
    "Turn<left><30>",
    "Side step<right><0.25>",
    "Step back<0.3>",
    "Sit down<0.45>",
    "Climb upstairs<normal>",
    "Walk downstairs<normal>",
    "Walk<forward><fast>",
)
# the release's planner conditions of CALLS, for its runner
RELEASE_CALLS = (
    ("walk_forward", [0.0, 0.4, 0.0]),
    ("turn", 30.0),
    ("side_walk", -0.25),
    ("step_back", [0.0, -0.3]),
    ("sit", 0.45),
    ("step_climb_up", [0.28, 0.30]),
    ("step_climb_down", [0.20, 0.40]),
    ("walk_forward", [0.0, 0.6, 0.0]),
)
_START = ([-3.2, 5.1, 0.0], 37.5)  # an episode's init_offset / init_yaw


def _ms(samples: list[float]) -> dict[str, float]:
    return {
        "median_ms": 1000.0 * statistics.median(samples),
        "min_ms": 1000.0 * min(samples),
        "n": len(samples),
    }


def _cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _param_memory(models) -> dict[str, float]:
    """Bytes of the distinct tensors held, against eight private bases."""
    seen: dict[int, int] = {}
    for module in (*models.bases.values(), *(s.branch for s in models.skills.values())):
        for tensor in (*module.parameters(), *module.buffers()):
            seen[tensor.data_ptr()] = tensor.numel() * tensor.element_size()
    base = next(iter(models.bases.values()))
    base_bytes = sum(t.numel() * t.element_size() for t in (*base.parameters(), *base.buffers()))
    held = sum(seen.values())
    return {
        "distinct_tensors_mib": held / 2**20,
        "base_variant_mib": base_bytes / 2**20,
        "base_variants_held": len(models.bases),
        "with_eight_base_copies_mib": (held + (8 - len(models.bases)) * base_bytes) / 2**20,
    }


def _parts(gen, call: str, repeats: int) -> dict:
    """One decision split into its parts (medians over ``repeats``)."""
    import torch

    from humanclaw_gym.motion.paper import generator as g
    from humanclaw_gym.skills import SkillCall

    out: dict[str, list[float]] = {
        "prepare": [],
        "integrate": [],
        "finish": [],
        "base_layers_60": [],
        "control_layers_60": [],
    }
    parsed = SkillCall.parse(call)
    for _ in range(repeats):
        t = time.perf_counter()
        req = gen._prepare(parsed)
        out["prepare"].append(time.perf_counter() - t)
        with torch.inference_mode():
            t = time.perf_counter()
            sample = g._integrate([req])
            out["integrate"].append(time.perf_counter() - t)
            t = time.perf_counter()
            gen._finish(req, sample[0])
            out["finish"].append(time.perf_counter() - t)
            models, skill = gen._models, req.skill
            btab = models.base_table(skill.variant, skill.nfe_steps)
            stab = models.skill_table(skill)
            x = torch.randn(1, 20, models.manifest.architecture.hidden_dim)
            t = time.perf_counter()
            for k in range(2 * skill.nfe_steps):
                for i, block in enumerate(skill.base.blocks):
                    block(x, btab.blocks[k][i])
            out["base_layers_60"].append(time.perf_counter() - t)
            t = time.perf_counter()
            for k in range(2 * skill.nfe_steps):
                for i, block in enumerate(skill.branch.ctrl_blocks):
                    skill.branch.zero_linears[i](block(x, stab.blocks[k][i]))
            out["control_layers_60"].append(time.perf_counter() - t)
        gen._set_rng_state(req.rng_state)
    return {k: _ms(v) for k, v in out.items()}


def bench_ours(root: Path, weights: Path | None, repeats: int, batch: int) -> dict:
    import torch

    from humanclaw_gym.motion.paper import BatchedMotionService, PaperMotion
    from humanclaw_gym.motion.paper.weights import clear_model_cache

    clear_model_cache()
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    t = time.perf_counter()
    gens = [PaperMotion(weights_dir=weights, release_dir=root) for _ in range(batch)]
    load_s = time.perf_counter() - t
    report: dict = {
        "load": {
            "seconds": load_s,
            "peak_rss_mib_before": rss0,
            "peak_rss_mib_after": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
            "generators_sharing_one_load": batch,
            **_param_memory(gens[0]._models),
        },
        "cpus": _cpus(),
    }
    for k, gen in enumerate(gens):
        gen.reset(np.array([0.2 * k, 0.0, 0.0]), 0.1 * k, seed=k)
    gens[0].generate(CALLS[0])  # solver tables of the first skill, warm caches
    service = BatchedMotionService()
    for threads in sorted({1, _cpus()}):
        torch.set_num_threads(threads)
        one, many = [], []
        for i in range(repeats + 1):
            t = time.perf_counter()
            gens[0].generate(CALLS[i % len(CALLS)])
            dt_one = time.perf_counter() - t
            pairs = [(gens[k], CALLS[(i + k) % len(CALLS)]) for k in range(batch)]
            t = time.perf_counter()
            service.generate_many(pairs)
            dt_many = time.perf_counter() - t
            if i > 0:  # the first round builds every skill's solver tables
                one.append(dt_one)
                many.append(dt_many)
        report[f"threads_{threads}"] = {
            "one_decision": _ms(one),
            f"batch_of_{batch}": _ms(many),
            f"batch_{batch}_over_one": statistics.median(many) / statistics.median(one),
            "parts": _parts(gens[0], CALLS[1], max(2, repeats // 2)),
        }
    torch.set_num_threads(_cpus())
    return report


_RELEASE_CHILD = r"""
import json, sys, time, numpy as np, torch
from humanclaw_bench.motion.runner import MotionSkillRunner
root, weights, out = sys.argv[1], sys.argv[2], sys.argv[3]
calls = json.loads(sys.argv[4]); start = json.loads(sys.argv[5]); threads = int(sys.argv[6])
torch.set_num_threads(threads)
t = time.perf_counter()
runner = MotionSkillRunner(device="cpu", weights_root=weights,
                           weights_manifest=f"{root}/resources/weights/paper_fullval_v1.json")
runner.reset("pt", None, f"{root}/resources/seeds/natural_beta0_fk_seed.pt", start[0], start[1])
load = time.perf_counter() - t
times, chunks = [], []
for i, (skill, cond) in enumerate(calls):
    torch.manual_seed(1000 + i)
    t = time.perf_counter()
    chunks.append(runner.generate(skill, cond).xb_world_75)
    times.append(time.perf_counter() - t)
np.savez(out, chunks=np.stack(chunks), times=np.array(times), load=load)
"""


def bench_release(root: Path, weights: Path, release: Path, threads: int) -> dict:
    """The release's runner against ours, same weights, seeds, threads; chunk by chunk."""
    import torch

    from humanclaw_gym.motion.paper import PaperMotion

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "release.npz"
        env = {**os.environ, "PYTHONPATH": str(release / "src")}
        cmd = [sys.executable, "-c", _RELEASE_CHILD, str(root), str(weights), str(out),
               json.dumps(RELEASE_CALLS), json.dumps(_START), str(threads)]  # fmt: skip
        done = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            return {"skipped": f"the release's runner failed: {done.stderr.strip()[-400:]}"}
        data = np.load(out)
        theirs, their_times, their_load = data["chunks"], data["times"], float(data["load"])
    torch.set_num_threads(threads)
    gen = PaperMotion(weights_dir=weights, release_dir=root)
    gen.reset_release(*_START)
    ours_times, diffs = [], []
    for i, call in enumerate(CALLS):
        torch.manual_seed(1000 + i)
        t = time.perf_counter()
        gen.generate(call)
        ours_times.append(time.perf_counter() - t)
        diffs.append(float(np.abs(gen.release_chunk - theirs[i]).max()))
    torch.set_num_threads(_cpus())
    # the first chunk of each builds tables / warms caches: compare the rest
    ours_ms = 1000.0 * float(statistics.median(ours_times[1:]))
    theirs_ms = 1000.0 * float(statistics.median(their_times[1:].tolist()))
    return {
        "threads": threads,
        "release_runner_per_chunk_ms": theirs_ms,
        "release_runner_load_s": their_load,
        "ours_per_chunk_ms": ours_ms,
        "ours_over_release": ours_ms / theirs_ms,
        "max_abs_chunk_difference": dict(zip(CALLS, diffs, strict=True)),
    }


def gemm_rows(*, batch: int = 8, tokens: int = 20, width: int = 512, mlp: int = 1024,
              repeats: int = 5) -> dict:  # fmt: skip
    """Per-row speed of the architecture's matrix products at one decision's rows and a batch's.

    Times ``(rows x k) @ (k x n)`` on one torch thread for each weight shape of a layer
    (best of ``repeats`` timings of a loop, so that another process's bursts count less),
    at ``tokens`` rows and ``batch * tokens`` rows.
    """
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        generator = torch.Generator().manual_seed(0)
        shapes = ((width, 3 * width), (width, width), (width, mlp), (mlp, width))
        seconds = {tokens: 0.0, batch * tokens: 0.0}
        per_shape = {}
        for k, n in shapes:
            weight = torch.randn(k, n, generator=generator)
            row = {}
            for rows in seconds:
                x = torch.randn(rows, k, generator=generator)
                loops = max(1, 4000 // rows)
                for _ in range(10):
                    x @ weight
                best = float("inf")
                for _ in range(repeats):
                    t = time.perf_counter()
                    for _ in range(loops):
                        x @ weight
                    best = min(best, (time.perf_counter() - t) / loops)
                seconds[rows] += best
                row[f"rows_{rows}_gflops"] = 2.0 * rows * k * n / best / 1e9
            per_shape[f"{k}x{n}"] = row
    finally:
        torch.set_num_threads(threads)
    gain = batch * seconds[tokens] / seconds[batch * tokens]
    return {
        "threads": 1,
        "rows_one_decision": tokens,
        "rows_batch": batch * tokens,
        "per_shape": per_shape,
        "per_row_gain_of_batch": gain,
        "batch_over_one_floor": batch / gain,
    }


def bench(
    *, weights: Path | None = None, release: Path | None = None, repeats: int = 5, batch: int = 8,
    tmp: Path | None = None,
) -> dict:  # fmt: skip
    """The ``paper_motion`` section of the performance report (see the module docstring)."""
    try:
        import torch  # noqa: F401
    except ImportError as exc:  # pragma: no cover - torch missing
        return {"skipped": str(exc)}
    from humanclaw_gym.motion.paper.synthetic import write_synthetic_release

    out: dict = {"load_average_start": list(os.getloadavg())}
    with tempfile.TemporaryDirectory(dir=tmp) as scratch:
        if weights is None:
            t = time.perf_counter()
            synthetic = write_synthetic_release(Path(scratch), seed=0)
            out["weights"] = "random weights of the release's architecture (written by the harness)"
            out["write_s"] = time.perf_counter() - t
            root, weights_dir = Path(scratch), synthetic.weights_dir
        else:
            if release is None:
                return {"skipped": "--weights needs --release (the manifest and seed state)"}
            out["weights"] = str(weights)
            root, weights_dir = release, weights
        out.update(bench_ours(root, weights_dir, repeats, batch))
        if release is not None:
            out["release_runner"] = bench_release(root, weights_dir, release, _cpus())
    out["gemm_rows"] = gemm_rows(batch=batch)
    out["load_average_end"] = list(os.getloadavg())
    same = out[f"threads_{_cpus()}"]
    targets = {f"batch{batch}_le_3x_one": same[f"batch_{batch}_over_one"] <= 3.0}
    if "ours_over_release" in out.get("release_runner", {}):
        targets["one_decision_le_release_runner"] = (
            out["release_runner"]["ours_over_release"] <= 1.0
        )
    out["targets"] = targets
    return out


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=Path("benchmarks/paper_motion_report.json"))
    parser.add_argument("--weights", type=Path, default=None, help="real weights (default: random)")
    parser.add_argument(
        "--release", type=Path, default=None, help="a release checkout: compare with its runner"
    )
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--tmp", type=Path, default=None, help="where the random weights go (1.1 GB)"
    )
    parser.add_argument(
        "--gemm-only",
        action="store_true",
        help="measure only the per-row speed of the matrix products (gemm_rows), seconds",
    )
    args = parser.parse_args()
    if args.gemm_only:
        try:
            import torch  # noqa: F401
        except ImportError as exc:
            print(f"torch is needed for --gemm-only: {exc}", file=sys.stderr)
            return 2
        section = {
            "load_average_start": list(os.getloadavg()),
            "gemm_rows": gemm_rows(),
            "load_average_end": list(os.getloadavg()),
        }
    report = {
        "schema": "humanclaw_paper_motion_benchmark_v1",
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"python": sys.version.split()[0], "cpus": _cpus()},
        "paper_motion": section
        if args.gemm_only
        else bench(weights=args.weights, release=args.release, repeats=args.repeats, tmp=args.tmp),
    }
    write_json_atomic(args.out, report, sort_keys=True, default=json_default)
    shown = report["paper_motion"].get("targets", report["paper_motion"])
    print(json.dumps(shown, indent=2, default=json_default))
    print(f"report written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
