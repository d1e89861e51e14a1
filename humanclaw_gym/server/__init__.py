"""The HumanClaw benchmark server: an authenticated, auditable interaction boundary.

A policy evaluated through the server sees only what the benchmark declares (the ego RGB
image, the instruction and a few public ids and counters) and can only send one
:class:`~humanclaw_gym.SkillCall` per step. The simulator, the hidden episode state and
the native scorer stay on the server; the scorer's result is returned by ``finish``.

Modules (all imported lazily; importing this package loads no simulator or renderer):

* :mod:`~humanclaw_gym.server.protocol`: protocol ids, error codes, observation/action specs;
* :mod:`~humanclaw_gym.server.plan`: the fixed, seeded episode plan and its claim ledger;
* :mod:`~humanclaw_gym.server.session`: one episode: reset, sequenced steps, counts, finish;
* :mod:`~humanclaw_gym.server.service`: JSON-RPC dispatch, one active episode, artifacts;
* :mod:`~humanclaw_gym.server.transport`: HTTP on loopback, bearer token, size limits;
* :mod:`~humanclaw_gym.server.artifacts`: frozen artifact lists and safe reads;
* :mod:`~humanclaw_gym.server.client`: the minimal trusted client and remote episodes.

Start it with ``humanclaw serve`` (see ``docs/server.md``).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "BENCHMARK_PROTOCOL": "humanclaw_gym.server.protocol",
    "ERROR_CODES": "humanclaw_gym.server.protocol",
    "WIRE_PROTOCOL": "humanclaw_gym.server.protocol",
    "RpcError": "humanclaw_gym.server.protocol",
    "EpisodePlan": "humanclaw_gym.server.plan",
    "BenchService": "humanclaw_gym.server.service",
    "TOKEN_ENV": "humanclaw_gym.server.transport",
    "make_server": "humanclaw_gym.server.transport",
    "ServerClient": "humanclaw_gym.server.client",
    "ServerError": "humanclaw_gym.server.client",
    "RemoteEpisode": "humanclaw_gym.server.client",
    "PrivilegedPolicyError": "humanclaw_gym.server.client",
    "run_remote_episode": "humanclaw_gym.server.client",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'humanclaw_gym.server' has no attribute {name!r}")
