"""Which exceptions are a user's mistake, and how the ``humanclaw`` command reports them.

A user error (a bad file, flag, path, config, token or server) is printed as one line,
``humanclaw <command>: error: <what and what is allowed>``, with exit code 2; anything
else is a bug and keeps its traceback. ``humanclaw --debug <command>`` (or
``HUMANCLAW_DEBUG=1``) shows the traceback of a user error too.

The error classes are named here, not imported: a module that was never imported cannot
have raised its error, so the check looks only at modules already loaded and costs no
import (``humanclaw --help`` stays instant; ``humanclaw_agents`` is never imported from
``humanclaw_gym``).
"""

from __future__ import annotations

import sys

__all__ = ["USER_ERRORS", "is_user_error", "one_line"]

USER_ERRORS: tuple[str, ...] = (
    "humanclaw_gym.fileio:FileContentError",
    "humanclaw_gym.episodes.schema:EpisodeFormatError",
    "humanclaw_gym.episodes.io:SceneNotInstalledError",
    "humanclaw_gym.scenes.spec:SceneSpecError",
    "humanclaw_gym.scenes.hssd.configs:SceneDatasetError",
    "humanclaw_gym.scenes.meshes:MeshAssetError",
    "humanclaw_gym.skills.errors:SkillCallError",
    "humanclaw_gym.backends.registry:BackendCapabilityError",
    "humanclaw_gym.evaluation.policies:PolicySpecError",
    "humanclaw_gym.tasks:UnknownTaskError",
    "humanclaw_gym.evaluation.fingerprint:RunFingerprintError",
    "humanclaw_gym.evaluation.batch:OutputInUseError",
    "humanclaw_gym.evaluation.batch:PolicyPreflightError",
    "humanclaw_gym.metrics.episode:MetricsFileError",
    "humanclaw_gym.replay.bundle:ReplayBundleError",
    "humanclaw_gym.data.schema:DatasetError",
    "humanclaw_gym.motion.flow.checkpoint:CheckpointError",
    "humanclaw_gym.motion.paper.manifest:PaperWeightsError",
    "humanclaw_gym.profiles:ProfileError",
    "humanclaw_gym.body.asset:BodyAssetError",
    "humanclaw_gym.body.smplx_model:BodyModelError",
    "humanclaw_gym.server.transport:TokenError",
    "humanclaw_gym.server.client:ServerError",
    "humanclaw_gym.server.client:ServerAddressError",
    "humanclaw_gym.server.client:ServerConnectionError",
    "humanclaw_gym.server.client:PrivilegedPolicyError",
    "humanclaw_gym.viewer.debug_viewer:ViewerUnavailableError",
    "humanclaw_agents.model_config:ModelConfigError",
    "humanclaw_agents.transports:MissingAPIKeyError",
    "humanclaw_agents.bc_policy:CheckpointError",
)
"""``module:Class`` of every error that means "the input is wrong", not "the code is"."""

# Paths that do not exist or cannot be used as asked (a file where a directory belongs).
_OS_USER_ERRORS = (
    FileNotFoundError,
    FileExistsError,
    NotADirectoryError,
    IsADirectoryError,
    PermissionError,
)
_MAX_CHARS = 2000


def is_user_error(exc: BaseException) -> bool:
    """Whether ``exc`` reports a user's mistake (see :data:`USER_ERRORS`)."""
    if isinstance(exc, _OS_USER_ERRORS):
        return True
    for target in USER_ERRORS:
        module_name, _, name = target.partition(":")
        module = sys.modules.get(module_name)
        cls = getattr(module, name, None) if module is not None else None
        if isinstance(cls, type) and isinstance(exc, cls):
            return True
    return False


def one_line(exc: BaseException) -> str:
    """The message of ``exc`` on one line (whitespace runs collapsed), at most a couple of
    thousand characters. A ``KeyError``'s message loses the quotes ``str`` adds."""
    text = exc.args[0] if isinstance(exc, KeyError) and len(exc.args) == 1 else str(exc)
    text = " ".join(str(text).split()) or type(exc).__name__
    if len(text) > _MAX_CHARS:
        text = text[: _MAX_CHARS - 3] + "..."
    return text
