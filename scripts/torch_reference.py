"""torch_reference.py: an independent PyTorch autograd implementation of the
ssmtrade model (DESIGN section 5) and of the PPO loss (src/train/ppo_loss.h),
used by scripts/torch_parity.py to check the C model and its hand-written
backward against autograd.

Parameter names are the checkpoint's (DESIGN section 5; src/model/params.c),
so ``named_parameters()`` of ``SsmTradeModel`` yields exactly the tensor names
of a model_io weights file and ``load_state_dict`` takes it as is.

Per window row r = (b, k): s = X[r, :F], c = X[r, F:F+C].

  VSN:  e_j = s_j embed_w[j] + embed_b[j]                       [Dv] each
        alpha = softmax(GRN_sel(concat_j e_j, c))               [F]
        t_j = GRN_j(e_j)   (stacked weights, identity skip)     [Dv]
        v = sum_j alpha_j t_j                                   [Dv]
        GRN(a, c): h = ELU(fc1(a) + ctx(c)); h = fc2(h); [g1; g2] = glu(h);
                   out = LayerNorm(skip(a) + g1 sigmoid(g2))
  u = w_in([v; c])                                              [D]
  Mamba2 block l (pre-norm, residual):
        a = ln.l(u); [z, xBC, dt] = in_proj(a)  (d_inner | d_inner+2GN | H)
        xBC = SiLU(causal depthwise conv: y[t] = b + sum_i w[i] x[t-W+1+i])
        [x, B, C] = xBC; dt = softplus(dt + dt_bias); A = -exp(A_log)
        S_t = exp(dt_t A) S_{t-1} + dt_t x_t B_t^T;  y_t = S_t C_t + Dskip x_t
              (the sequential recurrence itself, head h reads group h/(H/G))
        y = RMSNorm(y SiLU(z)) norm_w;  u = u + out_proj(y)
  heads: h = ln_f(u)[row K-1]; g = [h; c[row K-1]];
         logits = pi2(tanh(pi1(g))); value = v2(tanh(v1(g)))
  LayerNorm and RMSNorm eps 1e-5, ELU alpha 1.

Nothing here is shared with the C code: the math is written from DESIGN with
plain torch operations (no custom kernels, no chunked SSD), in the textbook
PPO form (min / max / clamp), so a parity failure points at the C side or at
a disagreement with DESIGN, not at a common mistake.

The safetensors reader is plain Python (struct + json) and does not need
the ``safetensors`` package; ``read_safetensors`` works without torch (the
parity script's parsing can be tested where torch is missing).
"""
import json
import struct
import sys
import types

try:
    import torch
    from torch import nn
    import torch.nn.functional as Fn
except ImportError:  # the reader below still works; the model needs torch
    torch = None
    nn = types.SimpleNamespace(Module=object)
    Fn = None

EPS = 1e-5

# ---------------------------------------------------------------- safetensors

_DTYPES = {  # safetensors dtype -> (struct code, bytes)
    "F64": ("d", 8),
    "F32": ("f", 4),
    "I64": ("q", 8),
    "I32": ("i", 4),
    "U8": ("B", 1),
}


