"""Wire-level definitions of the benchmark server: protocol ids, error codes, specs.

Two identities are versioned separately (they describe different things and need not be
bumped together):

* :data:`WIRE_PROTOCOL`: the transport: JSON-RPC 2.0 over HTTP on loopback, bearer
  token, one-shot episode sessions, sequence numbers, artifact transfer;
* :data:`BENCHMARK_PROTOCOL`: what a policy may see and do in this benchmark: the ego RGB
  image and a few declared text fields in, one :class:`~humanclaw_gym.SkillCall` per step
  out, 15 generated frames x 4 physics substeps per action, the native scorer at the end.

Adding an observation field, changing an action's meaning or the control timing needs a
new :data:`BENCHMARK_PROTOCOL` id; deployment parameters (port, renderer, output
directory) do not.

This module imports nothing heavy (no numpy-backed simulator, no renderer).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from humanclaw_gym.image_sizes import EGO_SIZE_PX
from humanclaw_gym.skills import NUM_SKILLS, Skill, describe_skills

__all__ = [
    "BENCHMARK_PROTOCOL",
    "ERROR_CODES",
    "FRAMES_PER_ACTION",
    "IMAGE_SIZE_PX",
    "MAX_REQUEST_BYTES",
    "OBSERVATION_FIELDS",
    "PHYSICS_TICKS_PER_ACTION",
    "SUBSTEPS_PER_FRAME",
    "WIRE_PROTOCOL",
    "RpcError",
    "action_spec",
    "benchmark_protocol",
    "jsonable",
    "observation_spec",
]

WIRE_PROTOCOL = "humanclaw.sim-server/v1"
"""Transport identity: JSON-RPC 2.0 over HTTP POST ``/rpc``, bearer token, sessions."""

BENCHMARK_PROTOCOL = f"humanclaw.find-nav-interact/ego-rgb448-skillcall{NUM_SKILLS}/v1"
"""Robot-capability identity: ego RGB 448x448 + declared text fields; one SkillCall (of the
built-in skill table) per step. :func:`benchmark_protocol` gives the id in force."""

JSONRPC_VERSION = "2.0"

IMAGE_SIZE_PX = EGO_SIZE_PX
FRAMES_PER_ACTION = 15
SUBSTEPS_PER_FRAME = 4
PHYSICS_TICKS_PER_ACTION = FRAMES_PER_ACTION * SUBSTEPS_PER_FRAME
FRAME_RATE_HZ = 30
PHYSICS_RATE_HZ = FRAME_RATE_HZ * SUBSTEPS_PER_FRAME

MAX_REQUEST_BYTES = 1 << 20
"""Largest accepted request body (1 MiB)."""

MAX_ACTION_TEXT_CHARS = 256
MAX_VISIBLE_STATE_CHARS = 16384
MAX_USAGE_RECORDS = 64
MAX_ARTIFACT_PATH_CHARS = 512

OBSERVATION_FIELDS: tuple[str, ...] = (
    "instruction",
    "step",
    "max_steps",
    "episode_id",
    "scene_id",
    "target_category",
)
"""The public text fields of an observation besides the image (a whitelist)."""

# --------------------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------------------

ERROR_CODES: dict[str, int] = {
    # JSON-RPC 2.0 standard codes
    "parse_error": -32700,
    "invalid_request": -32600,
    "method_not_found": -32601,
    "invalid_params": -32602,
    "internal_error": -32603,
    # application codes
    "unauthorized": -32001,
    "request_timeout": -32002,
    "server_busy": -32003,
    "no_active_episode": -32010,
    "episode_active": -32011,
    "plan_exhausted": -32012,
    "plan_mismatch": -32013,
    "privileged_refused": -32014,
    "sequence_error": -32020,
    "invalid_action": -32021,
    "episode_over": -32022,
    "execution_error": -32023,
    "artifact_refused": -32030,
    "artifact_not_found": -32031,
}
"""Every error the server returns, by name; ``error.data.error`` carries the name."""

_MAX_MESSAGE_CHARS = 600


class RpcError(Exception):
    """An error answered to the client as a JSON-RPC error object.

    Args:
        name: a key of :data:`ERROR_CODES`; becomes ``error.data.error``.
        message: human-readable text for the client. It must never contain tracebacks,
            server file paths or secrets; it is cut to a bounded length.
        data: extra JSON-ready fields for ``error.data``.
    """

    def __init__(self, name: str, message: str, **data: Any) -> None:
        if name not in ERROR_CODES:
            raise ValueError(f"unknown error name {name!r}; allowed {sorted(ERROR_CODES)}")
        if len(message) > _MAX_MESSAGE_CHARS:
            message = message[: _MAX_MESSAGE_CHARS - 3] + "..."
        super().__init__(message)
        self.name = name
        self.code = ERROR_CODES[name]
        self.message = message
        self.data = {"error": name, **data}

    def to_dict(self) -> dict[str, Any]:
        """The JSON-RPC ``error`` member."""
        return {"code": self.code, "message": self.message, "data": jsonable(self.data)}


def jsonable(value: Any) -> Any:
    """A JSON-ready copy of ``value``: numpy scalars/arrays become Python values, tuples
    become lists and non-finite floats become ``None`` (JSON has no NaN)."""
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, (str, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    tolist = getattr(value, "tolist", None)
    if callable(tolist):  # numpy scalar or array
        return jsonable(tolist())
    return str(value)


# --------------------------------------------------------------------------------------
# specs for describe
# --------------------------------------------------------------------------------------


def benchmark_protocol() -> str:
    """The :data:`BENCHMARK_PROTOCOL` id in force: the constant while the skill table holds
    the built-in skills only; with skills registered on top (an action contract of its
    own), the id names them, e.g. ``...-skillcall8+wave/v1``."""
    added = [s.spec.key for s in Skill if int(s) >= NUM_SKILLS]
    if not added:
        return BENCHMARK_PROTOCOL
    head, _, version = BENCHMARK_PROTOCOL.rpartition("/")
    return f"{head}+{'+'.join(added)}/{version}"


def action_spec() -> dict[str, Any]:
    """The action contract: one SkillCall per ``step``, as text or JSON form.

    Returns:
        A JSON-ready dict with the text grammar and the JSON schema of every skill.
    """
    skills = describe_skills()
    return {
        "one_action_per_step": True,
        "forms": {
            "text": "a string Name<param>...<param>, e.g. 'Turn<left><30>'; names and words "
            "are case-insensitive, numbers are plain decimals",
            "json": "an object {'skill': key, <param>: value, ...} with exactly the "
            "parameters of that skill, e.g. {'skill': 'turn', 'direction': 'left', "
            "'angle_deg': 30}",
        },
        "validation": "values outside a range are rejected (error invalid_action, "
        "executed=false), never clipped; a rejected action consumes no sequence number",
        "skills": skills,
        "frames_per_action": FRAMES_PER_ACTION,
        "action_duration_s": FRAMES_PER_ACTION / FRAME_RATE_HZ,
    }


def observation_spec() -> dict[str, Any]:
    """The observation contract: the ego RGB image and a whitelist of text fields."""
    return {
        "image": {
            "key": "image_png_b64",
            "encoding": "png, base64 (standard alphabet, padded)",
            "width_px": IMAGE_SIZE_PX,
            "height_px": IMAGE_SIZE_PX,
            "channels": "RGB",
            "dtype": "uint8",
            "row_order": "row 0 is the top of the image",
            "source": "rendered head-mounted (ego) camera of the realized, post-physics pose",
            "kind": "rendered measurement of the simulated world, not a command echo",
            "timing": "after reset: the standing start; after a step: after the last physics "
            "frame of that action (for Stop/Stand, unchanged)",
        },
        "fields": {
            "instruction": {"type": "string", "meaning": "the task text"},
            "step": {"type": "integer", "meaning": "decision steps executed so far"},
            "max_steps": {"type": "integer", "meaning": "step limit of this episode"},
            "episode_id": {"type": "string", "meaning": "public episode id"},
            "scene_id": {"type": "string", "meaning": "public scene id"},
            "target_category": {"type": "string", "meaning": "object category to find"},
        },
        "never_included": [
            "target positions or instances",
            "distances",
            "rewards",
            "success or any scorer value (returned by finish only)",
            "robot pose or joint state (RGB-only protocol)",
        ],
        "robot_state": "none: this protocol is RGB-only by design; the policy gets no "
        "proprioception. 'executed_skill' in a step result echoes the last accepted "
        "command, it is not a measurement",
    }
