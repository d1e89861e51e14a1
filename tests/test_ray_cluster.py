"""A real two-node Ray cluster without a shared disk.

``ray start --head`` runs as usual; the second node is started with ``ray start --address``
inside its own mount namespace (``unshare --mount``) in which an empty tmpfs covers this
test's whole directory: that node sees neither the driver's ``--output`` nor the model
config file, as on a cluster without NFS. Episodes are placed on it with a custom resource
only it offers. Every artifact (replay bundle, metrics, VLM step records, final image,
videos, node record) must reach the driver equal to a local run's, byte for byte, except
the wall-clock fields named in ``tests/test_ray_executor.py``.

A second run places episodes on both nodes while the head node's numpy runs without its
highest SIMD target (``NPY_DISABLE_CPU_FEATURES``): the driver must say that the run mixed
CPU records. The Ray processes run on their own ports and temporary directory and are
stopped through the PIDs this test started (never ``ray stop``, which would stop every Ray
instance on the machine).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from humanclaw_gym.provenance import cpu_record

pytest.importorskip("ray")
pytest.importorskip("openai")

from chat_server import ChatServer, prompt_text  # noqa: E402
from test_ray_executor import assert_same_episode_folders  # noqa: E402

from humanclaw_agents.transports import PREFLIGHT_PROMPT  # noqa: E402

pytestmark = pytest.mark.slow

_RAY = Path(sys.executable).with_name("ray")
_KEY_ENV = "HUMANCLAW_LOOPBACK_KEY"
_EPISODES = 3
_STEPS = 3


def _namespaces_available() -> bool:
    if not _RAY.is_file() or shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "true"], capture_output=True
    )
    return probe.returncode == 0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _node_ports() -> list[str]:
    """Every port of a node chosen free (no clash with other Ray instances here)."""
    args = []
    for flag in (
        "--node-manager-port",
        "--object-manager-port",
        "--dashboard-agent-listen-port",
        "--dashboard-agent-grpc-port",
        "--metrics-export-port",
        "--runtime-env-agent-port",
    ):
        args += [flag, str(_free_port())]
    return args + ["--min-worker-port", "0", "--max-worker-port", "0"]


class TwoNodeCluster:
    """A head node, and a second node that sees an empty tmpfs over ``hidden``."""

    def __init__(self, hidden: Path, env: dict[str, str], head_env: dict[str, str]) -> None:
        self.hidden = hidden
        self.env = env
        self.head_env = head_env
        self.temp = Path(tempfile.mkdtemp(prefix="hc-ray-", dir="/tmp"))  # short socket paths
        self.port = _free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.procs: list[subprocess.Popen] = []

    def __enter__(self) -> TwoNodeCluster:
        try:
            self._start()
        except BaseException:
            self.__exit__()
            raise
        return self

    def _start(self) -> None:
        common = ["--block", "--disable-usage-stats", "--object-store-memory", str(200 * 2**20)]
        head = [str(_RAY), "start", "--head", "--port", str(self.port), "--node-ip-address"]
        head += ["127.0.0.1", "--num-cpus", "2", "--resources", '{"hc_slot": 1}']
        head += ["--include-dashboard", "false", "--temp-dir", str(self.temp), *common]
        self._spawn(head + _node_ports(), "head", self.head_env)
        self._wait_for_log("head", "Ray runtime started")
        node = [str(_RAY), "start", "--address", self.address, "--node-ip-address", "127.0.0.1"]
        node += ["--num-cpus", "2", "--resources", '{"hc_slot": 1, "hc_remote": 2}', *common]
        script = f"mount -t tmpfs humanclaw-test {self.hidden} && exec " + " ".join(
            f"'{a}'" for a in node + _node_ports()
        )
        shell = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script]
        self._spawn(shell, "node", self.env)
        self._wait_for_log("node", "Ray runtime started")

    def _spawn(self, argv: list[str], name: str, env: dict[str, str]) -> None:
        log = open(self.temp / f"{name}.log", "wb")  # noqa: SIM115 - kept open by the child
        self.procs.append(
            subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        )
        log.close()

    def _wait_for_log(self, name: str, text: str, timeout: float = 180.0) -> None:
        deadline = time.monotonic() + timeout
        log = self.temp / f"{name}.log"
        while text not in log.read_text(errors="replace"):
            assert self.procs[-1].poll() is None, log.read_text(errors="replace")[-3000:]
            assert time.monotonic() < deadline, f"{name} did not start: {log.read_text()[-3000:]}"
            time.sleep(0.5)

    def __exit__(self, *exc: Any) -> None:
        for proc in reversed(self.procs):  # the second node first, the head last
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)  # `ray start --block` stops its own processes
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)  # the group this test started
                proc.wait(timeout=30)
        shutil.rmtree(self.temp, ignore_errors=True)


def _processes_mentioning(text: str) -> list[int]:
    """PIDs whose command line contains ``text`` (Ray's processes name their session dir)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (
                    (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                )
            except OSError:
                continue
            if text in cmdline:
                pids.append(int(entry.name))
    return pids


def _reply(body: dict[str, Any]) -> str:
    if "You check one proposed action" in prompt_text(body):
        answer = {"verdict": "accept", "reason": "clear", "final_action_id": 0}
    else:
        answer = {
            "visible_state": "A hallway.",
            "mid_level_progress_analysis": "Nothing found yet.",
            "mid_level_goal": "walk down the hallway",
            "low_level_action_reasoning": "The floor ahead is free.",
            "action_id": 0,
            "action_name": "Walk<forward><slow>",
            "additional_info": {},
        }
    return json.dumps(answer)


def _humanclaw_run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "humanclaw_gym", "run", "--quiet", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


@pytest.mark.skipif(not _namespaces_available(), reason="needs root for unshare --mount")
def test_two_nodes_without_a_shared_disk_deliver_every_artifact(tmp_path):
    simd = cpu_record()["numpy_simd"] or []
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env.update(
        {
            _KEY_ENV: "loopback-key",
            "NO_PROXY": "127.0.0.1,localhost",
            "RAY_USAGE_STATS_ENABLED": "0",
        }
    )
    env.pop("NPY_DISABLE_CPU_FEATURES", None)
    # Ray's token authentication, with a token of this cluster's own: the same for the
    # nodes and the driver, whatever ~/.ray holds (a local ray.init may have left one there)
    env.update({"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": uuid.uuid4().hex})
    head_env = dict(env)
    if simd:  # the head's workers compute with one SIMD target fewer: another CPU record
        head_env["NPY_DISABLE_CPU_FEATURES"] = simd[-1]

    with ChatServer(_reply) as server:
        model = tmp_path / "model.json"
        model.write_text(
            json.dumps(
                {
                    "backend": "openai_compatible",
                    "model": "loopback-vlm",
                    "base_url": server.url + "/v1",
                    "api_key_env": _KEY_ENV,
                    "max_tokens": 256,
                    "temperature": 0.0,
                    "timeout_s": 30,
                }
            )
        )
        common = ["--episodes", "val100", "--limit", str(_EPISODES), "--agent", "psv"]
        common += ["--model-config", str(model), "--max-steps", str(_STEPS), "--metrics", "--video"]
        local = _humanclaw_run(env, *common, "--output", str(tmp_path / "local"))
        assert local.returncode == 0, local.stderr

        with TwoNodeCluster(tmp_path, env, head_env) as cluster:
            node_mounts = Path(f"/proc/{cluster.procs[1].pid}/mountinfo").read_text()
            assert f" {tmp_path} " in node_mounts and "humanclaw-test" in node_mounts
            assert f" {tmp_path} " not in Path("/proc/self/mountinfo").read_text()
            assert len(_processes_mentioning(str(cluster.temp))) >= 4  # raylets, GCS, ...
            ray_args = ["--executor", "ray", "--ray-address", cluster.address]
            remote = _humanclaw_run(
                env,
                *common,
                *ray_args,
                "--ray-task-resources",
                "hc_remote=1",
                "--workers",
                "2",
                "--output",
                str(tmp_path / "ray"),
            )
            assert remote.returncode == 0, remote.stdout + remote.stderr
            assert f"completed {_EPISODES}, skipped 0, failed 0" in remote.stdout
            assert "warning" not in remote.stderr  # every episode ran on the second node

            # both nodes, and the head's numpy without its highest SIMD target
            mixed = _humanclaw_run(
                env,
                "--episodes",
                "val100",
                "--limit",
                "4",
                "--agent",
                "random",
                "--max-steps",
                "1",
                "--metrics",
                *ray_args,
                "--ray-task-resources",
                "hc_slot=1",
                "--workers",
                "2",
                "--output",
                str(tmp_path / "mixed"),
            )
        # local and remote runs: a planner and a verifier request per step, and each run's
        # one preflight request before its first episode (made by the driver)
        preflight = [r for r in server.requests if PREFLIGHT_PROMPT in prompt_text(r["body"])]
        assert len(preflight) == 2
        assert len(server.requests) - len(preflight) == 2 * 2 * _EPISODES * _STEPS
    assert not _processes_mentioning(str(cluster.temp))  # every Ray process has stopped

    assert mixed.returncode == 0, mixed.stdout + mixed.stderr
    # the no-shared-disk run: every artifact at the driver, as a local run's
    compared = assert_same_episode_folders(tmp_path / "local", tmp_path / "ray")
    per_episode = 9 + 2 * _STEPS  # 9 files plus a planner and a verifier record per step
    assert compared == _EPISODES * per_episode
    names = {p.name for p in (tmp_path / "ray").glob("*/rollout_00/*")}
    assert {"ego.mp4", "exo.mp4", "final_ego.png", "metrics.json", "node.json"} <= names
    assert {"step000_percept_mid_low.json", "step000_verifier.json"} <= names
    assert not list((tmp_path / "ray").rglob("*.incoming"))

    if simd:
        warning = [line for line in mixed.stderr.splitlines() if "warning" in line]
        assert len(warning) == 1 and "2 different CPU records" in warning[0], mixed.stderr
        summary = json.loads((tmp_path / "mixed" / "metrics_summary.json").read_text())
        assert summary["environment"]["mixed_cpus"] is True
        seen = [g["cpu"]["numpy_simd"] for g in summary["environment"]["episode_cpus"]]
        assert sorted(seen, key=len) == [simd[:-1], simd]