def read_safetensors(path):
    """(metadata dict, {name: (dtype, shape list, raw bytes)}) of a file.

    Layout: u64 little-endian header length n, n bytes of JSON, then the raw
    little-endian tensor bytes at data_offsets relative to the data start."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise ValueError(f"{path}: too short for a safetensors file")
    (n,) = struct.unpack("<Q", blob[:8])
    if n > len(blob) - 8:
        raise ValueError(f"{path}: header length {n} exceeds the file")
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {}) or {}
    start = 8 + n
    tensors = {}
    for name, e in header.items():
        dtype, shape = e["dtype"], list(e["shape"])
        begin, end = e["data_offsets"]
        if dtype not in _DTYPES:
            raise ValueError(f"{path}: tensor {name} has unsupported dtype {dtype}")
        count = 1
        for s in shape:
            count *= s
        if end - begin != count * _DTYPES[dtype][1] or start + end > len(blob):
            raise ValueError(f"{path}: tensor {name} has inconsistent data offsets")
        tensors[name] = (dtype, shape, blob[start + begin:start + end])
    return meta, tensors


def values(entry):
    """A tensor entry as a flat Python list (no torch, no numpy)."""
    dtype, shape, raw = entry
    code, size = _DTYPES[dtype]
    return list(struct.unpack("<%d%s" % (len(raw) // size, code), raw))


def to_torch(entry):
    """A tensor entry as a torch tensor of its own dtype and shape (CPU)."""
    if sys.byteorder != "little":
        raise RuntimeError("safetensors data is little-endian; this host is not")
    dtype, shape, raw = entry
    tdt = {"F64": torch.float64, "F32": torch.float32, "I64": torch.int64, "I32": torch.int32,
           "U8": torch.uint8}[dtype]
    if len(raw) == 0:
        return torch.zeros(shape, dtype=tdt)
    return torch.frombuffer(bytearray(raw), dtype=tdt).reshape(shape).clone()


def dims_from_meta(meta):
    """The model sizes a model_io weights file carries in its metadata."""
    keys = ["K", "F", "C", "Dv", "D", "L", "expand", "headdim", "N", "G", "W", "Q", "Hh", "A"]
    return {k: int(meta[k]) for k in keys}


# ---------------------------------------------------------------- the model


def _layer_norm(x, w, b):
    """LayerNorm over the last dimension, biased variance, eps 1e-5."""
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + EPS) * w + b


class SelGRN(nn.Module):
    """The selection GRN: input F*Dv, hidden Hs = min(Dv, F), output F,
    context C, linear skip. Names vsn.sel.{skip, fc1, ctx, fc2, glu, norm}."""

    def __init__(self, P, Hs, F, C):
        super().__init__()
        self.skip = nn.Linear(P, F)
        self.fc1 = nn.Linear(P, Hs)
        self.ctx = nn.Linear(C, Hs, bias=False)
        self.fc2 = nn.Linear(Hs, Hs)
        self.glu = nn.Linear(Hs, 2 * F)
        self.norm = nn.LayerNorm(F, eps=EPS)
        self.F = F

    def forward(self, a, c):
        h = Fn.elu(self.fc1(a) + self.ctx(c))
        h = self.fc2(h)
        g = self.glu(h)
        g1, g2 = g[..., :self.F], g[..., self.F:]
        return self.norm(self.skip(a) + g1 * torch.sigmoid(g2))


class VarGRNs(nn.Module):
    """F independent GRNs Dv -> Dv -> Dv (no context, identity skip), weights
    stacked over the variable: vsn.var.{fc1_w [F,Dv,Dv], fc1_b [F,Dv], fc2_w,
    fc2_b, glu_w [F,2Dv,Dv], glu_b [F,2Dv], ln_w [F,Dv], ln_b [F,Dv]}, each
    matrix [out, in]."""

    def __init__(self, F, Dv):
        super().__init__()
        z = lambda *s: nn.Parameter(torch.zeros(*s, dtype=torch.float64))
        self.fc1_w, self.fc1_b = z(F, Dv, Dv), z(F, Dv)
        self.fc2_w, self.fc2_b = z(F, Dv, Dv), z(F, Dv)
        self.glu_w, self.glu_b = z(F, 2 * Dv, Dv), z(F, 2 * Dv)
        self.ln_w, self.ln_b = z(F, Dv), z(F, Dv)
        self.Dv = Dv

    def forward(self, e):  # e [R, F, Dv] -> t [R, F, Dv]
        h = Fn.elu(torch.einsum("rjk,jok->rjo", e, self.fc1_w) + self.fc1_b)
        h = torch.einsum("rjk,jok->rjo", h, self.fc2_w) + self.fc2_b
        g = torch.einsum("rjk,jok->rjo", h, self.glu_w) + self.glu_b
        g1, g2 = g[..., :self.Dv], g[..., self.Dv:]
        return _layer_norm(e + g1 * torch.sigmoid(g2), self.ln_w, self.ln_b)


class VSN(nn.Module):
    """Variable selection over the F snapshot variables, conditioned on c."""

    def __init__(self, F, C, Dv):
        super().__init__()
        self.embed_w = nn.Parameter(torch.zeros(F, Dv, dtype=torch.float64))
        self.embed_b = nn.Parameter(torch.zeros(F, Dv, dtype=torch.float64))
        self.sel = SelGRN(F * Dv, min(Dv, F), F, C)
        self.var = VarGRNs(F, Dv)

    def forward(self, s, c):  # s [R, F], c [R, C] -> v [R, Dv], alpha [R, F]
        e = s.unsqueeze(-1) * self.embed_w + self.embed_b  # [R, F, Dv]
        alpha = torch.softmax(self.sel(e.reshape(e.shape[0], -1), c), dim=-1)
        t = self.var(e)
        return (alpha.unsqueeze(-1) * t).sum(1), alpha


def ssd_sequential(x, dt, A, Bm, Cm, Dskip, G):
    """The SSD by its definition, one time step after another.

    x [n, K, H, P], dt [n, K, H], A [H], Bm, Cm [n, K, G, N], Dskip [H]
    -> y [n, K, H, P]; S_t = exp(dt_t A) S_{t-1} + dt_t x_t B_t^T (S_{-1} = 0),
    y_t = S_t C_t + Dskip x_t; head h reads group h // (H/G)."""
    n, K, H, P = x.shape
    Bh = Bm.repeat_interleave(H // G, dim=2)  # [n, K, H, N]
    Ch = Cm.repeat_interleave(H // G, dim=2)
    S = x.new_zeros(n, H, P, Bm.shape[-1])
    ys = []
    for t in range(K):
        decay = torch.exp(dt[:, t] * A)  # [n, H]
        S = decay[..., None, None] * S + (dt[:, t, :, None, None] * x[:, t, :, :, None]) * Bh[:, t, :, None, :]
        ys.append((S * Ch[:, t, :, None, :]).sum(-1) + Dskip[:, None] * x[:, t])
    return torch.stack(ys, dim=1)


class Mamba2Mixer(nn.Module):
    """mix.l: in_proj (no bias), conv_w [conv_dim, W], conv_b, dt_bias [H],
    A_log [H], Dskip [H], norm_w [d_inner], out_proj (no bias)."""

    def __init__(self, d):
        super().__init__()
        D, di = d["D"], d["expand"] * d["D"]
        H, GN = di // d["headdim"], d["G"] * d["N"]
        cd = di + 2 * GN
        z = lambda *s: nn.Parameter(torch.zeros(*s, dtype=torch.float64))
        self.in_proj = nn.Linear(D, 2 * di + 2 * GN + H, bias=False)
        self.conv_w, self.conv_b = z(cd, d["W"]), z(cd)
        self.dt_bias, self.A_log, self.Dskip = z(H), z(H), z(H)
        self.norm_w = z(di)
        self.out_proj = nn.Linear(di, D, bias=False)
        self.di, self.H, self.P, self.G, self.N, self.GN, self.cd, self.W = di, H, d["headdim"], d["G"], d["N"], GN, cd, d["W"]

    def conv(self, xBC):
        """Causal depthwise conv over time: y[t] = b + sum_i w[:, i] x[t-W+1+i], x[<0] = 0."""
        K = xBC.shape[1]
        y = self.conv_b.expand_as(xBC)
        for i in range(self.W):
            shift = self.W - 1 - i  # x[t - shift]
            if shift >= K:
                continue
            xs = Fn.pad(xBC[:, :K - shift], (0, 0, shift, 0))
            y = y + self.conv_w[:, i] * xs
        return y

    def forward(self, a):  # a [n, K, D] (already LayerNorm'd) -> [n, K, D]
        n, K, _ = a.shape
        di, GN, cd, H, P = self.di, self.GN, self.cd, self.H, self.P
        zxbcdt = self.in_proj(a)
        z, xBC, dt_raw = zxbcdt[..., :di], zxbcdt[..., di:di + cd], zxbcdt[..., di + cd:]
        xBC = Fn.silu(self.conv(xBC))
        x, Bm, Cm = xBC[..., :di], xBC[..., di:di + GN], xBC[..., di + GN:]
        dt = Fn.softplus(dt_raw + self.dt_bias)
        A = -torch.exp(self.A_log)
        y = ssd_sequential(x.reshape(n, K, H, P), dt, A, Bm.reshape(n, K, self.G, self.N),
                           Cm.reshape(n, K, self.G, self.N), self.Dskip, self.G).reshape(n, K, di)
        g = y * Fn.silu(z)
        g = g * torch.rsqrt((g * g).mean(-1, keepdim=True) + EPS) * self.norm_w
        return self.out_proj(g)


class SsmTradeModel(nn.Module):
    """The whole model: window X [n, K, F+C] -> logits [n, A], value [n]."""

    def __init__(self, d):
        super().__init__()
        self.d = dict(d)
        F, C, Dv, D, Hh, A = d["F"], d["C"], d["Dv"], d["D"], d["Hh"], d["A"]
        self.vsn = VSN(F, C, Dv)
        self.w_in = nn.Linear(Dv + C, D)
        self.ln = nn.ModuleList([nn.LayerNorm(D, eps=EPS) for _ in range(d["L"])])
        self.mix = nn.ModuleList([Mamba2Mixer(d) for _ in range(d["L"])])
        self.ln_f = nn.LayerNorm(D, eps=EPS)
        self.pi1 = nn.Linear(D + C, Hh)
        self.pi2 = nn.Linear(Hh, A)
        self.v1 = nn.Linear(D + C, Hh)
        self.v2 = nn.Linear(Hh, 1)
        self.double()

    def forward(self, X):
        n, K, _ = X.shape
        F, C = self.d["F"], self.d["C"]
        rows = X.reshape(n * K, F + C)
        s, c = rows[:, :F], rows[:, F:]
        v, _ = self.vsn(s, c)
        u = self.w_in(torch.cat([v, c], dim=-1)).reshape(n, K, -1)
        for ln, mix in zip(self.ln, self.mix):
            u = u + mix(ln(u))
        g = torch.cat([self.ln_f(u[:, K - 1]), X[:, K - 1, F:]], dim=-1)
        logits = self.pi2(torch.tanh(self.pi1(g)))
        value = self.v2(torch.tanh(self.v1(g))).squeeze(-1)
        return logits, value


def ppo_loss(logits, value, action, old_logp, adv, old_value, ret, clip=0.2, vclip=0.2, vf_coef=0.5,
             ent_coef=0.01):
    """The PPO loss of src/train/ppo_loss.h in its textbook form.

    Returns (loss, dict of the statistics as tensors)."""
    logp_all = torch.log_softmax(logits, dim=-1)
    p = logp_all.exp()
    entropy = -(p * logp_all).sum(-1)
    logp = logp_all.gather(1, action.long().unsqueeze(1)).squeeze(1)
    log_ratio = logp - old_logp
    ratio = torch.exp(log_ratio)
    policy = -torch.minimum(ratio * adv, torch.clamp(ratio, 1 - clip, 1 + clip) * adv)
    if vclip > 0:
        v_clip = old_value + torch.clamp(value - old_value, -vclip, vclip)
        vloss = 0.5 * torch.maximum((value - ret) ** 2, (v_clip - ret) ** 2)
    else:
        vloss = 0.5 * (value - ret) ** 2
    loss = policy.mean() + vf_coef * vloss.mean() - ent_coef * entropy.mean()
    stats = {
        "loss": loss,
        "loss.policy": policy.mean(),
        "loss.value": vloss.mean(),
        "loss.entropy": entropy.mean(),
        "loss.approx_kl": ((ratio - 1) - log_ratio).mean(),
        "loss.clipfrac": ((ratio - 1).abs() > clip).double().mean(),
    }
    return loss, stats
