"""The release's motion networks, rebuilt for inference (torch).

The parameter and buffer names are the checkpoints' interface, so the modules here produce
exactly the release's ``state_dict`` keys:

* :class:`MotionDiT` (the base): ``t_embedder`` (a sinusoid table ``pe`` read at the flow
  time, interpolated, then an MLP), ``pos_enc.pe``, ``in_fc``, ``blocks.<i>``
  (:class:`DiTBlock`: adaLN-Zero modulation from the time embedding, attention, MLP) and
  ``final_layer``.
* :class:`ControlBranch`: one skill's ControlNet-style branch over a shared base:
  ``ctrl_blocks.<i>`` (a DiT block per base block), ``zero_linears.<i>``, and the skill's
  condition encoder under the release's attribute name (``cond_encoder``, ``xz_encoder``,
  ``x_encoder``, ``yaw_encoder``, ``hd_encoder``, ``h_encoder`` or the ``cond_token``
  parameter). Attached to its base it holds that base as ``base_dit``, as the release's
  skill models do.

One velocity evaluation of a skill, on the 20 tokens of history + noisy future::

    tokens = pos_enc(in_fc(x))
    for each layer i:
        tokens = base.blocks[i](tokens) + zero_linears[i](ctrl_blocks[i](tokens + cond))
    velocity = final_layer(tokens)[:, 5:]

with every block modulated by the embedding of the flow time only. That modulation depends
on nothing but the time, so :class:`ModulationTable` computes it once per solver time and
block (exactly as a forward pass would, one row at a time) and the forward passes read it
from there. The arithmetic of every operation follows the release's order, so that on the
same device and thread count a chunk reproduces the release's to the float rounding of
identical operations.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from humanclaw_gym.motion.paper.manifest import BRANCHES, Architecture

__all__ = [
    "ControlBranch",
    "DiTBlock",
    "ModulationTable",
    "MotionDiT",
    "condition_tensor",
    "new_base",
    "new_branch",
    "solver_times",
]

_TIME_TABLE_ROWS = 1000  # the base's n_time_embeddings
_POSITION_ROWS = 5000
_LN_EPS = 1e-6


def _sinusoid_table(rows: int, width: int) -> torch.Tensor:
    position = torch.arange(0, rows, dtype=torch.float).unsqueeze(1)
    rate = torch.exp(torch.arange(0, width, 2).float() * (-math.log(10000.0) / width))
    table = torch.zeros(rows, width)
    table[:, 0::2] = torch.sin(position * rate)
    table[:, 1::2] = torch.cos(position * rate)
    return table


def _modulate(x: torch.Tensor, shift: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return x * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1)


class _TimeEmbedder(nn.Module):
    """Flow time in [0, 1] -> hidden vector: the sinusoid table read at ``t * (rows - 1)``
    (linear interpolation between neighbouring rows), then ``Linear-SiLU-Linear``."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.register_buffer("pe", _sinusoid_table(_TIME_TABLE_ROWS, width))
        self.mlp = nn.Sequential(nn.Linear(width, width), nn.SiLU(), nn.Linear(width, width))

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        last = self.pe.shape[0] - 1
        scaled = t.float() * last
        lo = torch.floor(scaled).long().clamp(0, last)
        hi = torch.ceil(scaled).long().clamp(0, last)
        w_hi = (scaled - lo.float()).unsqueeze(-1)
        return self.mlp((1.0 - w_hi) * self.pe[lo] + w_hi * self.pe[hi])


