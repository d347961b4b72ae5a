#!/usr/bin/env python3
"""torch_model.py: the ssmtrade model (DESIGN section 5) and its PPO loss in
idiomatic, efficient PyTorch: the PyTorch side of the benchmark harness
(issue 7; bench/torch_bench.py times it against ``ssmtrade bench``).

scripts/torch_reference.py is written for clarity (sequential SSD recurrence,
per-row einsums); this file is written for speed, the way one would write the
model to train it in PyTorch, from the same math:

  VSN    the embeddings are laid out variable-major, e [F, R, Dv], so the F
         per-variable GRNs are three batched matrix products (baddbmm over
         the stacked vsn.var.* weights); the selection GRN's skip and fc1
         read the same input and run as one product.
  conv   causal depthwise conv as F.conv1d(groups=channels, padding=W-1),
         the first K outputs kept: y[t] = b + sum_i w[i] x[t-W+1+i].
  SSD    the chunked algorithm (chunks of Q, K padded up to a multiple of Q
         with dt = 0, which neither decays nor adds):
           a = dt A, a_cs = cumsum of a within each chunk
           intra-chunk:  y_i += sum_{j<=i} exp(a_cs_i - a_cs_j) (C_i . B_j) dt_j x_j
           chunk states: S_c = sum_j exp(a_cs_last - a_cs_j) dt_j x_j B_j^T
           inter-chunk:  S_in[z] = sum_{c<z} exp(sum_{c<c'<z} A_c') S_c,  A_c = a_cs_last of chunk c
           state output: y_i += exp(a_cs_i) C_i . S_in[z]
         then y += Dskip x; head h reads group h // (H/G).
  heads  on the last row only.

Parameter names are those of scripts/torch_reference.py (the checkpoint's),
so ``load_state_dict`` takes the same weights: ``--check`` loads the
reference model's weights into this one and compares logits, value, the PPO
loss and every gradient in float64 (bound 1e-10, exit status 1 above it).

    python3 bench/torch_model.py --check [--device cuda]

Written against the PyTorch API that both torch 1.13 and 2.x have (no
F.rms_norm), so the float64 check also runs on an old CPU-only torch.
"""
import argparse
import math
import os
import sys

import torch
import torch.nn.functional as Fn
from torch import nn

EPS = 1e-5

# The presets of src/core/config.c (B and T aside).
DIMS = {
    "default": dict(K=64, F=40, C=16, Dv=32, D=128, L=2, expand=2, headdim=32, N=64, G=1, W=4, Q=32, Hh=128, A=3),
    "tiny": dict(K=32, F=40, C=16, Dv=8, D=32, L=1, expand=2, headdim=16, N=16, G=1, W=4, Q=16, Hh=32, A=3),
    "odd": dict(K=50, F=37, C=11, Dv=5, D=96, L=2, expand=2, headdim=24, N=10, G=1, W=4, Q=16, Hh=20, A=3),
}


class SelGRN(nn.Module):
    """Selection GRN: input F*Dv, hidden Hs, output F, context C, linear skip
    (vsn.sel.{skip, fc1, ctx, fc2, glu, norm})."""

    def __init__(self, P, Hs, F, C):
        super().__init__()
        self.skip = nn.Linear(P, F)
        self.fc1 = nn.Linear(P, Hs)
        self.ctx = nn.Linear(C, Hs, bias=False)
        self.fc2 = nn.Linear(Hs, Hs)
        self.glu = nn.Linear(Hs, 2 * F)
        self.norm = nn.LayerNorm(F, eps=EPS)
        self.F, self.Hs = F, Hs

    def forward(self, a, c):
        # skip(a) and fc1(a) share their input: one product
        w = torch.cat([self.skip.weight, self.fc1.weight], 0)
        b = torch.cat([self.skip.bias, self.fc1.bias], 0)
        skip, h = Fn.linear(a, w, b).split([self.F, self.Hs], dim=-1)
        h = Fn.elu(h + Fn.linear(c, self.ctx.weight))
        g1, g2 = self.glu(self.fc2(h)).chunk(2, dim=-1)
        return self.norm(skip + g1 * torch.sigmoid(g2))


