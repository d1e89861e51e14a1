"""humanclaw_agents: reference policies for the HumanClaw environments.

The PSV agent (planner, skill, verifier) drives the humanoid with a vision-language model
reached through a small transport layer:

* :class:`PSVAgent` - the :class:`~humanclaw_gym.policy.Policy` implementation;
* :mod:`humanclaw_agents.prompts` / :mod:`humanclaw_agents.verifier` - versioned prompts
  and verifier routes;
* :mod:`humanclaw_agents.transports` - :class:`ChatModel`, the OpenAI-compatible
  transport and the filesystem queue;
* :mod:`humanclaw_agents.model_config` - JSON model configs.

Importing this package is cheap: the ``openai`` client is imported only when an
OpenAI-compatible model is built.
"""

from __future__ import annotations

from humanclaw_agents.model_config import (
    FilesystemQueueConfig,
    ModelConfig,
    ModelConfigError,
    OpenAICompatibleConfig,
    load_model_config,
    model_config_from_dict,
)
from humanclaw_agents.psv import PSVAgent, action_from_fields
from humanclaw_agents.transports import (
    ChatModel,
    FilesystemQueueModel,
    MissingAPIKeyError,
    ModelCallError,
    ModelReply,
    ModelTimeoutError,
    OpenAICompatibleModel,
    answer_pending_requests,
    build_model,
)

__all__ = [
    "ChatModel",
    "FilesystemQueueConfig",
    "FilesystemQueueModel",
    "MissingAPIKeyError",
    "ModelCallError",
    "ModelConfig",
    "ModelConfigError",
    "ModelReply",
    "ModelTimeoutError",
    "OpenAICompatibleConfig",
    "OpenAICompatibleModel",
    "PSVAgent",
    "action_from_fields",
    "answer_pending_requests",
    "build_model",
    "load_model_config",
    "model_config_from_dict",
]
