#!/usr/bin/env python3
"""kernel_roofline.py: a roofline table of one training step, kernel by kernel
(issue 7): FLOPs and DRAM bytes of each of our kernels counted by hand from
the model's sizes, against the times Nsight Compute measured and the card's
ceilings (copy bandwidth, fp32 sgemm) measured by ``ssmtrade bench`` in the
same run. bench/NOTES.md keeps the two floors (compute, memory) per kernel.

Input: the ncu CSV of ONE call of the training benchmark, e.g. (gpu-check.sh's
``profile`` stage)

    ncu --clock-control none --metrics gpu__time_duration.sum --csv \\
        --launch-count 700 build-gpu/ssmtrade bench --what train --windows 2048 \\
        --precision fp32 --repeats 1 --warmup 0 --sets 1 > ncu.csv
    python3 bench/kernel_roofline.py ncu.csv [--ceilings ours.json] [--top 12]

or the table bench/ncu_summary.py printed from such a CSV:

    python3 bench/kernel_roofline.py --summary profile.txt --steps 2
    python3 bench/kernel_roofline.py --selftest

One call of that benchmark runs the step twice (an eager step, then one
replay of its graph), so the capture holds about two steps; the per-step
figures divide by the number of steps, taken from --steps or else from
chunk_backward_kernel (once per Mamba2 layer per step). A capture cut by
--launch-count ends inside a step: kernels whose calls do not match their
count per step are flagged and counted as the first calls of a step, in
the order the step runs them. The capture starts with the program, so the
whole-step line (and "the rest") also holds the setup's few kernels.

Ceilings: --ceilings FILE (``ssmtrade bench --json``: ceilings.copy.GBps,
ceilings.sgemm.TFLOPs, ceilings.gemm_fp32_fast_bf16.TFLOPs), else --copy-gbps
and --fp32-tflops (defaults: the H200 on 2026-12-01). Flags given
explicitly win over the file.

Counting rules (every function below follows them):
  FLOPs: the arithmetic the op needs, once: a multiply-add is 2, any other
    add, multiply, divide, exp, sqrt or select is 1; work a kernel repeats
    (a second pass that recomputes what it had) is not counted. Double and
    float count alike, though FP64 runs at half the FP32 rate on the H200
    (var_gate's statistics, var_gate_bwd, dlog, combine, the RMSNorm
    kernels, the column sums and the conv's parameter sums work in double: their
    compute floor is up to twice the one shown, still far below memory's).
  bytes: the minimum DRAM traffic of one call in float32: each input read
    once, each output written once (in place = read + write). Where the
    design reads something more than once from DRAM-sized buffers (B and C
    once per head of their group, a column tile re-reading its rows...)
    the note gives that larger count too.
  cuBLAS: names cannot tell the shapes, so every GEMM kernel (split-K
    reductions too) is one row, its FLOPs and bytes those of the step's
    products counted from their shapes (cublas_products).
  ncu times are serialised, caches flushed between kernels: an upper
    bound on each kernel's time inside the graph.

Columns: calls and ms a step; FLOP and bytes a call (the whole-step line:
a step); the floors of a step's calls (FLOPs / fp32 ceiling, bytes / copy
ceiling); achieved TFLOP/s and GB/s; GB/s as % of the copy ceiling; x
floor = the time over the larger floor; binds = the larger floor.

Hand-checked numbers (the default preset at 2,048 windows: rows R =
131,072, F = 40, Dv = 32, P = F Dv = 1,280; the self-test asserts them):
  var_gate_kernel: reads glu [R, 2P], s [R, F]; writes glu [R, 2P],
    x [R, P], mean, rstd [R, F]; plus glu_b, ew, eb (4P):
    4 (R (5P + 3F) + 4P) = 4 (131,072 x 6,520 + 5,120) = 3,418,378,240 B
    (3.4 GB); FLOPs 13 R P + 5 R F = 2,207,252,480.
  rank1_kernel: reads s [R, F], U, V [P]; writes h1 [R, P]:
    4 (R (P + F) + 2P) = 692,070,400 B.
  scale2_kernel: reads s [R, F], dh1, dx [R, P]; writes [R, 2P]:
    4 R (4P + F) = 2,705,326,080 B.
  conv_forward_tile_kernel (Ch = 384, W = 4): reads x [R, Ch], w, b; writes
    y [R, Ch]: 4 (2 R Ch + 5 Ch) = 402,660,864 B.
  chunk_backward_kernel (Bsz = 2,048, H = 8, headdim 32, N = 64, G = 1,
    nc = 2): 4 x 320,962,576 = 1,283,850,304 B.
  in_proj forward (cuBLAS): 2 R D (2 d_inner + 2 G N + H) = 2 x 131,072 x
    128 x 648 = 21,743,271,936 FLOPs.
"""
import argparse
import csv
import io
import json
import math
import re
import sys
from collections import defaultdict

from compare import fmt_num  # bench/compare.py: the same SI formatting

DEFAULT_COPY_GBPS = 4257.8  # H200, 2026-12-01: device copy, bytes read + written
DEFAULT_FP32_TFLOPS = 51.3  # H200, 2026-12-01: cuBLAS sgemm 8192^3, no TF32
STEP_MARKER = "chunk_backward_kernel"  # once per Mamba2 layer per step

# src/core/config.c, st_dims_preset (T is not needed here).
PRESETS = {
    "tiny": dict(B=32, K=32, F=40, C=16, Dv=8, D=32, L=1, expand=2, headdim=16, N=16, G=1, W=4, Q=16, Hh=32, A=3),
    "default": dict(B=128, K=64, F=40, C=16, Dv=32, D=128, L=2, expand=2, headdim=32, N=64, G=1, W=4, Q=32, Hh=128,
                    A=3),
    "large": dict(B=4096, K=128, F=40, C=16, Dv=64, D=256, L=4, expand=2, headdim=64, N=128, G=1, W=4, Q=64, Hh=256,
                  A=3),
    "odd": dict(B=3, K=50, F=37, C=11, Dv=5, D=96, L=2, expand=2, headdim=24, N=10, G=1, W=4, Q=16, Hh=20, A=3),
}