class VarGRNs(nn.Module):
    """F GRNs Dv -> Dv -> Dv, identity skip, stacked weights [F, out, in]
    (vsn.var.{fc1_w, fc1_b, fc2_w, fc2_b, glu_w, glu_b, ln_w, ln_b})."""

    def __init__(self, F, Dv):
        super().__init__()
        z = lambda *s: nn.Parameter(torch.zeros(*s))
        self.fc1_w, self.fc1_b = z(F, Dv, Dv), z(F, Dv)
        self.fc2_w, self.fc2_b = z(F, Dv, Dv), z(F, Dv)
        self.glu_w, self.glu_b = z(F, 2 * Dv, Dv), z(F, 2 * Dv)
        self.ln_w, self.ln_b = z(F, Dv), z(F, Dv)
        self.Dv = Dv

    def forward(self, e):  # e [F, R, Dv] -> [F, R, Dv]
        h = Fn.elu(torch.baddbmm(self.fc1_b.unsqueeze(1), e, self.fc1_w.transpose(1, 2)))
        h = torch.baddbmm(self.fc2_b.unsqueeze(1), h, self.fc2_w.transpose(1, 2))
        g1, g2 = torch.baddbmm(self.glu_b.unsqueeze(1), h, self.glu_w.transpose(1, 2)).chunk(2, dim=-1)
        x = Fn.layer_norm(e + g1 * torch.sigmoid(g2), (self.Dv,), eps=EPS)
        return x * self.ln_w.unsqueeze(1) + self.ln_b.unsqueeze(1)


class VSN(nn.Module):
    def __init__(self, F, C, Dv):
        super().__init__()
        self.embed_w = nn.Parameter(torch.zeros(F, Dv))
        self.embed_b = nn.Parameter(torch.zeros(F, Dv))
        self.sel = SelGRN(F * Dv, min(Dv, F), F, C)
        self.var = VarGRNs(F, Dv)

    def forward(self, s, c):  # s [R, F], c [R, C] -> v [R, Dv]
        R, F = s.shape
        e = torch.addcmul(self.embed_b.unsqueeze(1), s.t().unsqueeze(-1), self.embed_w.unsqueeze(1))  # [F, R, Dv]
        alpha = torch.softmax(self.sel(e.transpose(0, 1).reshape(R, -1), c), dim=-1)  # [R, F]
        t = self.var(e)
        return (t * alpha.t().unsqueeze(-1)).sum(0)


def ssd_chunked(x, dt, A, Bm, Cm, Q):
    """x [n, K, H, P], dt [n, K, H], A [H], Bm, Cm [n, K, G, N] -> y [n, K, H, P]
    (without the Dskip term): the chunked SSD of the module docstring."""
    n, K, H, P = x.shape
    G, N = Bm.shape[2], Bm.shape[3]
    Hg = H // G
    pad = (-K) % Q
    if pad:
        x = Fn.pad(x, (0, 0, 0, 0, 0, pad))
        dt = Fn.pad(dt, (0, 0, 0, pad))
        Bm = Fn.pad(Bm, (0, 0, 0, 0, 0, pad))
        Cm = Fn.pad(Cm, (0, 0, 0, 0, 0, pad))
    c = (K + pad) // Q
    a = (dt * A).reshape(n, c, Q, G, Hg).permute(0, 1, 3, 4, 2)  # [n, c, G, Hg, Q]
    a_cs = torch.cumsum(a, dim=-1)
    xd = (x * dt.unsqueeze(-1)).reshape(n, c, Q, G, Hg, P)
    Bc = Bm.reshape(n, c, Q, G, N)
    Cc = Cm.reshape(n, c, Q, G, N)
    # intra-chunk: L[i, j] = exp(a_cs_i - a_cs_j) for j <= i, else 0 (masked before exp)
    causal = torch.ones(Q, Q, dtype=torch.bool, device=x.device).tril()
    L = torch.exp((a_cs.unsqueeze(-1) - a_cs.unsqueeze(-2)).masked_fill(~causal, float("-inf")))
    CB = torch.einsum("bcign,bcjgn->bcgij", Cc, Bc)  # [n, c, G, Q, Q]
    y = torch.einsum("bcghij,bcjghp->bcighp", L * CB.unsqueeze(3), xd)
    # chunk states (each chunk's own inputs, decayed to its last position)
    decay = torch.exp(a_cs[..., -1:] - a_cs).permute(0, 1, 4, 2, 3).unsqueeze(-1)  # [n, c, Q, G, Hg, 1]
    states = torch.einsum("bcjgn,bcjghp->bcghpn", Bc, xd * decay)
    # inter-chunk: the state entering chunk z, W[z, c'] = exp(Pin[z] - Pout[c']) for c' < z
    A_c = a_cs[..., -1]  # [n, c, G, Hg]
    P_out = torch.cumsum(A_c, dim=1)  # decay through the end of chunk c
    P_in = P_out - A_c  # through the start of chunk z
    strict = torch.ones(c, c, dtype=torch.bool, device=x.device).tril(-1)
    Wz = torch.exp((P_in.unsqueeze(2) - P_out.unsqueeze(1)).masked_fill(~strict[:, :, None, None], float("-inf")))
    S_in = torch.einsum("bzcgh,bcghpn->bzghpn", Wz, states)
    # the entering state's output, decayed to position i of its chunk
    y = y + torch.einsum("bzign,bzghpn->bzighp", Cc, S_in) * torch.exp(a_cs).permute(0, 1, 4, 2, 3).unsqueeze(-1)
    return y.reshape(n, c * Q, H, P)[:, :K]


