"""MotionDiT: a small transformer velocity field over 219-D motion states, with one
ControlNet-style control branch per skill family.

Tokens are frames: the 5 (normalised, canonical) history states and the 15 noisy future
states, each projected to ``d_model`` with its own input layer, plus a learned position
embedding. The flow time ``t`` enters through a sinusoidal embedding and a small MLP; every
block adds a per-block projection of it to its tokens. The base is a stack of pre-norm
transformer blocks; its output head reads the 15 future tokens and predicts the velocity
``dx/dt`` of the rectified-flow path ``x_t = (1 - t) noise + t data``.

A control branch (:class:`ControlBranch`) is a trainable copy of the base's first
``control_layers`` blocks. It reads the base's input tokens plus an embedding of its scalar
condition (Fourier features -> MLP), and after each of its blocks a **zero-initialised**
linear projection adds its hidden state into the base's hidden state after the matching
base block. With all projections at zero the branch leaves the base untouched, so a freshly
attached branch starts exactly as the base (tested).

A batch may mix branches: each row names its branch (``-1`` = none, the bare base); rows are
routed to their branch and the residuals scattered back, so mixed-skill batches cost one
base pass.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields

import torch
from torch import nn
from torch.nn import functional as F

#: Lower bound of ``1 - t`` for x-predictions in training (limits the velocity-loss weight
#: ``1 / (1 - t)^2`` to 400) and in sampling (the midpoint solver never evaluates closer to
#: ``t = 1`` than half a step, 1/60 with 30 iterations).
TRAIN_MIN_GAP = 0.05
SAMPLE_MIN_GAP = 1e-3

__all__ = [
    "SAMPLE_MIN_GAP",
    "TRAIN_MIN_GAP",
    "ControlBranch",
    "FlowModelConfig",
    "MotionDiT",
    "TransformerBlock",
    "velocity_closure",
]


@dataclass(frozen=True)
class FlowModelConfig:
    """Architecture hyper-parameters (stored in every checkpoint and checked on load).

    Attributes:
        state_dim: per-frame state size (219: frame, joint positions, joint velocities).
        history_frames: frames of history the model conditions on.
        future_frames: frames generated per call.
        d_model: token width.
        n_layers: base transformer blocks.
        n_heads: attention heads (must divide ``d_model``).
        ff_mult: feed-forward width as a multiple of ``d_model``.
        control_layers: blocks copied into each control branch (1..n_layers).
        branches: control-branch names, in index order.
        cond_features: Fourier features of a branch's scalar condition.
        prediction: what the output head produces: ``"x"`` the clean future, turned into
            the velocity ``(x - x_t) / (1 - t)`` (the default: the 219-D frame tokens are
            wider than ``d_model``, and a head that must reproduce the noise through that
            bottleneck cannot), or ``"v"`` the velocity directly.
    """

    state_dim: int = 219
    history_frames: int = 5
    future_frames: int = 15
    d_model: int = 128
    n_layers: int = 4
    n_heads: int = 4
    ff_mult: int = 2
    control_layers: int = 2
    branches: tuple[str, ...] = ("walk", "turn", "side_step", "step_back", "sit", "stairs")
    cond_features: int = 4
    prediction: str = "x"

    def __post_init__(self) -> None:
        object.__setattr__(self, "branches", tuple(str(b) for b in self.branches))
        if self.prediction not in ("x", "v"):
            raise ValueError(
                f"FlowModelConfig.prediction={self.prediction!r} is invalid: allowed 'x' | 'v'"
            )
        for f in fields(self):
            if f.name in ("branches", "prediction"):
                continue
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(
                    f"FlowModelConfig.{f.name}={value!r} is invalid: allowed an int >= 1"
                )
        if self.d_model % self.n_heads:
            raise ValueError(
                f"FlowModelConfig.n_heads={self.n_heads} is invalid: must divide d_model={self.d_model}"
            )
        if self.control_layers > self.n_layers:
            raise ValueError(
                f"FlowModelConfig.control_layers={self.control_layers} is invalid: allowed "
                f"1..n_layers={self.n_layers}"
            )
        if not self.branches or len(set(self.branches)) != len(self.branches):
            raise ValueError(
                f"FlowModelConfig.branches={self.branches!r} is invalid: allowed unique names"
            )

    def to_dict(self) -> dict:
        """JSON-ready dict (tuples become lists)."""
        d = asdict(self)
        d["branches"] = list(self.branches)
        return d

    @classmethod
    def from_dict(cls, data: dict) -> FlowModelConfig:
        """Inverse of :meth:`to_dict`; unknown keys are an error naming them."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(
                f"FlowModelConfig: unknown field(s) {unknown}; allowed {sorted(known)}"
            )
        kwargs = dict(data)
        if "branches" in kwargs:
            kwargs["branches"] = tuple(kwargs["branches"])
        return cls(**kwargs)