class Sizes:
    """The sizes one training step of `windows` windows works on, named as
    in DESIGN (and derived as src/core/config.h derives them)."""

    def __init__(self, preset, windows):
        d = PRESETS[preset]
        self.__dict__.update(d)
        self.Bsz = windows  # windows of the step (the SSD's batch)
        self.R = windows * d["K"]  # window rows
        self.Pv = d["F"] * d["Dv"]  # the VSN's [rows, F Dv] width
        self.Hs = min(d["Dv"], d["F"])
        self.di = d["expand"] * d["D"]  # d_inner
        self.P = d["headdim"]
        self.H = self.di // self.P
        self.conv = self.di + 2 * d["G"] * d["N"]  # conv_dim
        self.io = 2 * self.di + 2 * d["G"] * d["N"] + self.H  # in_proj_out
        self.Qe = max(1, min(d["Q"], d["K"]))  # ssd.cu's clamp_q
        self.nc = -(-d["K"] // self.Qe)
        self.chunks = [min(self.Qe, d["K"] - c * self.Qe) for c in range(self.nc)]


class Cost:
    """One call: FLOPs, minimum bytes, and the bytes its design moves when
    it re-reads something (None when that is the minimum)."""

    def __init__(self, flops, nbytes, design=None):
        self.flops, self.bytes, self.design = float(flops), float(nbytes), design


F4 = 4  # bytes of a float32


# ---- the VSN (src/model/vsn.cu, vsn_fold.cu) ---------------------------------


def var_gate(z):
    """vsn.cu var_gate_kernel (a warp per 4 (row, variable) items): reads glu
    [R, 2P] and s [R, F] (wk.s), glu_b (fo.Vg, 2P), embed_w, embed_b (P
    each); writes glu [R, 2P] in place ([g1; sigma(g2)]), x [R, P], mean,
    rstd [R, F]. Per value: 2 bias adds, sigmoid 3, x = s ew + eb + g1 sg 4,
    the mean's add 1, the variance's sub + multiply-add 3; per item 5."""
    R, P, F = z.R, z.Pv, z.F
    return Cost(13 * R * P + 5 * R * F, F4 * (R * (5 * P + 3 * F) + 4 * P))


def var_gate_bwd(z):
    """vsn.cu var_gate_bwd_kernel: reads x [R, P], mean, rstd, alpha [R, F],
    dv [R, Dv] (the VSN output's gradient, read by the F items of a row:
    from cache), glu [R, 2P], var_ln_w [P]; writes dE (wk.dx) [R, P], glu
    [R, 2P] (dgl, in place), x [R, P] (pw, in place). Per value 17 (the
    norm's backward in double, the gate's), per item 2."""
    R, P, F, Dv = z.R, z.Pv, z.F, z.Dv
    return Cost(17 * R * P + 2 * R * F, F4 * (R * (7 * P + 3 * F + Dv) + P))


def dlog(z):
    """vsn.cu dlog_kernel (a warp per row, the F variables in turn): reads x
    [R, P], mean, rstd, alpha [R, F], dv [R, Dv], var_ln_w, var_ln_b [P];
    writes dlog [R, F] (the training step passes no dalpha). Per value t_j =
    xhat w + b 4 and dv . t_j 2 (in double); per item 4."""
    R, P, F, Dv = z.R, z.Pv, z.F, z.Dv
    return Cost(6 * R * P + 4 * R * F, F4 * (R * (P + 4 * F + Dv) + 2 * P))


def combine(z):
    """vsn.cu combine_kernel (a thread per (row, k), the F variables summed
    in order, in double): reads x [R, P], mean, rstd, alpha [R, F],
    var_ln_w, var_ln_b [P]; writes v [R, Dv]. Per value t_j 4, alpha_j t_j
    summed 2."""
    R, P, F, Dv = z.R, z.Pv, z.F, z.Dv
    return Cost(6 * R * P, F4 * (R * (P + 3 * F + Dv) + 2 * P))


def rank1(z):
    """vsn_fold.cu rank1_kernel: h1 = ELU(s_j U + V), the folded embedding
    and fc1: reads s [R, F], U, V [P]; writes h1 [R, P]. Per value a
    multiply-add and the ELU."""
    R, P, F = z.R, z.Pv, z.F
    return Cost(3 * R * P, F4 * (R * (P + F) + 2 * P))


def scale2(z):
    """vsn_fold.cu scale2_kernel: [s_j dh1 | s_j dx] for the folded column
    sums: reads s [R, F], dh1, dx [R, P]; writes terms [R, 2P]."""
    R, P, F = z.R, z.Pv, z.F
    return Cost(2 * R * P, F4 * R * (4 * P + F))


def elu_bwd(z, n):
    """vsn.cu elu_bwd_kernel over [R, n]: reads h and d, writes d."""
    return Cost(2 * z.R * n, F4 * 3 * z.R * n)


def softmax(z):
    """vsn.cu softmax_kernel (a thread per row): reads the logits [R, F];
    writes alpha twice (the saved copy and the model's [R, F]). Per value
    the max, sub, exp, sum, divide."""
    return Cost(5 * z.R * z.F, F4 * 3 * z.R * z.F)


# ---- the Mamba2 block's element-wise ops (conv1d.cu, rmsnorm_gated.cu) -----


def conv_forward(z):
    """conv1d.cu conv_forward_tile_kernel (a thread per (16-row tile of a
    window, 4 channels), the last W inputs in registers): reads x (zx's xBC
    columns, [R, Ch] at stride in_proj_out; each value once, plus the W-1
    rows of history before each tile, from cache), w [Ch, W], b; writes
    xBC [R, Ch]. Per value W multiply-adds and SiLU (4)."""
    R, Ch, W = z.R, z.conv, z.W
    return Cost((2 * W + 4) * R * Ch, F4 * (2 * R * Ch + Ch * (W + 1)))


def rowsplit_splits(rows, cols):
    """linear.cu st_cuda_rowsplit_plan: row ranges of a column reduction."""
    s = min(rows // 1024, 64, (1 << 20) // max(cols, 1))
    return s if s > 1 else 1


def conv_groups(z):
    """conv1d.cu tiles_of: the parameter partials' groups of tiles (16-row
    tiles, 8 lanes a block, L tiles a lane so that a group covers ~256 rows)."""
    tile = min(z.K, 16)
    tiles = z.Bsz * -(-z.K // 16)
    per = 8 * -(-256 // (8 * tile))
    return -(-tiles // per)


def conv_backward(z):
    """conv1d.cu conv_backward_tile_kernel (a thread per (16-row tile, 2
    channels)): g = dy SiLU'(pre) with pre formed again from x, dx from the
    last W values of g, and the W + 1 parameter sums of the tile's rows in
    double, in one pass: reads x (xBC columns of zx) and dy (d_xBC) [R, Ch],
    w, b; writes dx (d_zx's xBC columns) [R, Ch] and the double partials
    [groups, Ch (W + 1)]. The W-1 rows past each tile are read and their g
    formed again (a halo, from cache). Per value W multiply-adds, sigmoid
    3, SiLU' 4, 1; dx W multiply-adds; the sums W multiply-adds and 1."""
    R, Ch, W = z.R, z.conv, z.W
    parts = 8 * conv_groups(z) * Ch * (W + 1)
    return Cost((6 * W + 9) * R * Ch, F4 * (3 * R * Ch + Ch * (W + 1)) + parts)


def conv_params_finish(z):
    """conv1d.cu conv_params_finish_kernel: reads the partials [groups,
    Ch (W + 1)] (double), adds them in order into dw, db (read + write)."""
    Ch, W = z.conv, z.W
    g = conv_groups(z)
    return Cost(g * Ch * (W + 1), 8 * g * Ch * (W + 1) + F4 * 2 * Ch * (W + 1))


def rms_forward(z):
    """rmsnorm_gated.cu rms_forward_kernel (a warp per row): reads y [R, di]
    and z (zx's first di columns), norm_w; writes gated [R, di], rstd [R].
    Per value SiLU 4, y SiLU(z) 1, the square summed 2 (double), the scale 2.
    The second pass reads y and z again (from L1: a row is 2 KB)."""
    R, n = z.R, z.di
    return Cost(9 * R * n + 4 * R, F4 * (3 * R * n + R + n))


def rms_backward(z):
    """rmsnorm_gated.cu rms_backward_kernel (a warp per row): reads y, z,
    dout (d_gated) [R, di], rstd [R], norm_w; writes dy (d_ssd_y) and dz
    (d_zx's z columns) [R, di]. Per value 19, in double."""
    R, n = z.R, z.di
    return Cost(19 * R * n + R, F4 * (5 * R * n + R + n))


def rms_grad_w(z):
    """rmsnorm_gated.cu rms_grad_w_kernel: reads y, z, dout [R, di], rstd;
    writes the partials [splits, di] in double."""
    R, n = z.R, z.di
    return Cost(8 * R * n, F4 * (3 * R * n + R) + 8 * rowsplit_splits(R, n) * n)


def colsum_calls(z):
    """linear.cu colsum_part_kernel, one call per st_cuda_colsum_add: each
    reads its [rows, cols] once (double sums) and writes [splits, cols]
    partials. The calls of a step in the order the backward makes them:
    the heads' biases (A, Hh, 1, Hh over the windows), dt_bias of each
    layer (H columns of d_zx), w_in's bias (D); the per-variable GRNs
    (var_ln_w P, the glu's 2P, fc2_b P, the folded Q | Sx 2P, q P, X P);
    the selection GRN (norm w, b, the skip's gk: F each; glu_b 2F, fc2_b
    Hs, fc1's gs Hs)."""
    R, n, P, F, Hs = z.R, z.Bsz, z.Pv, z.F, z.Hs
    shapes = [(n, c) for c in (z.A, z.Hh, 1, z.Hh)]
    shapes += [(R, z.H)] * z.L + [(R, z.D)]
    shapes += [(R, c) for c in (P, 2 * P, P, 2 * P, P, P)]
    shapes += [(R, c) for c in (F, F, F, 2 * F, Hs, Hs)]
    calls = []
    for rows, cols in shapes:
        s = rowsplit_splits(rows, cols)
        calls.append(Cost(rows * cols, F4 * rows * cols + (8 * s * cols if s > 1 else F4 * cols)))
    return calls


# ---- the SSD (src/model/ssd.cu) -------------------------------------------
#
# Blocks of (window, head, chunk); L rows in the chunk, T = L (L + 1) / 2
# lower-triangle pairs (s <= t). The decays' exponents are segment sums
# taken directly (segment(t, s) adds t - s values): that is the design
# (no differences of cumulative sums), so those adds count. At nc <= 8
# chunks (and shared memory to stage the rows) no state pass runs: each
# chunk forms its boundary state from the other chunks' own states.


SMEM_OPTIN = 232448  # H100 / H200: opt-in shared memory per block


def ssd_fused(z):
    """Whether the chunk kernels stage their rows and form the boundary
    states themselves (ssd.cu: fwd_smem_bytes / bwd_smem_bytes within the
    opt-in limit, nc <= SSD_FUSE_MAX_CHUNKS = 8): the path counted here.
    Otherwise state_pass_kernel runs, which nothing here models."""
    Q, P, N = z.Qe, z.P, z.N

    def stage(want_c, want_dy, states):
        return Q * ((P + 1) * (1 + want_dy) + (N + 1) * (1 + want_c)) + states * P * (N + 1)

    fwd = 8 * 3 * Q + 4 * (Q * Q + stage(1, 0, 1))
    bwd = 8 * (7 * Q + 256) + 4 * (2 * Q * N + 3 * Q * Q + stage(1, 1, 2))
    return max(fwd, bwd) <= SMEM_OPTIN and z.nc <= 8


def tri(L):
    return L * (L + 1) // 2


def seg_adds(L):
    """Adds of segment(t, s) over every s <= t < L: sum of (t - s)."""
    return (L - 1) * L * (L + 1) // 6


def summary_chunk_flops(z, L, grad):
    """One chunk of chunk_summary_kernel: a_i, w_i (segment, exp, times dt),
    the total decay, S = X^T diag(w) B (2 P N L, with w applied to B's rows
    once: the kernel multiplies inside the loop, 3 P N L as written); with
    grad also e_i and U = dY^T diag(e) C."""
    P, N = z.P, z.N
    f = L + L * (L - 1) // 2 + 2 * L + (L + 1) + 2 * P * N * L + L * N
    if grad:
        f += tri(L) + L + 2 * P * N * L + L * N
    return f


def chunk_summary(z, grad):
    """ssd.cu chunk_summary_kernel, one call (all blocks). Reads x (xBC's x
    columns, [R, H P]), B [R, G N], dt [R, H], A [H]; with grad also dy
    (d_ssd_y) [R, H P] and C [R, G N]. Writes states [Bsz H nc, P N] and
    decay [Bsz H nc]; with grad also dstates. B (and C) are read by each
    of the H / G heads of their group: design traffic + 4 R G N (H/G - 1)
    each."""
    R, H, P, GN = z.R, z.H, z.P, z.G * z.N
    k = 2 if grad else 1
    blocks = z.Bsz * H
    reads = R * (k * H * P + k * GN + H) + H
    writes = blocks * z.nc * (k * P * z.N + 1)
    flops = blocks * sum(summary_chunk_flops(z, L, grad) for L in z.chunks)
    extra = F4 * k * R * GN * (H // z.G - 1)
    return Cost(flops, F4 * (reads + writes), F4 * (reads + writes) + extra)


def forward_chunk_flops(z, L, c):
    """One chunk of chunk_forward_kernel: a_i; M = (C B^T) o Lm o dt (2N + 3
    a pair, plus the segment sums); Y = M X (2 P T) + D X (2 L P); for
    c > 0 also e_i, S_in formed from the chunks before (2 (c-1) P N) and
    diag(e) C S_in^T ((2N + 2) L P)."""
    P, N = z.P, z.N
    f = L + tri(L) * (2 * N + 3) + seg_adds(L) + 2 * P * tri(L) + 2 * L * P
    if c > 0:
        f += tri(L) + L + 2 * (c - 1) * P * N + (2 * N + 2) * L * P
    return f


def chunk_forward(z):
    """ssd.cu chunk_forward_kernel, one call. Reads x [R, H P], B, C [R, G N],
    dt [R, H], A, D [H], the own states of chunks 0..nc-2 and their decays;
    writes y [R, H P]. Chunk c re-reads the c states before it (nc (nc-1)/2
    a (window, head) against nc - 1) and B, C once per head of the group."""
    R, H, P, N, GN, nc = z.R, z.H, z.P, z.N, z.G * z.N, z.nc
    bh = z.Bsz * H
    reads = R * (H * P + 2 * GN + H) + 2 * H + bh * (nc - 1) * (P * N + 1)
    writes = R * H * P
    flops = bh * sum(forward_chunk_flops(z, L, c) for c, L in enumerate(z.chunks))
    extra = 2 * R * GN * (H // z.G - 1) + bh * P * N * (nc * (nc - 1) // 2 - (nc - 1))
    return Cost(flops, F4 * (reads + writes), F4 * (reads + writes + extra))


def backward_chunk_flops(z, L, c):
    """One chunk of chunk_backward_kernel, its steps in order: boundary
    states (recurrences over the other chunks); bwd_products (e, last,
    and per pair Lm, C.B (2N), dY.X (2P)); bwd_intra (8 a pair);
    bwd_boundary (X dS_out, dY S_in: 2 P N L each, the rows' dw, de);
    bwd_prefix_rows; bwd_decay_grads (da, ddt, dD's dY o X); the block's
    sums; bwd_outputs (dX = M^T dY (2 P T) + the dS_out term + D dY; dC, dB
    from dG (2 N T each) + the boundary terms)."""
    P, N, nc = z.P, z.N, z.nc
    has_in, has_out = c > 0, c + 1 < nc
    T = tri(L)
    f = L
    f += 2 * max(c - 1, 0) * P * N + 2 * max(nc - 2 - c, 0) * P * N
    f += tri(L) + L + L * (L - 1) // 2 + L + T * (2 * N + 2 * P + 1) + seg_adds(L)
    f += 8 * T
    f += (has_in + has_out) * 2 * P * N * L + (2 * P * N if has_in and has_out else 0)
    f += has_out * L * (2 * N + 5) + has_in * L * 2 * N
    f += T + L
    f += T + 3 * L + 2 * L * P
    f += L + 256
    f += 2 * P * T + has_out * (2 * N + 3) * L * P + 2 * L * P
    f += 4 * N * T + has_in * 2 * L * N + has_out * 3 * L * N
    return f


def chunk_backward(z):
    """ssd.cu chunk_backward_kernel, one call. Reads x, dy [R, H P], B, C
    [R, G N], dt [R, H], A, D [H], the states entering chunks 1.., the
    gradients leaving chunks ..nc-2 (own states, dstates of the other
    chunks), the decays; writes dx (d_xBC's x columns) [R, H P], ddt [R, H],
    this head's dB and dC partials dBp, dCp [Bsz H, K N] each (H / G times
    the size of dB: reduce_group_kernel reads them back), the dA and dD
    partials [Bsz H nc]. Design: B, C once per head, states re-read as in
    chunk_forward."""
    R, H, P, N, GN, nc = z.R, z.H, z.P, z.N, z.G * z.N, z.nc
    bh = z.Bsz * H
    reads = R * (2 * H * P + 2 * GN + H) + 2 * H + 2 * bh * (nc - 1) * P * N + bh * nc
    writes = R * (H * P + H) + 2 * R * H * N + 2 * bh * nc
    flops = bh * sum(backward_chunk_flops(z, L, c) for c, L in enumerate(z.chunks))
    extra = 2 * R * GN * (H // z.G - 1) + 2 * bh * P * N * (nc * (nc - 1) // 2 - (nc - 1))
    return Cost(flops, F4 * (reads + writes), F4 * (reads + writes + extra))


def reduce_group(z):
    """ssd.cu reduce_group_kernel: dB, dC = the sums of the group's heads'
    partials: reads dBp, dCp [Bsz H, K N]; writes dB, dC (d_xBC's B and C
    columns) [R, G N]."""
    R, H, N, G = z.R, z.H, z.N, z.G
    return Cost(2 * R * H * N, F4 * (2 * R * H * N + 2 * R * G * N))


# ---- cuBLAS (src/model/linear.cu, through every op) -------------------------


def cublas_products(z):
    """Every st_cuda_gemm / st_cuda_gemm_batched of one step as (M, N, Kd,
    batch, beta != 0, calls): C[M, N] (+)= op(A)[M, Kd] op(B)[Kd, N]. In
    order: the VSN forward (the selection GRN's fc1 and skip over the folded
    weights, ctx, fc2, glu; the per-variable fc2 and glu, batched over the
    F variables, and again in the backward's recompute), w_in, the Mamba2
    blocks (in_proj, out_proj), the heads on each window's last row; then
    the backward: heads, blocks (dX and dW of out_proj and in_proj), w_in,
    the per-variable GRNs (ln_b, glu and fc2 dX batched, their dW one
    product per variable), the selection GRN (skip, glu, fc2, fc1, ctx)."""
    R, n, F, C, Dv, Hs, D, L = z.R, z.Bsz, z.F, z.C, z.Dv, z.Hs, z.D, z.L
    vcw, gw, Hh, A = Dv + C, D + C, z.Hh, z.A
    g = [(R, Hs, F, 1, 1, 1), (R, Hs, C, 1, 1, 1), (R, Hs, Hs, 1, 1, 1), (R, 2 * F, Hs, 1, 1, 1),
         (R, F, F, 1, 1, 1)]
    g += [(R, Dv, Dv, F, 0, 2), (R, 2 * Dv, Dv, F, 0, 2)]
    g += [(R, D, vcw, 1, 1, 1), (R, z.io, D, 1, 0, L), (R, D, z.di, 1, 1, L)]
    g += [(n, Hh, gw, 1, 1, 1), (n, A, Hh, 1, 1, 1), (n, Hh, gw, 1, 1, 1), (n, 1, Hh, 1, 1, 1)]
    g += [(n, Hh, A, 1, 0, 1), (A, Hh, n, 1, 1, 1), (n, gw, Hh, 1, 0, 1), (Hh, gw, n, 1, 1, 1),
          (n, Hh, 1, 1, 0, 1), (1, Hh, n, 1, 1, 1), (n, gw, Hh, 1, 1, 1), (Hh, gw, n, 1, 1, 1)]
    g += [(R, z.di, D, 1, 0, L), (D, z.di, R, 1, 1, L), (R, D, z.io, 1, 0, L), (z.io, D, R, 1, 1, L)]
    g += [(R, vcw, D, 1, 0, 1), (D, vcw, R, 1, 1, 1)]
    g += [(F, Dv, R, 1, 1, 1), (R, Dv, 2 * Dv, F, 0, 1), (2 * Dv, Dv, R, 1, 1, F), (R, Dv, Dv, F, 0, 1),
          (Dv, Dv, R, 1, 1, F)]
    g += [(F, F, R, 1, 0, 1), (R, Hs, 2 * F, 1, 0, 1), (2 * F, Hs, R, 1, 1, 1), (R, Hs, Hs, 1, 0, 1),
          (Hs, Hs, R, 1, 1, 1), (F, Hs, R, 1, 0, 1), (R, C, Hs, 1, 0, 1), (Hs, C, R, 1, 1, 1)]
    return [p for p in g if min(p[:3]) > 0]


def gemm_cost(M, N, Kd, batch, beta):
    """2 M N Kd a product; bytes: A and B read, C written (and read, beta)."""
    return Cost(2 * M * N * Kd * batch, F4 * batch * (M * Kd + Kd * N + M * N * (1 + beta)))


def cublas_step(z):
    calls = []
    for M, N, Kd, batch, beta, times in cublas_products(z):
        calls += [gemm_cost(M, N, Kd, batch, beta)] * times
    return calls


# ---- the step: each modelled kernel and its calls ----------------------------


def step_calls(z):
    """Kernel name -> (file, the Costs of its calls in one step in the order
    the step runs them, what its design re-reads). The VSN backward runs
    var_forward again (rank1, var_gate): twice a step; chunk_summary runs
    in the forward of each layer, then in the backward of each; elu_bwd
    for the per-variable GRNs, then the selection GRN."""
    L, sb = z.L, chunk_summary(z, True)
    bc = "B, C read once per head; states again at nc > 2"
    return {
        "chunk_backward_kernel": ("ssd.cu", [chunk_backward(z)] * L, bc),
        "chunk_summary_kernel": ("ssd.cu", [chunk_summary(z, False)] * L + [sb] * L, "B, C read once per head"),
        "chunk_forward_kernel": ("ssd.cu", [chunk_forward(z)] * L, bc),
        "reduce_group_kernel": ("ssd.cu", [reduce_group(z)] * L, ""),
        "var_gate_kernel": ("vsn.cu", [var_gate(z)] * 2, ""),
        "var_gate_bwd_kernel": ("vsn.cu", [var_gate_bwd(z)], ""),
        "dlog_kernel": ("vsn.cu", [dlog(z)], ""),
        "combine_kernel": ("vsn.cu", [combine(z)], ""),
        "elu_bwd_kernel": ("vsn.cu", [elu_bwd(z, z.Pv), elu_bwd(z, z.Hs)], ""),
        "softmax_kernel": ("vsn.cu", [softmax(z)], ""),
        "rank1_kernel": ("vsn_fold.cu", [rank1(z)] * 2, ""),
        "scale2_kernel": ("vsn_fold.cu", [scale2(z)], ""),
        "conv_forward_tile_kernel": ("conv1d.cu", [conv_forward(z)] * L, "history rows from cache"),
        "conv_backward_tile_kernel": ("conv1d.cu", [conv_backward(z)] * L, "halo rows from cache"),
        "conv_params_finish_kernel": ("conv1d.cu", [conv_params_finish(z)] * L, ""),
        "rms_backward_kernel": ("rmsnorm_gated.cu", [rms_backward(z)] * L, ""),
        "rms_forward_kernel": ("rmsnorm_gated.cu", [rms_forward(z)] * L, ""),
        "rms_grad_w_kernel": ("rmsnorm_gated.cu", [rms_grad_w(z)] * L, ""),
        "colsum_part_kernel": ("linear.cu", colsum_calls(z), ""),
    }


# ---- reading the profile -------------------------------------------------------

GEMM_WORDS = ("gemm", "xmma", "cutlass", "splitkreduce", "cublas", "gemv")


def display_name(full):
    """The kernel's name as ncu_summary.py shows it: the text before the
    first "(" of ncu's demangled signature."""
    return full.replace("(anonymous namespace)::", "").split("(")[0].strip()


def base_name(full):
    """The bare function name, to match our models: no return type, no
    namespace, no template arguments ("void var_gate_kernel<1>" ->
    "var_gate_kernel")."""
    s = display_name(full)
    s = s[5:] if s.startswith("void ") else s
    s = s.split("<")[0].strip()
    return s.split("::")[-1]


def is_gemm(name):
    low = name.lower()
    return any(w in low for w in GEMM_WORDS)


def time_us(value, unit):
    v = float(value.replace(",", ""))
    u = (unit or "nsecond").strip().lower()
    if u.startswith("n"):
        return v / 1000.0
    if u.startswith("u"):
        return v
    if u.startswith("m"):
        return v * 1000.0
    return v * 1e6  # seconds


class Profile:
    """Per kernel (display name): calls and total microseconds; plus the
    whole capture's launches and time (which a summary may know beyond the
    rows it lists)."""

    def __init__(self):
        self.calls, self.us = defaultdict(int), defaultdict(float)
        self.launches, self.total_us = 0, 0.0

    def add(self, name, calls, us):
        self.calls[name] += calls
        self.us[name] += us
        self.launches += calls
        self.total_us += us


def parse_ncu_csv(text):
    """ncu --csv output, any preamble before the table (the program's own
    output, ==PROF== lines) skipped; one row per launch and metric."""
    start = text.find('"ID"')
    if start < 0:
        raise ValueError("no ncu CSV table (no line starting with \"ID\"); a bench/ncu_summary.py table goes "
                         "with --summary")
    prof = Profile()
    for r in csv.DictReader(io.StringIO(text[start:])):
        if r.get("Metric Name") != "gpu__time_duration.sum" or not r.get("Metric Value"):
            continue
        prof.add(display_name(r.get("Kernel Name") or "?"), 1, time_us(r["Metric Value"], r.get("Metric Unit")))
    if not prof.calls:
        raise ValueError("the ncu CSV has no gpu__time_duration.sum rows")
    return prof


SUMMARY_TOTAL = re.compile(r"^\s*(\d+) kernel launches, ([0-9.]+) ms in all")


def parse_summary(text):
    """bench/ncu_summary.py's table: "kernel calls total_us mean_us share",
    the name everything before the last four columns; its first line gives
    the whole capture ("700 kernel launches, 116.17 ms in all"), which
    counts the kernels below the rows it printed too. Only the first table
    is read: gpu-check.sh's profile.txt has the action step's after it."""
    prof, whole = Profile(), None
    for line in text.splitlines():
        m = SUMMARY_TOTAL.match(line)
        if m and whole:
            break
        if m:
            whole = (int(m.group(1)), float(m.group(2)) * 1000.0)
            continue
        tok = line.split()
        if len(tok) < 5 or not tok[-1].endswith("%"):
            continue
        try:
            calls, total = int(tok[-4]), float(tok[-3])
            float(tok[-2]), float(tok[-1].rstrip("%"))
        except ValueError:
            continue  # the header line
        prof.add(" ".join(tok[:-4]), calls, total)
    if not prof.calls:
        raise ValueError("no kernel rows in the summary")
    if whole:
        prof.launches, prof.total_us = whole
    return prof


def infer_steps(prof, z):
    """Steps in the capture from chunk_backward_kernel's calls (L a step)."""
    calls = sum(c for n, c in prof.calls.items() if base_name(n) == STEP_MARKER)
    if calls == 0:
        return 1, f"no {STEP_MARKER} in the profile: 1 step assumed (give --steps)"
    steps = max(1, round(calls / z.L))
    note = f"{steps} steps, from {STEP_MARKER}: {calls} calls, {z.L} a step"
    if calls != steps * z.L:
        note += " (not a whole number of steps: rounded)"
    return steps, note


# ---- ceilings ------------------------------------------------------------------


def load_ceilings(args):
    """copy GB/s, fp32 TFLOP/s, bf16-fast TFLOP/s (or None), where from, and
    the JSON (or {})."""
    ours, src = {}, "defaults (H200, 2026-12-01)"
    if args.ceilings:
        with open(args.ceilings) as f:
            ours = json.load(f)
        src = args.ceilings
    c = ours.get("ceilings", {})
    copy = args.copy_gbps or c.get("copy", {}).get("GBps") or DEFAULT_COPY_GBPS
    fp32 = args.fp32_tflops or c.get("sgemm", {}).get("TFLOPs") or DEFAULT_FP32_TFLOPS
    bf16 = c.get("gemm_fp32_fast_bf16", {}).get("TFLOPs")
    return copy, fp32, bf16, src, ours


def graph_median_ms(ours, windows):
    """The bench's own median of the fp32 training step (graph replays)."""
    for row in ours.get("train", []) or []:
        if row.get("windows") == windows and row.get("precision") == "fp32" and "median_ms" in row:
            return row["median_ms"]
    return None


# ---- the table -------------------------------------------------------------------


def fmt_si(x, unit=""):
    return fmt_num(x, unit, sep=" ")


def fmt(x, spec):
    return "n/a" if x is None or not math.isfinite(x) else format(x, spec)


class Row:
    """One line of the table: per step the measured calls and ms and the
    counted FLOPs and bytes (None: not counted); per call = per step / calls."""

    def __init__(self, name, calls, ms, step_flops=None, step_bytes=None):
        self.name, self.calls, self.ms, self.step_f, self.step_b = name, calls, ms, step_flops, step_bytes
        self.per_call = True

    def floors(self, copy_gbps, fp32_tflops):
        """Compute and memory floors of the step's calls, ms (None: not counted)."""
        cf = self.step_f / (fp32_tflops * 1e9) if self.step_f is not None else None
        mf = self.step_b / (copy_gbps * 1e6) if self.step_b is not None else None
        return cf, mf

    def cells(self, copy_gbps, fp32_tflops):
        cf, mf = self.floors(copy_gbps, fp32_tflops)
        sec = self.ms * 1e-3
        def per(x):
            return x if not self.per_call else x / self.calls if x is not None and self.calls else None

        tf = self.step_f / sec / 1e12 if self.step_f is not None and sec > 0 else None
        gb = self.step_b / sec / 1e9 if self.step_b is not None and sec > 0 else None
        floor = max(cf, mf) if cf is not None and mf is not None else None
        binds = ("compute" if cf > mf else "memory") if floor is not None else "n/a"
        over = self.ms / floor if floor else None
        pct = 100.0 * gb / copy_gbps if gb is not None else None
        calls = f"{self.calls:.0f}" if abs(self.calls - round(self.calls)) < 1e-9 else f"{self.calls:.1f}"
        return [self.name, calls, fmt(self.ms, ".3f"), fmt_si(per(self.step_f)), fmt_si(per(self.step_b), "B"),
                fmt(cf, ".3f"), fmt(mf, ".3f"), fmt(tf, ".2f"), fmt(gb, ".0f"), fmt(pct, ".1f"), fmt(over, ".1f"),
                binds]


HEADER = ["kernel", "calls/step", "ms/step", "FLOP/call", "bytes/call", "compute floor ms", "memory floor ms",
          "TFLOP/s", "GB/s", "% copy", "x floor", "binds"]


def measured_cost(costs, calls):
    """FLOPs and bytes of `calls` calls of a kernel whose step runs `costs`
    in that order: whole steps, then the first calls of the step the
    capture ends in."""
    whole, rest = divmod(calls, len(costs))
    run = costs * whole + costs[:rest]
    return sum(c.flops for c in run), sum(c.bytes for c in run), sum(c.design or c.bytes for c in run)


def build_rows(prof, z, steps):
    """Our modelled kernels and the cuBLAS products (one row), ordered by
    time; the kernels nothing models (time only); notes on counts and
    re-reads."""
    model = step_calls(z)
    seen = defaultdict(lambda: [0, 0.0])
    gemm, other = [0, 0.0, set()], [0, 0.0, set()]
    for name in prof.calls:
        key = base_name(name)
        if key in model:
            seen[key][0] += prof.calls[name]
            seen[key][1] += prof.us[name]
        else:
            bucket = gemm if is_gemm(name) else other
            bucket[0] += prof.calls[name]
            bucket[1] += prof.us[name]
            bucket[2].add(name)
    rows, notes = [], []
    for key, (calls, us) in seen.items():
        fname, costs, note = model[key]
        f, b, d = measured_cost(costs, calls)
        rows.append(Row(key, calls / steps, us / 1000.0 / steps, f / steps, b / steps))
        if calls != steps * len(costs):
            notes.append(f"{key}: {calls} calls in {steps} steps, {len(costs)} a step expected (the capture "
                         f"ends inside a step): counted as the first calls of a step, in the order it runs them")
        if d > b:
            gbs = d / (us * 1e-6) / 1e9 if us > 0 else float("nan")
            notes.append(f"{key} ({fname}): the design reads {fmt_si(d / calls, 'B')} a call (minimum "
                         f"{fmt_si(b / calls, 'B')}; {note}): {gbs:.0f} GB/s at that count")
    cub = cublas_step(z)
    if gemm[0]:
        # the products of whole steps, however many kernels (split-K reductions too) ran them
        f, b = sum(c.flops for c in cub), sum(c.bytes for c in cub)
        rows.append(Row(f"cuBLAS products ({len(gemm[2])} names)", gemm[0] / steps, gemm[1] / 1000.0 / steps, f, b))
        if gemm[0] < steps * len(cub):
            notes.append(f"cuBLAS: {gemm[0]} kernels in {steps} steps, fewer than the {len(cub)} products a step: "
                         f"the capture misses some, so its rates are too high")
    rows.sort(key=lambda r: -r.ms)
    unlisted = (max(prof.launches - sum(prof.calls.values()), 0), max(prof.total_us - sum(prof.us.values()), 0.0))
    if other[2]:
        top = sorted(other[2], key=lambda n: -prof.us[n])[:5]
        notes.append(f"not modelled ({len(other[2])} names, in the rest): " + ", ".join(
            f"{n} {prof.us[n] / 1000.0 / steps:.3f} ms" for n in top) + (", ..." if len(other[2]) > 5 else ""))
    return rows, (other[0] + unlisted[0], other[1] + unlisted[1]), notes, cub


def render(prof, z, steps, steps_note, args, ceil):
    copy, fp32, bf16, src, ours = ceil
    rows, (rest_calls, rest_us), notes, cub = build_rows(prof, z, steps)
    shown = rows[: args.top] if args.top else rows
    hidden = rows[len(shown):]
    rest_calls += sum(r.calls for r in hidden) * steps
    rest_us += sum(r.ms for r in hidden) * 1000.0 * steps
    whole = Row("whole step (all kernels)", prof.launches / steps, prof.total_us / 1000.0 / steps,
                sum(r.step_f for r in rows), sum(r.step_b for r in rows))
    whole.per_call = False  # its FLOP and byte cells are the step's
    tail = Row("the rest (time only)" + (f", {len(hidden)} rows below --top" if hidden else ""), rest_calls / steps,
               rest_us / 1000.0 / steps)
    out = [f"Roofline of one training step: preset {args.preset}, {z.Bsz:,} windows ({z.R:,} rows), fp32; "
           f"{steps_note}.",
           f"Ceilings ({src}): copy {copy:.1f} GB/s (read + written), fp32 {fp32:.1f} TFLOP/s (sgemm, no TF32)"
           + (f", bf16 tensor cores {bf16:.1f} TFLOP/s" if bf16 else "") + ".", ""]
    out.append("| " + " | ".join(HEADER) + " |")
    out.append("|" + "---|" * len(HEADER))
    for r in [whole] + shown + [tail]:
        out.append("| " + " | ".join(r.cells(copy, fp32)) + " |")
    floors = sum(max(r.floors(copy, fp32)) for r in rows)
    out += ["", f"Whole step: FLOP and bytes a step, those of the modelled rows (the rest not counted); each "
                f"modelled row at its own floor: {floors:.2f} ms a step, against {whole.ms:.2f} ms measured "
                f"(ncu, serialised). x floor: the time over the larger floor."]
    graph = graph_median_ms(ours, z.Bsz)
    if graph:
        out.append(f"The bench's own median of the step (graph replays, same JSON): {graph:.2f} ms.")
    out.append(f"cuBLAS products: {len(cub)} a step, FLOPs and bytes counted from their shapes "
               f"({fmt_si(sum(c.flops for c in cub), 'FLOP')} a step); calls/step counts their kernels, split-K "
               f"reductions included.")
    tfw = ours.get("train_flops_per_window")
    if tfw:
        out.append(f"The bench's hand count of the step (train_flops_per_window x windows: every product, the "
                   f"SSD's and the VSN's own too, no element-wise work): {fmt_si(tfw * z.Bsz, 'FLOP')}.")
    if args.summary:
        out.append("From a summary: the kernels below its printed rows are in the rest (cuBLAS ones too).")
    slow = [r.name for r in rows if r.step_f is not None and r.ms > 4 * max(r.floors(copy, fp32))]
    if slow:
        out.append(f"More than 4x over both floors (latency, occupancy or re-reads, not a ceiling): "
                   f"{', '.join(slow)}.")
    if not ssd_fused(z):
        out.append("SSD: at these sizes the chunk kernels do not stage their rows (or nc > 8) and a state pass "
                   "runs; their counts assume the staged path.")
    out.append("Kernels that mostly read can pass the copy rate (it counts a read and a write of every byte).")
    out.append("Notes:")
    out += [f"- {n}" for n in notes]
    return "\n".join(out)


# ---- self-test -------------------------------------------------------------------

NCU_COLUMNS = ("ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
               "Grid Size", "Device", "CC", "Section Name", "Metric Name", "Metric Unit", "Metric Value")


def ncu_line(i, kernel, unit, value):
    """One launch as ncu --csv writes it (every field quoted)."""
    cells = (str(i), "1", "ssmtrade", "h", kernel, "1", "7", "(256, 1, 1)", "(32768, 1, 1)", "0", "9.0",
             "Command line profiler metrics", "gpu__time_duration.sum", unit, value)
    return ",".join(f'"{c}"' for c in cells)


CB = "chunk_backward_kernel(ssd_dev_args, const float *, float *)"
SAMPLE_CSV = "\n".join(
    ["==PROF== Connected to process 1234", "== train: the program's own output comes first",
     ",".join(f'"{c}"' for c in NCU_COLUMNS),
     ncu_line(0, "void var_gate_kernel<1>(int, int, int, const float *, vsn_var)", "usecond", "2,175.50"),
     ncu_line(1, CB, "msecond", "5.5"), ncu_line(2, CB, "msecond", "5.7"),
     ncu_line(3, "void cutlass::Kernel2<cutlass_80_simt_sgemm_64x64_8x5_nt_align1>(T1::Params)", "nsecond", "32,900"),
     ncu_line(4, CB, "msecond", "5.6"), ncu_line(5, CB, "msecond", "5.8")]) + "\n"

SAMPLE_SUMMARY = """700 kernel launches, 116.17 ms in all
kernel                                                                    calls   total us   mean us  share
chunk_backward_kernel                                                         4    22632.1    5658.0  19.5%
void var_gate_kernel<1>                                                       4     8701.9    2175.5   7.5%
var_gate_bwd_kernel                                                           2     6426.0    3213.0   5.5%
void cublasLt::splitKreduce_kernel<32, 16, int, float, float, float, f      183     2043.8      11.2   1.8%
"""


class Tiny:
    """Sizes of the self-test's one small chunk."""
    P, N, nc = 1, 1, 1


def selftest():
    z = Sizes("default", 2048)
    checks = [
        ("rows", z.R, 131072), ("d_inner, heads, conv_dim, in_proj_out", (z.di, z.H, z.conv, z.io), (256, 8, 384, 648)),
        ("chunks", z.chunks, [32, 32]),
        ("var_gate bytes", var_gate(z).bytes, 3_418_378_240), ("var_gate FLOPs", var_gate(z).flops, 2_207_252_480),
        ("rank1 bytes", rank1(z).bytes, 692_070_400), ("scale2 bytes", scale2(z).bytes, 2_705_326_080),
        ("conv_forward bytes", conv_forward(z).bytes, 402_660_864),
        ("chunk_backward bytes", chunk_backward(z).bytes, 1_283_850_304),
        ("in_proj forward FLOPs", gemm_cost(z.R, z.io, z.D, 1, 0).flops, 21_743_271_936),
        ("cuBLAS products a step", len(cublas_step(z)), 127),
        ("colsum calls a step", len(colsum_calls(z)), 19),
        ("SSD staged and fused: default yes, large no", (ssd_fused(z), ssd_fused(Sizes("large", 64))), (True, False)),
        # a chunk of L = 2, P = N = 1 (c = 0): a 2, M 3 x 5 + 1 segment add, Y 2 x 3, D X 4
        ("chunk_forward one small chunk", forward_chunk_flops(Tiny(), 2, 0), 28),
    ]
    prof = parse_ncu_csv(SAMPLE_CSV)
    checks += [
        ("CSV kernels", sorted(base_name(n) for n in prof.calls),
         ["Kernel2", "chunk_backward_kernel", "var_gate_kernel"]),
        ("CSV templated name", base_name("void var_gate_kernel<1>"), "var_gate_kernel"),
        ("CSV units (us, ms, ns)", round(prof.us["void var_gate_kernel<1>"] + prof.us["chunk_backward_kernel"], 3),
         2175.5 + 22600.0),
        ("CSV gemm", is_gemm("void cutlass::Kernel2<cutlass_80_simt_sgemm_64x64_8x5_nt_align1>"), True),
        ("CSV steps", infer_steps(prof, z)[0], 2),
    ]
    summ = parse_summary(SAMPLE_SUMMARY)
    checks += [
        ("summary rows", summ.calls["void cublasLt::splitKreduce_kernel<32, 16, int, float, float, float, f"], 183),
        ("summary whole capture", (summ.launches, round(summ.total_us, 1)), (700, 116170.0)),
        ("summary untemplated name", base_name("var_gate_bwd_kernel"), "var_gate_bwd_kernel"),
        ("summary steps", infer_steps(summ, z)[0], 2),
        ("summary: the first table only", parse_summary(SAMPLE_SUMMARY + SAMPLE_SUMMARY).launches, 700),
    ]
    failed = 0
    for what, got, want in checks:
        ok = got == want
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {what}: {got}" + ("" if ok else f" (want {want})"))
    print(f"{len(checks) - failed} of {len(checks)} checks passed")
    return 1 if failed else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", nargs="?", help="ncu --csv output of the training benchmark")
    ap.add_argument("--summary", help="bench/ncu_summary.py's table instead of the CSV")
    ap.add_argument("--ceilings", help="ssmtrade bench --json output (ceilings, train rows)")
    ap.add_argument("--copy-gbps", type=float, help=f"copy ceiling, GB/s (default {DEFAULT_COPY_GBPS})")
    ap.add_argument("--fp32-tflops", type=float, help=f"fp32 ceiling, TFLOP/s (default {DEFAULT_FP32_TFLOPS})")
    ap.add_argument("--preset", default="default", choices=sorted(PRESETS))
    ap.add_argument("--windows", type=int, default=2048)
    ap.add_argument("--steps", type=int, help="training steps in the capture (default: inferred)")
    ap.add_argument("--top", type=int, default=0, help="kernel rows to show (default all)")
    ap.add_argument("--selftest", action="store_true")
    args = ap.parse_args()
    if args.selftest:
        return selftest()
    path = args.summary or args.csv
    if not path:
        ap.error("give the ncu CSV, or --summary FILE")
    try:
        with open(path, errors="replace") as f:
            text = f.read()
        prof = parse_summary(text) if args.summary else parse_ncu_csv(text)
        ceil = load_ceilings(args)
    except (OSError, ValueError) as e:
        print(f"kernel_roofline.py: {path}: {e}", file=sys.stderr)
        return 2
    z = Sizes(args.preset, args.windows)
    steps, note = (args.steps, f"{args.steps} steps (--steps)") if args.steps else infer_steps(prof, z)
    print(render(prof, z, steps, note, args, ceil))
    return 0


if __name__ == "__main__":
    sys.exit(main())