class Mamba2Mixer(nn.Module):
    def __init__(self, d):
        super().__init__()
        D, di = d["D"], d["expand"] * d["D"]
        H, GN = di // d["headdim"], d["G"] * d["N"]
        cd = di + 2 * GN
        z = lambda *s: nn.Parameter(torch.zeros(*s))
        self.in_proj = nn.Linear(D, 2 * di + 2 * GN + H, bias=False)
        self.conv_w, self.conv_b = z(cd, d["W"]), z(cd)
        self.dt_bias, self.A_log, self.Dskip = z(H), z(H), z(H)
        self.norm_w = z(di)
        self.out_proj = nn.Linear(di, D, bias=False)
        self.di, self.H, self.P, self.G, self.N, self.GN, self.cd = di, H, d["headdim"], d["G"], d["N"], GN, cd
        self.W, self.Q = d["W"], d["Q"]

    def forward(self, a):  # a [n, K, D], LayerNorm'd -> [n, K, D]
        n, K, _ = a.shape
        z, xBC, dt = Fn.linear(a, self.in_proj.weight).split([self.di, self.cd, self.H], dim=-1)
        xBC = Fn.conv1d(xBC.transpose(1, 2), self.conv_w.unsqueeze(1), self.conv_b, padding=self.W - 1,
                        groups=self.cd)[..., :K]
        xBC = Fn.silu(xBC).transpose(1, 2)
        x, Bm, Cm = xBC.split([self.di, self.GN, self.GN], dim=-1)
        dt = Fn.softplus(dt + self.dt_bias)
        A = -torch.exp(self.A_log)
        x = x.reshape(n, K, self.H, self.P)
        y = ssd_chunked(x, dt, A, Bm.reshape(n, K, self.G, self.N), Cm.reshape(n, K, self.G, self.N), self.Q)
        y = (y + x * self.Dskip.unsqueeze(-1)).reshape(n, K, self.di)
        g = y * Fn.silu(z)
        g = g * torch.rsqrt(g.pow(2).mean(-1, keepdim=True) + EPS) * self.norm_w
        return Fn.linear(g, self.out_proj.weight)


class FastModel(nn.Module):
    """Window X [n, K, F+C] -> logits [n, A], value [n]."""

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

    def forward(self, X):
        n, K, _ = X.shape
        F = self.d["F"]
        rows = X.reshape(n * K, -1)
        s, c = rows[:, :F], rows[:, F:]
        v = self.vsn(s, c)
        u = self.w_in(torch.cat([v, c], dim=-1)).reshape(n, K, -1)
        for ln, mix in zip(self.ln, self.mix):
            u = u + mix(ln(u))
        g = torch.cat([self.ln_f(u[:, K - 1]), X[:, K - 1, F:]], dim=-1)
        logits = self.pi2(torch.tanh(self.pi1(g)))
        value = self.v2(torch.tanh(self.v1(g))).squeeze(-1)
        return logits, value


def ppo_loss(logits, value, action, old_logp, adv, old_value, ret, clip=0.2, vclip=0.2, vf_coef=0.5, ent_coef=0.01):
    """The PPO loss of src/train/ppo_loss.h (as scripts/torch_reference.py):
    mean clipped surrogate + vf_coef mean clipped value loss - ent_coef mean entropy."""
    logp_all = torch.log_softmax(logits, dim=-1)
    entropy = -(logp_all.exp() * logp_all).sum(-1)
    logp = logp_all.gather(1, action.long().unsqueeze(1)).squeeze(1)
    ratio = torch.exp(logp - old_logp)
    policy = -torch.minimum(ratio * adv, torch.clamp(ratio, 1 - clip, 1 + clip) * adv)
    if vclip > 0:
        v_clip = old_value + torch.clamp(value - old_value, -vclip, vclip)
        vloss = 0.5 * torch.maximum((value - ret) ** 2, (v_clip - ret) ** 2)
    else:
        vloss = 0.5 * (value - ret) ** 2
    return policy.mean() + vf_coef * vloss.mean() - ent_coef * entropy.mean()