def timestep_embedding(t: torch.Tensor, dim: int, max_period: float = 1000.0) -> torch.Tensor:
    """Sinusoidal embedding of flow times ``t`` in [0, 1], ``(B,) -> (B, dim)``."""
    half = dim // 2
    freqs = torch.exp(
        -math.log(max_period) * torch.arange(half, dtype=t.dtype, device=t.device) / half
    )
    args = (t[:, None] * 1000.0) * freqs[None]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)


class TransformerBlock(nn.Module):
    """Pre-norm self-attention + feed-forward block with an additive time bias."""

    def __init__(self, d_model: int, n_heads: int, ff_mult: int):
        super().__init__()
        self.n_heads = n_heads
        self.norm1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.ff = nn.Sequential(
            nn.Linear(d_model, ff_mult * d_model), nn.SiLU(), nn.Linear(ff_mult * d_model, d_model)
        )
        self.time = nn.Linear(d_model, d_model)

    def forward(self, h: torch.Tensor, temb: torch.Tensor) -> torch.Tensor:
        """``h (B, T, d)``, ``temb (B, d)`` -> ``(B, T, d)``."""
        h = h + self.time(temb)[:, None, :]
        b, n, d = h.shape
        qkv = self.qkv(self.norm1(h)).view(b, n, 3, self.n_heads, d // self.n_heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
        att = F.scaled_dot_product_attention(q, k, v)
        h = h + self.proj(att.transpose(1, 2).reshape(b, n, d))
        return h + self.ff(self.norm2(h))


class ControlBranch(nn.Module):
    """Trainable copy of the first base blocks, steered by one scalar condition.

    Args:
        config: the model config.
        blocks: the base blocks to copy (their weights initialise the branch).
    """

    def __init__(self, config: FlowModelConfig, blocks: nn.ModuleList):
        super().__init__()
        d = config.d_model
        self.register_buffer(
            "freqs", 0.5 * torch.pi * 2.0 ** torch.arange(config.cond_features, dtype=torch.float32)
        )
        self.cond = nn.Sequential(
            nn.Linear(2 * config.cond_features + 1, d), nn.SiLU(), nn.Linear(d, d)
        )
        self.blocks = nn.ModuleList()
        for block in blocks:
            copy = TransformerBlock(d, config.n_heads, config.ff_mult)
            copy.load_state_dict(block.state_dict())
            self.blocks.append(copy)
        self.zero_out = nn.ModuleList(nn.Linear(d, d) for _ in blocks)
        for lin in self.zero_out:
            nn.init.zeros_(lin.weight)
            nn.init.zeros_(lin.bias)

    def forward(
        self, h0: torch.Tensor, temb: torch.Tensor, cond: torch.Tensor
    ) -> list[torch.Tensor]:
        """Residuals to add after each of the first base blocks.

        Args:
            h0: ``(B, T, d)`` the base's input tokens.
            temb: ``(B, d)`` time embedding.
            cond: ``(B,)`` normalised condition values.
        """
        c = cond[:, None] * self.freqs[None]
        feats = torch.cat([cond[:, None], torch.sin(c), torch.cos(c)], dim=-1)
        h = h0 + self.cond(feats)[:, None, :]
        out = []
        for block, zero in zip(self.blocks, self.zero_out, strict=True):
            h = block(h, temb)
            out.append(zero(h))
        return out


class MotionDiT(nn.Module):
    """The velocity field ``v(x_t, t | history, branch, condition)`` (see the module docstring)."""

    def __init__(self, config: FlowModelConfig):
        super().__init__()
        self.config = config
        d, s = config.d_model, config.state_dim
        self.hist_in = nn.Linear(s, d)
        self.fut_in = nn.Linear(s, d)
        self.pos = nn.Parameter(torch.zeros(1, config.history_frames + config.future_frames, d))
        nn.init.normal_(self.pos, std=0.02)
        self.time_mlp = nn.Sequential(nn.Linear(d, d), nn.SiLU(), nn.Linear(d, d))
        self.blocks = nn.ModuleList(
            TransformerBlock(d, config.n_heads, config.ff_mult) for _ in range(config.n_layers)
        )
        self.norm_out = nn.LayerNorm(d)
        self.out = nn.Linear(d, s)
        self.control = nn.ModuleDict()
        self.reset_control()

    def reset_control(self) -> None:
        """(Re)create every control branch as a copy of the current base blocks with zero
        output projections (call after training the base)."""
        self.control = nn.ModuleDict(
            {
                name: ControlBranch(self.config, self.blocks[: self.config.control_layers])
                for name in self.config.branches
            }
        )

    def base_parameters(self) -> list[nn.Parameter]:
        """Parameters of the base (everything but the control branches)."""
        ctrl = {id(p) for p in self.control.parameters()}
        return [p for p in self.parameters() if id(p) not in ctrl]

    def forward(
        self,
        x_t: torch.Tensor,
        t: torch.Tensor,
        history: torch.Tensor,
        branch: torch.Tensor | None = None,
        cond: torch.Tensor | None = None,
        min_gap: float = TRAIN_MIN_GAP,
    ) -> torch.Tensor:
        """Predict the flow velocity.

        Args:
            x_t: ``(B, F, S)`` noisy normalised future states at time ``t``.
            t: ``(B,)`` flow times in [0, 1].
            history: ``(B, H, S)`` normalised history states.
            branch: ``(B,)`` int64 branch index per row, ``-1`` = base only; None = base only.
            cond: ``(B,)`` normalised condition values (needed when ``branch`` is given).
            min_gap: lower bound of ``1 - t`` when an x-prediction is turned into a
                velocity (bounds the loss weight near ``t = 1`` in training; sampling uses
                :data:`SAMPLE_MIN_GAP`).

        Returns:
            ``(B, F, S)`` velocity.
        """
        cfg = self.config
        h0 = torch.cat([self.hist_in(history), self.fut_in(x_t)], dim=1) + self.pos
        temb = self.time_mlp(timestep_embedding(t, cfg.d_model))
        residuals: list[torch.Tensor] | None = None
        if branch is not None:
            if cond is None:
                raise ValueError("MotionDiT.forward: cond is required when branch is given")
            residuals = self._control_residuals(h0, temb, branch, cond)
        h = h0
        for i, block in enumerate(self.blocks):
            h = block(h, temb)
            if residuals is not None and i < len(residuals):
                h = h + residuals[i]
        return self.velocity(self.out(self.norm_out(h[:, cfg.history_frames :])), x_t, t, min_gap)

    def velocity(
        self, head: torch.Tensor, x_t: torch.Tensor, t: torch.Tensor, min_gap: float
    ) -> torch.Tensor:
        """Turn the head's output into the flow velocity (see ``FlowModelConfig.prediction``)."""
        if self.config.prediction == "v":
            return head
        gap = (1.0 - t).clamp_min(min_gap)[:, None, None]
        return (head - x_t) / gap

    def _control_residuals(
        self, h0: torch.Tensor, temb: torch.Tensor, branch: torch.Tensor, cond: torch.Tensor
    ) -> list[torch.Tensor] | None:
        names = self.config.branches
        present = [int(b) for b in torch.unique(branch).tolist() if int(b) >= 0]
        if not present:
            return None
        if max(present) >= len(names):
            raise ValueError(
                f"branch index {max(present)} is invalid: allowed -1..{len(names) - 1}"
            )
        if len(present) == 1 and bool((branch == present[0]).all()):
            return self.control[names[present[0]]](h0, temb, cond)
        out = [torch.zeros_like(h0) for _ in range(self.config.control_layers)]
        for b in present:
            idx = torch.nonzero(branch == b, as_tuple=True)[0]
            res = self.control[names[b]](h0[idx], temb[idx], cond[idx])
            for i, r in enumerate(res):
                out[i] = out[i].index_copy(0, idx, r)
        return out


# --------------------------------------------------------------------------------------
# Inference: a velocity closure with everything that is constant over one integration
# precomputed, and all control branches of a mixed batch run as one grouped pass.
# --------------------------------------------------------------------------------------
def _stack(mods: list[nn.Module], attr: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Stacked ``(P, in, out)`` weights and ``(P, 1, out)`` biases of the named linear layer."""
    lins = [m.get_submodule(attr) for m in mods]
    w = torch.stack([lin.weight.t() for lin in lins])
    b = torch.stack([lin.bias for lin in lins])[:, None, :]
    return w, b


class _GroupedBlocks:
    """The control blocks of ``P`` branches (repeats allowed: one per batch row), evaluated
    together with batched matmuls on inputs grouped as ``(P, G, T, d)``."""

    def __init__(self, branches: list[ControlBranch]):
        self.n_heads = branches[0].blocks[0].n_heads
        self.layers = []
        for i in range(len(branches[0].blocks)):
            blocks = [br.blocks[i] for br in branches]
            layer = {name: _stack(blocks, name) for name in ("qkv", "proj", "time", "ff.0", "ff.2")}
            for norm in ("norm1", "norm2"):
                mods = [blk.get_submodule(norm) for blk in blocks]
                layer[norm] = (
                    torch.stack([m.weight for m in mods])[:, None, None, :],
                    torch.stack([m.bias for m in mods])[:, None, None, :],
                    mods[0].eps,
                )
            layer["zero"] = _stack([br.zero_out[i] for br in branches], "")
            self.layers.append(layer)

    def select(self, index: torch.Tensor) -> _GroupedBlocks:
        """The same blocks with branch ``index[i]`` in slot ``i`` (one gather per weight)."""
        out = object.__new__(_GroupedBlocks)
        out.n_heads = self.n_heads
        out.layers = [
            {
                name: tuple(v.index_select(0, index) if torch.is_tensor(v) else v for v in val)
                for name, val in layer.items()
            }
            for layer in self.layers
        ]
        return out

    @staticmethod
    def _lin(x: torch.Tensor, wb: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        p = x.shape[0]
        flat = x.reshape(p, -1, x.shape[-1])
        out = torch.baddbmm(wb[1], flat, wb[0])
        return out.reshape(*x.shape[:-1], out.shape[-1])

    @staticmethod
    def _norm(x: torch.Tensor, params: tuple) -> torch.Tensor:
        w, b, eps = params
        return F.layer_norm(x, x.shape[-1:], eps=eps) * w + b

    def __call__(self, h: torch.Tensor, temb: torch.Tensor) -> list[torch.Tensor]:
        """``h (P, G, T, d)``, ``temb (P, G, d)`` -> residuals, each ``(P, G, T, d)``."""
        p, g, n, d = h.shape
        heads = self.n_heads
        out = []
        for layer in self.layers:
            h = h + self._lin(temb, layer["time"])[:, :, None, :]
            qkv = self._lin(self._norm(h, layer["norm1"]), layer["qkv"])
            qkv = qkv.view(p * g, n, 3, heads, d // heads).permute(2, 0, 3, 1, 4)
            att = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2])
            h = h + self._lin(att.transpose(1, 2).reshape(p, g, n, d), layer["proj"])
            ff = F.silu(self._lin(self._norm(h, layer["norm2"]), layer["ff.0"]))
            h = h + self._lin(ff, layer["ff.2"])
            out.append(self._lin(h, layer["zero"]))
        return out


def _all_branches(model: MotionDiT) -> _GroupedBlocks:
    """Stacked weights of every branch (in ``config.branches`` order), cached on the model
    until any control parameter changes (tensor version counters)."""
    params = list(model.control.parameters())
    key = tuple((id(p), p._version) for p in params)
    cached = getattr(model, "_grouped_cache", None)
    if cached is None or cached[0] != key:
        blocks = _GroupedBlocks([model.control[name] for name in model.config.branches])
        cached = (key, blocks)
        object.__setattr__(model, "_grouped_cache", cached)
    return cached[1]


@torch.no_grad()
def velocity_closure(
    model: MotionDiT,
    history: torch.Tensor,
    branch: torch.Tensor | None = None,
    cond: torch.Tensor | None = None,
    min_gap: float = SAMPLE_MIN_GAP,
):
    """``fn(x_t, t) -> v`` equal to ``model(x_t, t, history, branch, cond)`` (up to float
    rounding), faster for sampling: the history tokens and condition embeddings are computed
    once, and a batch that mixes branches runs all its branches in one grouped pass instead
    of one pass per branch.
    """
    cfg = model.config
    hist_tok = model.hist_in(history) + model.pos[:, : cfg.history_frames]
    fut_pos = model.pos[:, cfg.history_frames :]
    b = history.shape[0]
    present: list[int] = []
    if branch is not None:
        if cond is None:
            raise ValueError("velocity_closure: cond is required when branch is given")
        present = sorted(int(v) for v in torch.unique(branch).tolist() if int(v) >= 0)
        if present and present[-1] >= len(cfg.branches):
            raise ValueError(
                f"branch index {present[-1]} is invalid: allowed -1..{len(cfg.branches) - 1}"
            )

    if len(present) <= 1:
        single = None
        if present:
            rows = torch.nonzero(branch == present[0], as_tuple=True)[0]
            single = (rows, model.control[cfg.branches[present[0]]], cond[rows])
            full = bool(len(rows) == b)

        def fn(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
            h0 = torch.cat([hist_tok, model.fut_in(x) + fut_pos], dim=1)
            temb = model.time_mlp(timestep_embedding(t, cfg.d_model))
            res = None
            if single is not None:
                rows, ctrl, c = single
                if full:
                    res = ctrl(h0, temb, c)
                else:
                    part = ctrl(h0[rows], temb[rows], c)
                    res = [torch.zeros_like(h0).index_copy(0, rows, r) for r in part]
            h = h0
            for i, block in enumerate(model.blocks):
                h = block(h, temb)
                if res is not None and i < len(res):
                    h = h + res[i]
            head = model.out(model.norm_out(h[:, cfg.history_frames :]))
            return model.velocity(head, x, t, min_gap)

        return fn

    # Every row runs through its own branch's weights: the stacked weights are gathered per
    # row once per closure, so the grouped pass has exactly B rows (no padding to the
    # largest branch group) and one batched matmul per layer serves all branches.
    # Rows with branch -1 (base only) get no residual.
    with_branch = torch.nonzero(branch >= 0, as_tuple=True)[0]
    every_row = bool(len(with_branch) == b)
    rows_branch = [model.control[cfg.branches[int(branch[r])]] for r in with_branch.tolist()]
    grouped = _all_branches(model).select(branch[with_branch])
    n_rows = len(rows_branch)
    cond_emb = []
    for row, br in zip(with_branch.tolist(), rows_branch, strict=True):
        c = cond[row : row + 1]
        feats = c[:, None] * br.freqs[None]
        feats = torch.cat([c[:, None], torch.sin(feats), torch.cos(feats)], dim=-1)
        cond_emb.append(br.cond(feats))
    cond_emb = torch.cat(cond_emb)[:, None, None, :]  # (B, 1, 1, d)
    t_len = cfg.history_frames + cfg.future_frames

    def fn_mixed(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        h0 = torch.cat([hist_tok, model.fut_in(x) + fut_pos], dim=1)
        temb = model.time_mlp(timestep_embedding(t, cfg.d_model))
        if every_row:
            res_g = grouped(h0[:, None] + cond_emb, temb[:, None])
            res = [r.view(b, t_len, -1) for r in res_g]
        else:
            res_g = grouped(h0[with_branch, None] + cond_emb, temb[with_branch, None])
            res = [
                torch.zeros_like(h0).index_copy(0, with_branch, r.view(n_rows, t_len, -1))
                for r in res_g
            ]
        h = h0
        for i, block in enumerate(model.blocks):
            h = block(h, temb)
            if i < len(res):
                h = h + res[i]
        head = model.out(model.norm_out(h[:, cfg.history_frames :]))
        return model.velocity(head, x, t, min_gap)

    return fn_mixed