class _PositionTable(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.register_buffer("pe", _sinusoid_table(_POSITION_ROWS, width).unsqueeze(0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.pe[:, : x.size(1), : x.size(2)]


class _Attention(nn.Module):
    """Multi-head self-attention (``qkv``, ``proj``; with ``q_norm`` / ``k_norm`` when the
    architecture asks for QK normalisation)."""

    def __init__(self, width: int, heads: int, qk_norm: bool) -> None:
        super().__init__()
        self.heads = heads
        self.head_dim = width // heads
        self.scale = self.head_dim**-0.5
        self.qkv = nn.Linear(width, 3 * width, bias=True)
        self.qk_norm = qk_norm
        if qk_norm:
            self.q_norm = nn.LayerNorm(self.head_dim)
            self.k_norm = nn.LayerNorm(self.head_dim)
        self.proj = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, c = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        if self.qk_norm:
            weights = (self.q_norm(q) * self.scale @ self.k_norm(k).transpose(-2, -1)).softmax(
                dim=-1
            )
        else:
            weights = ((q * self.scale) @ k.transpose(-2, -1)).softmax(dim=-1)
        return self.proj((weights @ v).transpose(1, 2).reshape(b, n, c))


class DiTBlock(nn.Module):
    """adaLN-Zero transformer block: ``x + gate * attn(mod(norm(x)))``, then the same with
    the MLP; shifts, scales and gates come from :meth:`modulation` of the time embedding."""

    def __init__(self, width: int, heads: int, mlp_ratio: float, qk_norm: bool) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(width, elementwise_affine=False, eps=_LN_EPS)
        self.norm2 = nn.LayerNorm(width, elementwise_affine=False, eps=_LN_EPS)
        self.attn = _Attention(width, heads, qk_norm)
        hidden = int(width * mlp_ratio)
        self.mlp = nn.Sequential(
            nn.Linear(width, hidden), nn.GELU(approximate="tanh"), nn.Linear(hidden, width)
        )
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(width, 6 * width, bias=True))

    def modulation(self, c: torch.Tensor) -> torch.Tensor:
        """``(rows, 6 * width)`` modulation of a time embedding ``c``."""
        return self.adaLN_modulation(c)

    def forward(self, x: torch.Tensor, modulation: torch.Tensor) -> torch.Tensor:
        shift_a, scale_a, gate_a, shift_m, scale_m, gate_m = modulation.chunk(6, dim=1)
        x = x + gate_a.unsqueeze(1) * self.attn(_modulate(self.norm1(x), shift_a, scale_a))
        return x + gate_m.unsqueeze(1) * self.mlp(_modulate(self.norm2(x), shift_m, scale_m))


class _FinalLayer(nn.Module):
    def __init__(self, width: int, out_dim: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width, elementwise_affine=False, eps=_LN_EPS)
        self.linear = nn.Linear(width, out_dim, bias=True)
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(width, 2 * width, bias=True))

    def modulation(self, c: torch.Tensor) -> torch.Tensor:
        return self.adaLN_modulation(c)

    def forward(self, x: torch.Tensor, modulation: torch.Tensor) -> torch.Tensor:
        shift, scale = modulation.chunk(2, dim=1)
        return self.linear(_modulate(self.norm(x), shift, scale))


class MotionDiT(nn.Module):
    """The base denoiser shared by every skill (see the module docstring)."""

    def __init__(self, arch: Architecture) -> None:
        super().__init__()
        width = arch.hidden_dim
        self.t_embedder = _TimeEmbedder(width)
        self.pos_enc = _PositionTable(width)
        self.in_fc = nn.Linear(arch.x_dim, width)
        self.blocks = nn.ModuleList(
            DiTBlock(width, arch.num_heads, arch.mlp_ratio, arch.use_qk_norm)
            for _ in range(arch.num_layers)
        )
        self.final_layer = _FinalLayer(width, arch.x_dim)

    def tokens(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, frames, x_dim)`` states -> ``(B, frames, width)`` input tokens."""
        return self.pos_enc(self.in_fc(x))


def new_base(arch: Architecture) -> MotionDiT:
    """An untrained base (for loading; nothing is initialised twice on the meta device)."""
    return MotionDiT(arch)


# ----------------------------------------------------------------------------------------
# condition encoders
# ----------------------------------------------------------------------------------------
def _soft_saturate(xz: torch.Tensor) -> torch.Tensor:
    """``2 (1 - exp(-|v|)) v / |v|``: a displacement squashed to norm < 2, direction kept."""
    norm = xz.norm(dim=-1, keepdim=True).clamp(min=1e-8)
    return 2.0 * (1.0 - torch.exp(-norm)) * xz / norm


def _octaves(n_freqs: int) -> torch.Tensor:
    return torch.tensor([2.0**i for i in range(n_freqs)], dtype=torch.float32) * math.pi


def _fourier(values: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    scaled = values.unsqueeze(-1) * freqs
    return torch.cat([torch.sin(scaled), torch.cos(scaled)], dim=-1).flatten(1)


class _FourierXZ(nn.Module):
    """Planar target ``(x, z)`` m: squashed vector, heading ``atan2(x, z) / pi``, speed
    ``|xz| / 0.5`` and sin/cos octaves of x and z; with ``yaw`` also ``yaw_deg / 90`` and
    its octaves. Then ``Linear`` + ``LayerNorm``."""

    def __init__(self, width: int, n_freqs: int, yaw: bool) -> None:
        super().__init__()
        self.yaw = yaw
        self.register_buffer("freqs", _octaves(n_freqs))
        in_dim = 4 + 4 * n_freqs + (1 + 2 * n_freqs if yaw else 0)
        self.linear = nn.Linear(in_dim, width)
        self.ln = nn.LayerNorm(width)

    def forward(self, target: torch.Tensor) -> torch.Tensor:
        xz = target[:, 0:2]
        heading = torch.atan2(xz[:, 0:1], xz[:, 1:2]) / math.pi
        speed = torch.linalg.norm(xz, dim=1, keepdim=True) / 0.5
        parts = [_soft_saturate(xz), heading, speed]
        if self.yaw:
            yaw_unit = target[:, 2:3] / 90.0
            parts += [yaw_unit, _fourier(xz, self.freqs), _fourier(yaw_unit, self.freqs)]
        else:
            parts.append(_fourier(xz, self.freqs))
        return self.ln(self.linear(torch.cat(parts, dim=1)))


class _FourierX(nn.Module):
    """Lateral target x (m): ``x / 0.5`` and sin/cos octaves of x, then Linear + LayerNorm."""

    def __init__(self, width: int, n_freqs: int) -> None:
        super().__init__()
        self.register_buffer("freqs", _octaves(n_freqs))
        self.linear = nn.Linear(1 + 2 * n_freqs, width)
        self.ln = nn.LayerNorm(width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(self.linear(torch.cat([x / 0.5, _fourier(x, self.freqs)], dim=1)))


def _mlp(in_dim: int, width: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(in_dim, width), nn.SiLU(), nn.Linear(width, width))


# encoder name -> (attribute name in the release's checkpoints, condition width)
_ENCODERS: dict[str, tuple[str, int]] = {
    "fourier_xzyaw": ("cond_encoder", 3),
    "fourier_xz": ("xz_encoder", 2),
    "fourier_x": ("x_encoder", 1),
    "mlp_yaw": ("yaw_encoder", 1),
    "mlp_climb": ("hd_encoder", 2),
    "mlp_sit": ("h_encoder", 1),
    "token": ("cond_token", 0),
}


class ControlBranch(nn.Module):
    """One skill's control branch (see the module docstring).

    Args:
        arch: the base architecture (the branch mirrors its blocks).
        encoder: one of ``fourier_xzyaw``, ``fourier_xz``, ``fourier_x``, ``mlp_yaw``,
            ``mlp_climb``, ``mlp_sit``, ``token``.
        n_freqs: octaves of the Fourier encoders.
    """

    def __init__(self, arch: Architecture, encoder: str, n_freqs: int | None = None) -> None:
        super().__init__()
        width = arch.hidden_dim
        self.encoder = encoder
        self.attribute, self.cond_width = _ENCODERS[encoder]
        if encoder == "token":
            self.cond_token = nn.Parameter(torch.zeros(width))
        elif encoder.startswith("fourier_xz"):
            setattr(
                self,
                self.attribute,
                _FourierXZ(width, int(n_freqs or 0), encoder == "fourier_xzyaw"),
            )
        elif encoder == "fourier_x":
            self.x_encoder = _FourierX(width, int(n_freqs or 0))
        else:
            setattr(self, self.attribute, _mlp(self.cond_width, width))
        self.ctrl_blocks = nn.ModuleList(
            DiTBlock(width, arch.num_heads, arch.mlp_ratio, arch.use_qk_norm)
            for _ in range(arch.num_layers)
        )
        self.zero_linears = nn.ModuleList(nn.Linear(width, width) for _ in range(arch.num_layers))

    def attach(self, base: MotionDiT) -> ControlBranch:
        """Hold ``base`` as ``base_dit`` (shared, never copied); returns self."""
        self.base_dit = base
        return self

    def condition(self, cond: torch.Tensor | None) -> torch.Tensor:
        """The term added to every token of the branch: ``(rows, 1, width)`` from a
        ``(rows, cond_width)`` condition, or ``(1, 1, width)`` for the condition-free
        token."""
        if self.encoder == "token":
            return self.cond_token.unsqueeze(0).unsqueeze(0)
        assert cond is not None
        if self.encoder == "mlp_sit":  # seat height, normalised inside the release's network
            cond = (cond - 0.45) / 0.4
        return getattr(self, self.attribute)(cond).unsqueeze(1)


def new_branch(arch: Architecture, skill: str, n_freqs: int | None) -> ControlBranch:
    """The control branch of a manifest skill (its network from :data:`BRANCHES`)."""
    return ControlBranch(arch, BRANCHES[skill].encoder, n_freqs)


def condition_tensor(skill: str, raw: Sequence[float] | None, device: Any) -> torch.Tensor | None:
    """The ``(1, width)`` float32 network input of a skill's release condition.

    ``raw`` is the condition the release's planner writes for the skill (see
    :func:`~humanclaw_gym.motion.paper.conditioning.release_condition`); per kind the
    release scales it: the turn's degrees are divided by 75, the climbs' ``(height,
    depth)`` become ``(4 h - 1, (d - 0.5) / 0.3)``; the Fourier kinds and Sit take it raw
    (Sit's network normalises inside). Stand has none (None).
    """
    if BRANCHES[skill].encoder == "token":
        return None
    values = torch.tensor([[float(v) for v in (raw or ())]], dtype=torch.float32, device=device)
    if skill == "turn":
        return values / 75.0
    if skill in ("step_climb_up", "step_climb_down"):
        return torch.cat([4.0 * values[:, :1] - 1.0, (values[:, 1:2] - 0.5) / 0.3], dim=-1)
    return values


# ----------------------------------------------------------------------------------------
# the solver's times and the per-time modulation
# ----------------------------------------------------------------------------------------
def solver_times(nfe_steps: int, device: Any) -> list[torch.Tensor]:
    """The ``2 * nfe_steps`` flow times of the midpoint solver, in evaluation order (each a
    ``(1,)`` float32 tensor computed as the release's solver computes it)."""
    dt = 1.0 / nfe_steps
    out = []
    for t in torch.linspace(0, 1, nfe_steps + 1, device=device)[:-1]:
        out.append(torch.ones(1, device=device) * t)
        out.append(torch.ones(1, device=device) * (t + dt * 0.5))
    return out


class ModulationTable:
    """Every block's adaLN modulation at every solver time, computed once.

    ``table.blocks[k][i]`` is block ``i``'s ``(1, 6 * width)`` modulation at solver time
    ``k``; ``table.final[k]`` the final layer's (bases only). Each is computed from a
    single-row time embedding, exactly as the forward pass of one chunk computes it.
    """

    def __init__(self, base: MotionDiT, blocks: Sequence[DiTBlock], nfe_steps: int, final: bool):
        device = base.in_fc.weight.device
        self.blocks: list[list[torch.Tensor]] = []
        self.final: list[torch.Tensor] = []
        with torch.inference_mode():
            for t in solver_times(nfe_steps, device):
                c = base.t_embedder(t)
                self.blocks.append([block.modulation(c) for block in blocks])
                if final:
                    self.final.append(base.final_layer.modulation(c))