def build_windows(feats, inst_offset, inst, bar, ctx, K):
    """The window builder by indexing (env/window.h): feats [bars of every
    instrument, F] with instrument i's bar 0 at row inst_offset[i];
    X[b, k] = [feats[inst_offset[inst[b]] + bar[b] - K + 1 + k], ctx[b]]."""
    n = inst.shape[0]
    first = inst_offset[inst] + bar - (K - 1)  # [n]
    rows = first.unsqueeze(1) + torch.arange(K, device=feats.device)  # [n, K]
    return torch.cat([feats[rows], ctx.unsqueeze(1).expand(n, K, ctx.shape[1])], dim=-1)


def init_params(model, seed=1):
    """Weights as ssmtrade initialises them (model/params.h): U(+-1/sqrt(fan_in))
    for matrices and biases, 0.01 of that for the policy output, norms 1 / 0,
    embeddings U(+-1) / 0, dt_bias = softplus^-1(dt), dt log-uniform in
    [1e-3, 1e-1], A_log = log U[1, 16], Dskip = 1. The benchmark's times do
    not depend on the values; they only need to be finite and typical."""
    g = torch.Generator().manual_seed(seed)

    def uni(p, bound):
        with torch.no_grad():
            p.copy_((torch.rand(p.shape, generator=g, dtype=torch.float64) * 2 - 1) * bound)

    for name, p in model.named_parameters():
        with torch.no_grad():
            leaf = name.split(".")[-1]
            if name.endswith("norm.weight") or name.startswith("ln") or leaf in ("ln_w", "norm_w"):
                p.fill_(1.0) if leaf in ("weight", "ln_w", "norm_w") else p.zero_()
            elif leaf in ("ln_b",) or name.endswith("norm.bias"):
                p.zero_()
            elif leaf == "embed_w":
                uni(p, 1.0)
            elif leaf == "embed_b":
                p.zero_()
            elif leaf == "A_log":
                p.copy_(torch.log(1 + 15 * torch.rand(p.shape, generator=g, dtype=torch.float64)))
            elif leaf == "dt_bias":
                dt = torch.exp(math.log(1e-3) + torch.rand(p.shape, generator=g, dtype=torch.float64) *
                               (math.log(1e-1) - math.log(1e-3)))
                p.copy_(dt + torch.log(-torch.expm1(-dt)))
            elif leaf == "Dskip":
                p.fill_(1.0)
            elif leaf in ("conv_w", "conv_b"):
                uni(p, 1 / math.sqrt(model.d["W"]))
            elif leaf.endswith("_w") or leaf.endswith("_b"):  # vsn.var stacked [F, out, in] / [F, out]
                uni(p, 1 / math.sqrt(model.d["Dv"]))
            else:  # nn.Linear weight [out, in] and bias: fan_in of the layer
                mod = model.get_submodule(name.rsplit(".", 1)[0])
                bound = 1 / math.sqrt(mod.in_features)
                uni(p, bound * (0.01 if name.startswith("pi2.") else 1.0))
    return model


def decay_groups(model, weight_decay):
    """AdamW parameter groups as ssmtrade's table: decay on matrices only
    (not norms, biases, A_log, dt_bias, Dskip)."""
    decay, other = [], []
    for name, p in model.named_parameters():
        leaf = name.split(".")[-1]
        is_matrix = (leaf == "weight" and p.dim() == 2) or leaf in ("embed_w", "fc1_w", "fc2_w", "glu_w", "conv_w")
        (decay if is_matrix else other).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": other, "weight_decay": 0.0}]


# ---------------------------------------------------------------- --check


def _rel(a, b):
    num = torch.linalg.vector_norm((a - b).double()).item()
    den = torch.linalg.vector_norm(b.double()).item()
    return num / den if den > 0 else num


