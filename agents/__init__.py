"""humanclaw_agents: reference policies for the HumanClaw environments.

The PSV agent (planner, skill, verifier) drives the humanoid with a vision-language model
reached through a small transport layer:

* :class:`PSVAgent` - the :class:`~humanclaw_gym.policy.Policy` implementation behaving as
  the reference release's agent (``--agent psv``); :class:`PSVAgentV1` - our first agent,
  kept for reproducibility (``--agent psv:v1``);
* :mod:`humanclaw_agents.prompts` / :mod:`humanclaw_agents.verifier` - versioned prompts
  and verifier routes; :mod:`humanclaw_agents.actions` - reply fields to SkillCall;
  :mod:`humanclaw_agents.replies` - reading JSON out of real model replies;
* :mod:`humanclaw_agents.transports` - :class:`ChatModel`, the OpenAI-compatible (and
  Azure) transport and the filesystem queue (our layout and the reference's);
* :mod:`humanclaw_agents.model_config` - JSON model configs.

Importing this package is cheap: the ``openai`` client is imported only when an
OpenAI-compatible model is built.
"""

from __future__ import annotations

from humanclaw_agents.actions import action_from_fields, action_from_reply
from humanclaw_agents.model_config import (
    AzureOpenAIConfig,
    FilesystemQueueConfig,
    ModelConfig,
    ModelConfigError,
    OpenAICompatibleConfig,
    load_model_config,
    model_config_from_dict,
)
from humanclaw_agents.psv import PSV_VARIANTS, PSVAgent, PSVAgentV1, make_psv_agent
from humanclaw_agents.replies import ReplyJSON, read_reply_json
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
    "PSV_VARIANTS",
    "AzureOpenAIConfig",
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
    "PSVAgentV1",
    "ReplyJSON",
    "action_from_fields",
    "action_from_reply",
    "answer_pending_requests",
    "build_model",
    "load_model_config",
    "make_psv_agent",
    "model_config_from_dict",
    "read_reply_json",
]