def _randomise(model, gen):
    """Every parameter random and non-zero (the reference's own init leaves
    the stacked and Mamba2 tensors at zero, which would hide mistakes)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            leaf = name.split(".")[-1]
            r = torch.randn(p.shape, generator=gen, dtype=torch.float64)
            if leaf == "A_log":
                p.copy_(torch.log(1 + 15 * torch.rand(p.shape, generator=gen, dtype=torch.float64)))
            elif leaf == "dt_bias":
                p.copy_(-4 + 2 * torch.rand(p.shape, generator=gen, dtype=torch.float64))
            elif (p.dim() == 1 and leaf in ("weight", "Dskip")) or leaf in ("ln_w", "norm_w"):
                p.copy_(1 + 0.2 * r)
            else:
                fan = p.shape[-1] if p.dim() >= 2 else 4
                p.copy_(r / math.sqrt(fan))


def check_one(name, d, n, seed, device):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
    import torch_reference as ref  # noqa: E402

    gen = torch.Generator().manual_seed(seed)
    refm = ref.SsmTradeModel(d)
    _randomise(refm, gen)
    fast = FastModel(d).double()
    fast.load_state_dict(refm.state_dict(), strict=True)  # same names, both ways
    refm, fast = refm.to(device), fast.to(device)
    K, F, C, A = d["K"], d["F"], d["C"], d["A"]
    X0 = torch.randn(n, K, F + C, generator=gen, dtype=torch.float64)
    action = torch.randint(0, A, (n,), generator=gen)
    adv = torch.randn(n, generator=gen, dtype=torch.float64)
    ret = torch.randn(n, generator=gen, dtype=torch.float64)
    noise_lp = 0.5 * torch.randn(n, generator=gen, dtype=torch.float64)
    noise_v = 0.5 * torch.randn(n, generator=gen, dtype=torch.float64)
    with torch.no_grad():  # old log-probs and values near the current ones: both clip regimes occur
        lg, vv = refm(X0.to(device))
        old_logp = (torch.log_softmax(lg, -1).gather(1, action.to(device).unsqueeze(1)).squeeze(1) +
                    noise_lp.to(device))
        old_value = vv + noise_v.to(device)
    coefs = dict(clip=0.2, vclip=0.2, vf_coef=0.5, ent_coef=0.05)
    out = {}
    for tag, model, loss_fn in (("ref", refm, ref.ppo_loss), ("fast", fast, ppo_loss)):
        model.zero_grad(set_to_none=True)
        X = X0.to(device).clone().requires_grad_(True)
        logits, value = model(X)
        res = loss_fn(logits, value, action.to(device), old_logp, adv.to(device), old_value, ret.to(device), **coefs)
        loss = res[0] if isinstance(res, tuple) else res
        loss.backward()
        grads = {k: (p.grad if p.grad is not None else torch.zeros_like(p)) for k, p in model.named_parameters()}
        out[tag] = dict(logits=logits.detach(), value=value.detach(), loss=loss.detach().reshape(1), window=X.grad,
                        grads=grads)
    r, f = out["ref"], out["fast"]
    rows = [("logits", _rel(f["logits"], r["logits"])), ("value", _rel(f["value"], r["value"])),
            ("loss", _rel(f["loss"], r["loss"])), ("grad.window", _rel(f["window"], r["window"]))]
    rows += [("grad." + k, _rel(f["grads"][k], r["grads"][k])) for k in r["grads"]]
    params = sum(p.numel() for p in fast.parameters())
    print(f"\n== {name}: {n} windows, {params} parameters, {len(r['grads'])} tensors, {device}, float64")
    for k, e in rows:
        print(f"  {k:34s} rel err {e:.2e}")
    worst = max(e for _, e in rows)
    grad_worst = max(e for k, e in rows if k.startswith("grad."))
    print(f"-- {name}: max rel err logits {rows[0][1]:.2e}, value {rows[1][1]:.2e}, loss {rows[2][1]:.2e}, "
          f"gradients {grad_worst:.2e}")
    return worst, params


def check(device, bound=1e-10):
    torch.set_default_dtype(torch.float64)
    cases = [("default", DIMS["default"], 3), ("tiny", DIMS["tiny"], 4), ("odd (K=50, Q=16: padded chunk)",
                                                                            DIMS["odd"], 3)]
    grouped = dict(DIMS["odd"], G=2)  # H = 8 heads over 2 groups of B/C
    cases.append(("odd with G=2", grouped, 2))
    worst_all = 0.0
    for name, d, n in cases:
        worst, params = check_one(name, d, n, 7, device)
        if name == "default" and params != 551100:
            print(f"FAIL: the default preset has {params} parameters, expected 551,100")
            return 1
        worst_all = max(worst_all, worst)
    ok = worst_all <= bound  # NaN fails
    print(f"\nSUMMARY: fast PyTorch model vs scripts/torch_reference.py, float64: worst rel err {worst_all:.2e} "
          f"(bound {bound:.0e}) {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="float64 parity with scripts/torch_reference.py")
    ap.add_argument("--device", default="cpu", help="device of the check (cpu or cuda)")
    a = ap.parse_args()
    if not a.check:
        ap.print_help()
        return 0
    print(f"torch {torch.__version__}")
    return check(torch.device(a.device))


if __name__ == "__main__":
    sys.exit(main())
