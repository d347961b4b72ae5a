#!/usr/bin/env python3
"""kernel_roofline.py: a roofline table of one training step, kernel by kernel
(issue 7): FLOPs and DRAM bytes of each of our kernels counted by hand from
the model's sizes, against the times Nsight Compute measured and the card's
ceilings (copy bandwidth, fp32 sgemm, the tensor cores' GEMM) measured by
``ssmtrade bench`` in the same run. bench/NOTES.md keeps the two floors
(compute, memory) per kernel.

Input: the ncu CSV of ONE call of the training benchmark, e.g. (gpu-check.sh's
``profile`` stage)

    ncu --clock-control none --metrics gpu__time_duration.sum --csv \\
        --launch-count 700 build-gpu/ssmtrade bench --what train --windows 2048 \\
        --precision bf16 --repeats 1 --warmup 0 --sets 1 > ncu.csv
    python3 bench/kernel_roofline.py ncu.csv --precision bf16 [--ceilings ours.json]

or the table bench/ncu_summary.py printed from such a CSV:

    python3 bench/kernel_roofline.py --summary profile.txt --precision bf16
    python3 bench/kernel_roofline.py --selftest

--precision (fp32 | bf16) must be the run's: it picks the kernels the step
launches and the ceilings. ssd.cu's dispatch at the default preset: fp32
runs the CUDA-core scans (scan_forward_kernel<8> of ssd_scan.cu,
scan_backward_kernel<8, 0>), bf16 the TF32 tensor-core ones (scan_tc_pair_
kernel where a window is two whole chunks of a multiple of 16 rows, else
scan_tc_kernel; scan_backward_kernel<8, 1>); where the scans do not fit
(P N over 256 x 8 state elements for the backward: the large preset) the
chunk-parallel kernels of ssd.cu run (chunk_summary, chunk_backward;
chunk_forward where the forward scan does not fit either). Since
2026-12-03 bf16 mode takes a window of at most 64 rows as one chunk
(scan_quad_kernel, scan_quad_backward_kernel, no reduce_group) and fills
the VSN's table with vsn_fused_tc_kernel at Dv 16 and 32: --quad 0 and
--vsn-tc 0 read a profile of a run with those switched off (ssmtrade bench
--scan-quad 0 --scan-quad-backward 0, --vsn-tc 0).

One call of that benchmark runs the step twice (an eager step, then one
replay of its graph), so the capture holds about two steps; the per-step
figures divide by the number of steps, taken from --steps or else from the
SSD backward's kernel: scan_quad_backward_kernel, scan_backward_kernel
(or chunk_backward_kernel), once
a full Mamba2 block a step (L - 1 with the tail, L without), else
lr_backward_kernel (once a step with the tail: the marker where L = 1).
A capture cut by --launch-count ends inside a step: kernels whose
calls do not match their count per step are flagged and counted as the
first calls of a step, in the order the step runs them. The capture starts
with the program, so the whole-step line (and "the rest") also holds the
setup's few kernels.

The training bar table (src/model/vsn_train_table.cu, on under the default
auto rule when the expected distinct bars are at most 0.8 of the rows: as
st_cuda_model_train_table_wanted): the VSN's per-variable GRNs run once a
distinct bar of the minibatch, not once a row. --bars (default: 70,000 at
2,048 windows, the figure of bench/NOTES.md "second session" and
bench/notes-train-table.md; at other sizes scaled by that note's expected
distinct count of uniform windows, M (1 - e^{-rows / M}), M = --market-bars,
default 96,000: the bench market's bars, bench/NOTES.md change 21). The
formula alone gives 71,492 at 2,048 windows; 70,000 keeps the notes' figure.
No device count of the distinct bars was found in the notes: --bars is the
place to put one.

The last block's last-row tail (--tail 1, the default, as the build's:
src/model/model.cu st_cuda_model_set_last_row_tail; ``ssmtrade bench
--last-row-tail 0`` runs the old path, read it with --tail 0). The heads
read u_L at row K-1 of each window only, so block L-1 runs
st_cuda_mamba2_forward_last / _backward_last (mamba2.cu): its LayerNorm
(without the residual's copy), in_proj, conv and dt over every row (the
SSD reads x, B, dt of every row), then ssd_last_row.cu's lr_forward_kernel
in place of the forward scan, the gated RMSNorm (the same kernels, an rstd
stride), out_proj and the residual over the Bsz last rows only (a 2-D
cudaMemcpy of u's last rows into u_out: a copy, not a kernel ncu lists).
Backward: out_proj and the RMSNorm over the last rows, lr_backward_kernel
+ lr_reduce_kernel in place of the scan backward and reduce_group, conv,
dt and dt_bias's column sum over every row, in_proj's backward in two
products ([xBC, dt_raw] columns over every row, z over the last rows),
the LayerNorm backward without the residual and m2_add_rows_kernel adding
du_out at the last rows. So the scans, the chunk kernels and reduce_group
run L - 1 times a step; the tail is used where its backward's shared
memory fits (st_cuda_ssd_last_row_fits), as the model asks. The model
does not know which path a profile ran: where the lr_* kernels are in it
and --tail is 0, or missing with --tail 1, the notes say so first.

Ceilings: --ceilings FILE (``ssmtrade bench --json``: ceilings.copy.GBps,
ceilings.sgemm.TFLOPs, ceilings.gemm_fp32_fast_bf16.TFLOPs, and a
ceilings.gemm_tf32.TFLOPs if a build measures one), else --copy-gbps,
--fp32-tflops, --gemm-tflops, --tf32-tflops (defaults: the H200 on
2026-12-01; TF32: the H200's dense spec, 495 TFLOP/s, no measurement).
Flags given explicitly win over the file. In bf16 mode the cuBLAS products
are floored against the GEMM ceiling (32F_FAST_16BF: cuBLAS may pick TF32
kernels, as the profile's sm90_xmma_..._tf32f32 names show) and the scans'
TF32 WMMA tiles against the TF32 figure; everything else (the fused VSN
kernels' fp32 FMAs, the scans' element-wise double work) against fp32.

Counting rules (every function below follows them):
  FLOPs: the arithmetic the op needs, once: a multiply-add is 2, any other
    add, multiply, divide, exp, sqrt or select is 1; work a kernel repeats
    (a second pass that recomputes what it had, the scan backward's forward
    walk forming the decays again) is not counted. Double and float count
    alike, though FP64 runs at half the FP32 rate on the H200 (the norms'
    statistics, the combines, dlog, the column sums and the scans' decays
    work in double: their compute floor is up to twice the one shown, still
    far below memory's). A product's FLOPs are those of its triangle where
    only s <= t is needed; the TF32 tiles compute whole 16 x 16 tiles (not
    counted).
  bytes: the minimum DRAM traffic of one call in float32: each input read
    once, each output written once (in place = read + write). Where the
    design reads something more than once from DRAM-sized buffers (B and C
    once per head of their group, the scan backward's forward walk staging
    x and B again, a table row once a window row...) the note gives that
    larger count too.
  cuBLAS: names cannot tell the shapes, so every GEMM kernel (split-K
    reductions too) is one row, its FLOPs and bytes those of the step's
    products counted from their shapes (cublas_products).
  ncu times are serialised, caches flushed between kernels: an upper
    bound on each kernel's time inside the graph.

Columns: calls and ms a step; FLOP and bytes a call (the whole-step line:
a step); the floors of a step's calls (compute: FLOPs over their ceilings
as above; memory: bytes / copy ceiling); achieved TFLOP/s and GB/s; GB/s as
% of the copy ceiling; x floor = the time over the larger floor; binds =
the larger floor.

Hand-checked numbers (the default preset at 2,048 windows, bf16 and the
tail on unless said: rows R = 131,072, K = 64, F = 40, Dv = 32, P = F Dv =
1,280, H = 8 heads of headdim p = 32, N = 64, G = 1, Q = L = 32 (nc = 2),
T = L (L + 1) / 2 = 528 pairs, Bsz H = 16,384 blocks, nb = 70,000 bars, 2
Mamba2 blocks of which 1 runs in full; the self-test asserts them):
  The step's calls with the tail: the scans, reduce_group 1 a step (2
    without), lr_forward, lr_backward, lr_reduce and m2_add_rows 1, the
    gated RMSNorm's kernels 2 (one over R rows, one over the Bsz last
    rows), the LayerNorms 3, 4, 3 as before; cuBLAS products 43 (41
    without), the tail saving 5 x 2 (R - Bsz) D d_inner = 42,278,584,320
    FLOPs (out_proj forward, dX, dW; in_proj's z columns' dX, dW).
  lr_forward_kernel (ssd_last_row.cu), a block per window: per window L
    H K = 512 adds, q 2 G K N = 8,192, w 4 H K = 2,048, y (2K + 2) H p =
    33,280: 44,032, 90,177,536 a call. Bytes: reads x, B, dt of every row
    (R (H p + G N + H)), C of the last row and writes y there (Bsz (G N +
    H p)), A, D: 4 (42,991,616 + 655,360 + 16) = 174,587,968 B.
  lr_backward_kernel: per window 14 H K (L 1, w 3, dQ 2, dw / ww / ddt's
    term 3, the ddt walk 5) = 7,168, e and dx 4 H K p = 65,536, D dy 2 H
    p = 512, q, dB, dC 5 G K N = 20,480: 93,696, 191,889,408 a call.
    Bytes: reads x, B, dt of every row, C and dy of the last row, A, D;
    writes dx, dB, dC, ddt of every row and the dA, dD partials [Bsz, H]:
    4 (R (2 H p + 3 G N + 2 H) + Bsz (G N + H p + 2 H) + 2 H) =
    380,239,936 B (B and dt read again: 417,988,672). lr_reduce_kernel: 2
    Bsz H + 2 H = 32,784 FLOPs, 4 (2 Bsz H + 4 H) = 131,200 B. Shared
    memory a window (backward): 8 H K + 4 (G N + 2 G K + 3 H K + H p) =
    12,032 B (the tail fits; at K = 4,096 it would not: the full block).
  The tail's gated RMSNorm over the Bsz = 2,048 last rows: forward 9 n di
    + 4 n = 4,726,784 FLOPs, 4 (3 n di + n + di) = 6,300,672 B; backward
    21 n di + 2 n = 11,014,144, 4 (5 n di + n + di) + 8 x 16 splits x di
    = 10,527,744 B. Its LayerNorm forward without the copy 4 (2 R D + 2 R
    + 2 D) = 135,267,328 B; its dx without the residual 10 R D + 4 R =
    168,296,448 FLOPs, 4 (3 R D + 2 R + D) = 202,375,680 B; m2_add_rows
    Bsz D = 262,144 FLOPs, 12 Bsz D = 3,145,728 B.
  scan_backward_kernel (ssd_scan_backward.cu + ssd_chunk_tc.cuh), a block
    per (window, head). Per block the TF32 products: each of the 2 backward
    chunks G = C B^T and dM = dY X^T over the pairs T (2N + 2p) = 101,376,
    one boundary product (X dS_out at c = 0, dY S_in at c = 1) 2pNL =
    131,072, dC and dB 4NT = 135,168, dX = M^T dY 2pT = 33,792, and chunk
    0's dX += (wB) dS_out^T or chunk 1's U = (e dY)^T C 2pNL = 131,072:
    532,480 a chunk; the forward walk's own state X^T diag(w) B 131,072:
    1,196,032 a block, 19,595,788,288 a call. All FLOPs: the chunks as
    ssd.cu's chunk_backward counts them (backward_chunk_flops: 562,848 at
    c = 0, 426,496 at c = 1, their decays from segment sums 5,456 adds
    each), less 2 (5,456 - 32) for the TC decays from one prefix, plus the
    forward walk L + Lp + 2pNL + 2pN = 136,224, U 2pNL + Lp = 132,096, the
    dS_out recurrence 2pN = 4,096: 1,250,912 a block, 20,494,942,208 a call
    (fp32 mode, the segment sums kept: 1,261,760, 20,672,675,840). Bytes:
    reads x, dy [R, H p], B, C [R, G N], dt [R, H], A, D; writes dx
    [R, H p], ddt [R, H], the per-head dB, dC partials [Bsz H, K N] each,
    the dA, dD partials [Bsz H nc]: 4 (R (2 Hp + 2 GN + H) + 2H + R (Hp +
    H) + 2 R H N + 2 Bsz H nc) = 1,015,283,776 B (the chunk_backward count
    of before, 4 x 320,962,576, less its state reads); the per-head
    partials are 537 MB of it.
  scan_tc_pair_kernel (ssd_scan_tc.cu): per (window, head) chunk 0 L +
    T (2N + 3) + 2pT + 2Lp + L (prefix) = 105,072, chunk 1 that + T + L +
    (2N + 2) L p = 238,752, the state X0^T (w0 B0) L + LN + 2pNL = 133,152:
    476,976 a block, 7,814,774,784 a call (TF32 tiles 2 T (2N + 2p) + 2 x
    2pNL = 464,896 a block, 7,616,856,064). Bytes: reads x, B, C, dt, A, D,
    writes y: 4 (R (2 Hp + 2 GN + H) + 2H) = 339,738,688 B.
  scan_quad_kernel (ssd_scan_quad.cu; bf16, K <= 64), per (window, group):
    TF32 G's lower tiles 2 x 2,560 x N = 327,680 and each head's M X 2 x
    2,560 x p = 163,840: 1,638,400 a block, 3,355,443,200 a call; the
    element-wise K + 4T + 2Kp = 12,480 a head (T = K (K + 1) / 2 = 2,080):
    3,559,915,520 FLOPs a call. Bytes: the scan forward's minimum,
    339,738,688 (B and C once a group). scan_quad_backward_kernel: TF32 G,
    dC, dB 3 x 327,680 and each head's dW, dX 2 x 163,840: 3,604,480 a
    block, 7,381,975,040 a call; the element-wise ~K + 10T + 10K + 2Kp =
    25,600 a head: 7,801,405,440. Bytes: 4 (R (2Hp + 2GN + H) + 2H + R (Hp
    + H) + 2 R GN + 2 Bsz H) = 545,390,656 (dB, dC summed in the block: no
    partials, no reduce_group).
  vsn_bwd_fused_kernel<32, 1> (vsn_backward_fused.cu, table mode over nb
    bars): per (bar, variable) the products 18 Dv^2 (recompute h2 2, g 4;
    dh2 4, dWg 4, dh1 2, dW2 2) and ~60 Dv element-wise
    (notes-vsn-backward-fused.md): nb F (18 Dv^2 + 60 Dv) = 56,985,600,000
    FLOPs. Bytes: reads dT [nb, P], s [nb, F] (gathered), the bars' rows
    [nb], the weights F (3 Dv^2 + 8 Dv); writes the partials 32 splits x F x
    (3 Dv^2 + 8 Dv) doubles: 4 (nb (P + F + 1) + 133,120) + 34,078,720 =
    404,491,200 B.
  vsn_fused_kernel<32, 256, 1> (vsn_forward_fused.cu, table mode): per
    (bar, variable) 6 Dv^2 + 21 Dv (h1 4, the glu's biases and gate 9, the
    statistics 4, t 4 a value): 19,084,800,000 FLOPs; bytes as the
    backward's reads, the table [nb, P] written instead: 370,412,480 B.
  tt_grad_kernel (vsn_train_table.cu): 4 R P = 671,088,640 FLOPs; reads
    the table [nb, P], offs, srow, dv [R, Dv], alpha [R, F], writes dT
    [nb, P] and dalpha [F, R] doubles: 4 (2 nb P + nb + 1 + R (1 + Dv + F))
    + 8 R F = 797,296,068 B (notes-train-table.md: 796 MB).
  tt_combine_kernel (vsn_train_table.cu, the training combine a bar at a
    time): 2 R P = 335,544,320 FLOPs; 4 (R (F + 1 + Dv) + nb P + nb + 1) =
    396,953,028 B, each table row out of DRAM once. table_combine_kernel
    (the row walk before it, the action step's and the fallback past F =
    768): 4 (R (F + 1 + Dv) + nb P) = 396,673,024 B at the minimum, a table
    row once a window row in its design: 709,361,664.
  rms_backward_regs_kernel<2> (n = d_inner = 256): 21 R n + 2 R =
    704,905,216 FLOPs; 4 (5 R n + R + n) + 8 x 1,024 splits x n =
    673,711,104 B. rms_forward_regs_kernel: 9 R n + 4 R = 302,514,176,
    4 (3 R n + R + n) = 403,178,496 B.
  bwd_dlog_tile_kernel (F <= 95; bwd_dlog_kernel past it, the same
    count): 4 R F = 20,971,520 FLOPs, 16 R F = 83,886,080 B.
  sel_tail_group_kernel: 18 R F + 4 R = 94,896,128 FLOPs; 4 R (7F + 2) +
    8F = 147,849,536 B.
  conv_forward_tile_kernel (Ch = 384, W = 4): reads x [R, Ch], w, b; writes
    y [R, Ch]: 4 (2 R Ch + 5 Ch) = 402,660,864 B.
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
DEFAULT_GEMM_TFLOPS = 411.9  # H200, 2026-12-01 (results/2026-12-01-a): fp32 in/out, 32F_FAST_16BF, 8192^3
DEFAULT_TF32_TFLOPS = 495.0  # H200 SXM dense TF32 tensor-core spec (989 is with sparsity): not measured
# the SSD backward's kernels, the first with calls a step: the full blocks' (L - 1 a step with the tail), the tail's
STEP_MARKERS = ("scan_quad_backward_kernel", "scan_backward_kernel", "chunk_backward_kernel", "lr_backward_kernel")
FULL_MARKERS = STEP_MARKERS[:3]  # the full blocks' (L - 1 a step with the tail)
BARS_2048 = 70_000  # distinct bars of 2,048 windows: bench/NOTES.md "second session", notes-train-table.md
MARKET_BARS = 96_000  # the bench market's bars (bench/NOTES.md change 21: the action step's table)

# src/core/config.c, st_dims_preset (T is not needed here).
PRESETS = {
    "tiny": dict(B=32, K=32, F=40, C=16, Dv=8, D=32, L=1, expand=2, headdim=16, N=16, G=1, W=4, Q=16, Hh=32, A=3),
    "default": dict(B=128, K=64, F=40, C=16, Dv=32, D=128, L=2, expand=2, headdim=32, N=64, G=1, W=4, Q=32, Hh=128,
                    A=3),
    "large": dict(B=4096, K=128, F=40, C=16, Dv=64, D=256, L=4, expand=2, headdim=64, N=128, G=1, W=4, Q=64, Hh=256,
                  A=3),
    "odd": dict(B=3, K=50, F=37, C=11, Dv=5, D=96, L=2, expand=2, headdim=24, N=10, G=1, W=4, Q=16, Hh=20, A=3),
}



def expected_bars(rows, market):
    """notes-train-table.md: the expected distinct bars of `rows` uniform
    draws over `market` bars, M (1 - e^{-rows / M})."""
    return market * -math.expm1(-rows / market)


def lr_smem_bytes(K, H, P, G, N, backward):
    """ssd_last_row.cu lr_smem_bytes: a window's shared arrays, Ld [H K]
    doubles, then C_l [GN], q [GK], w [HK] floats; the backward adds dy
    [HP], e and ww [HK] each, dQ [GK]."""
    hk, gk = H * K, G * K
    floats = G * N + gk + hk + ((H * P + 2 * hk + gk) if backward else 0)
    return 8 * hk + F4 * floats


def tail_fits(z):
    """ssd_last_row.cu st_cuda_ssd_last_row_fits (model.cu asks it through
    st_cuda_mamba2_last_fits): the backward's shared memory within the
    opt-in limit, G dividing H; else the full last block."""
    return z.H % z.G == 0 and lr_smem_bytes(z.K, z.H, z.P, z.G, z.N, 1) <= SMEM_OPTIN


class Sizes:
    """The sizes one training step of `windows` windows works on, named as
    in DESIGN (and derived as src/core/config.h derives them); the precision
    mode and the distinct bars of the minibatch."""

    def __init__(self, preset, windows, precision="bf16", bars=None, market=MARKET_BARS, tail=1, quad=1, vsn_tc=1):
        d = PRESETS[preset]
        self.__dict__.update(d)
        self.preset, self.precision = preset, precision
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
        self.market = market
        # model.cu st_cuda_model_train_table_wanted (auto): expected distinct bars <= 0.8 rows
        self.table = d["Dv"] in (8, 16, 32) and expected_bars(self.R, market) <= 0.8 * self.R
        self.cap = min(self.R, market)  # the index's bound, grids and splits sized for it
        if bars is not None:
            self.nb, self.bars_from = min(bars, self.R), "--bars"
        else:
            scale = BARS_2048 / expected_bars(2048 * 64, MARKET_BARS)
            self.nb = min(self.R, round(scale * expected_bars(self.R, market)))
            self.bars_from = ("70,000 (bench/NOTES.md, notes-train-table.md)" if self.R == 131072 and
                              market == MARKET_BARS else "70,000 at 2,048 windows scaled by M (1 - e^{-rows/M})")
        # model.cu: block L-1 as the last-row tail where asked and its SSD holds a window (tail_fits)
        self.tail = bool(tail) and tail_fits(self)
        self.Lf = d["L"] - self.tail  # the blocks that run in full
        # bf16 mode: the SSD of a window of <= 64 rows as one chunk (ssd_scan_quad.cu, ssd_scan_quad_backward.cu:
        # ssmtrade bench --scan-quad, --scan-quad-backward) and the VSN fill's products on the tensor cores
        # (vsn_forward_fused_tc.cu, --vsn-tc), where asked and the shape takes them
        self.quad = bool(quad) and self.tc and quad_fits(self)
        self.vsn_tc = bool(vsn_tc) and self.tc and d["Dv"] in (16, 32)

    @property
    def tc(self):
        """bf16 mode: the scans' products on the TF32 tensor cores."""
        return self.precision == "bf16"


class Cost:
    """One call: FLOPs (of which `tc` on the tensor cores), minimum bytes,
    and the bytes its design moves when it re-reads something (None when
    that is the minimum)."""

    def __init__(self, flops, nbytes, design=None, tc=0):
        self.flops, self.bytes, self.design, self.tc = float(flops), float(nbytes), design, float(tc)


F4 = 4  # bytes of a float32


# ---- the VSN (vsn_forward_fused.cu, vsn_backward_fused.cu, vsn_train_table.cu, vsn.cu)


def vsn_weights(z):
    """The per-variable weights and vectors a fused kernel stages: [W2; Wg]
    3 Dv^2 and U, V, Vg (2), ew, eb, ln_w, ln_b: 8 Dv floats a variable."""
    return z.F * (3 * z.Dv * z.Dv + 8 * z.Dv)


def vsn_forward_fused(z):
    """vsn_forward_fused.cu vsn_fused_kernel. Table mode (the training
    table): over the nb distinct bars (blocks past the device count stop),
    each bar's s row through the index's first rows: reads s [nb, F]
    (gathered), first [nb], the weights (per block, from L2); writes the
    table t [nb, P]. Row mode (no table): over the R rows, reads s and
    alpha [R, F], writes v [R, Dv]. Per (row, variable): h2 2 Dv^2, g 4
    Dv^2 (fp32 FMAs on the CUDA cores, both precisions); per value h1 =
    ELU(s U + V) 4, the glu's biases, sigmoid and x = e + g1 sg 9, the
    statistics 4 (double), t = xhat w + b 4 (row mode: + alpha t 2)."""
    F, Dv, P = z.F, z.Dv, z.Pv
    if z.table:
        n = z.nb
        return Cost(n * F * (6 * Dv * Dv + 21 * Dv), F4 * (n * (P + F + 1) + vsn_weights(z)))
    n = z.R
    return Cost(n * F * (6 * Dv * Dv + 23 * Dv), F4 * (n * (2 * F + Dv) + vsn_weights(z)))


def vsn_fill(z):
    """The VSN forward's fused kernel a step: (name, file, Cost). bf16 mode at
    Dv 16 and 32 (z.vsn_tc): vsn_fused_tc_kernel (vsn_forward_fused_tc.cu),
    its two products, 6 Dv^2 a (bar, variable), on the tensor cores (bf16
    mma.sync; set against the TF32 ceiling, half the bf16 one: a
    conservative floor); else vsn_fused_kernel, the same count on the CUDA
    cores."""
    c = vsn_forward_fused(z)
    if not z.vsn_tc:
        return "vsn_fused_kernel", "vsn_forward_fused.cu", c
    rows = z.nb if z.table else z.R
    return "vsn_fused_tc_kernel", "vsn_forward_fused_tc.cu", Cost(c.flops, c.bytes, c.design,
                                                                    rows * z.F * 6 * z.Dv * z.Dv)


def vsn_bwd_splits(z):
    """vsn_backward_fused.cu: min(tiles, VSNB_SPLITS = 32) over the tiles of
    4 x 256 / (Dv / 4) rows (the table mode's for cap rows)."""
    rows = z.cap if z.table else z.R
    tile = 4 * 256 // (z.Dv // 4)
    return min(-(-rows // tile), 32)


def vsn_backward_fused(z):
    """vsn_backward_fused.cu vsn_bwd_fused_kernel, a block per (variable,
    row split). Table mode (<Dv, 1>): over the nb bars with dv = dT [nb, P]
    (variable offset Dv) and alpha = 1: reads dT, s [nb, F] (gathered),
    first [nb], the weights; writes one partial of 3 Dv^2 + 8 Dv doubles a
    (split, variable). Row mode: over R rows, reads s, alpha [R, F], dv
    [R, Dv] (from L2 F times), writes dalpha_j and the ds parts [F, R]
    doubles besides. Per (row, variable): the products 18 Dv^2 (recompute
    h2 2, g 4; dh2 = dgl Wg 4, dWg += dgl^T h2 4, dh1 = dh2 W2 2, dW2 +=
    dh2^T h1 2), fp32 FMAs; ~60 Dv element-wise (ELU twice, sigmoid, the
    norm forward and backward in double, the column sums:
    notes-vsn-backward-fused.md)."""
    F, Dv, P = z.F, z.Dv, z.Pv
    parts = 8 * vsn_bwd_splits(z) * F * (3 * Dv * Dv + 8 * Dv)
    flops_each = F * (18 * Dv * Dv + 60 * Dv)
    if z.table:
        n = z.nb
        return Cost(n * flops_each, F4 * (n * (P + F + 1) + vsn_weights(z)) + parts)
    n = z.R
    return Cost(n * flops_each, F4 * (n * (2 * F + Dv) + vsn_weights(z)) + 8 * 2 * n * F + parts,
                F4 * (n * (2 * F + F * Dv) + vsn_weights(z)) + 8 * 2 * n * F + parts)


def bwd_finish(z):
    """vsn_backward_fused.cu bwd_finish_kernel: the splits' partials added
    in order into the gradients (read + write floats)."""
    n = z.F * (3 * z.Dv * z.Dv + 8 * z.Dv)
    s = vsn_bwd_splits(z)
    return Cost(s * n, 8 * s * n + F4 * 2 * n)


def bwd_dlog(z):
    """vsn_backward_fused.cu bwd_dlog_tile_kernel (F <= 95: dlog_kernel) and
    bwd_dlog_kernel past it, the same arithmetic and bytes: reads alpha [R,
    F], dalpha [F, R] (doubles; read twice, the second pass from cache),
    writes dlog [R, F]. Per value the dot 2, then a sub and a multiply.
    bwd_dlog_kernel runs a thread a row: a thread's alpha and dlog rows are
    160 B apart from its neighbours', each warp access touches 32 sectors.
    The tile kernel runs a warp a tile of 32 rows: the tile's alpha rows in
    coalesced to shared memory [32][F | 1], thread i runs row i's dot and
    dlog (dalpha coalesced across the 32 rows already), dlog over the alpha
    tile in place and out coalesced: the sectors go, the bytes stay."""
    R, F = z.R, z.F
    return Cost(4 * R * F, 16 * R * F, 24 * R * F)


def dlog_kernel(z):
    """The dlog kernel st_cuda_vsn_backward_fused_dlog launches: the tile
    where 4 x 32 x (F | 1) floats fit 48 KB (F <= 95), else a thread a row."""
    return "bwd_dlog_tile_kernel" if F4 * 4 * 32 * (z.F | 1) <= 49152 else "bwd_dlog_kernel"


def tt_grad(z):
    """vsn_train_table.cu tt_grad_kernel (a warp a (bar, chunk of 8
    variables), lane c < Dv, a bar's chunks in neighbouring warps): reads
    the table row [P] once a bar, offs [nb + 1], srow [R], dv [R, Dv] and
    alpha [R, F] (a row's dv once a chunk, from L1/L2); writes dalpha [F, R]
    (doubles) and dT [nb, P]. Per (row, variable) the dot dv . t_j 2 Dv,
    acc += alpha dv 2 Dv (double)."""
    R, F, Dv, P, n = z.R, z.F, z.Dv, z.Pv, z.nb
    return Cost(4 * R * P, F4 * (2 * n * P + n + 1 + R * (1 + Dv + F)) + 8 * R * F,
                F4 * (2 * n * P + n + 1 + R * (1 + F * Dv + F)) + 8 * R * F)


def table_combine(z):
    """vsn_forward_fused.cu table_combine_kernel (a warp a row; its float4
    variant table_combine4_kernel moves the same bytes), the training
    combine before tt_combine_kernel and its fallback past F = 768: reads alpha
    [R, F], crow [R] and its bar's table row [P], writes v [R, Dv]. The
    minimum reads the nb table rows once; the design reads a row's once a
    window row (4 R P). Per value alpha_j t_j summed 2 (double)."""
    R, F, Dv, P = z.R, z.F, z.Dv, z.Pv
    return Cost(2 * R * P, F4 * (R * (F + 1 + Dv) + z.nb * P), F4 * (R * (F + 1 + Dv) + R * P))


def tt_combine(z):
    """vsn_train_table.cu tt_combine_kernel (the training forward's combine,
    st_cuda_vsn_train_table_combine; F <= 768, else the row kernel through
    crow): a warp a compact bar, lane c < Dv a column, the bar's rows in CSR
    order: reads offs [nb + 1], srow [R], alpha [R, F] (converted once a
    row into shared memory), the bar's table row [P] once a bar (its later
    rows from L1/L2); writes v [R, Dv]. Per value alpha_j t_j summed 2
    (double). The minimum is the design: each table row leaves DRAM once
    (table_combine's design read it once a window row)."""
    R, F, Dv, P, n = z.R, z.F, z.Dv, z.Pv, z.nb
    return Cost(2 * R * P, F4 * (R * (F + 1 + Dv) + n * P + n + 1))


def combine_kernel(z):
    """The training combine st_cuda_vsn_train_table_combine launches: the
    bar walk where 8 warps x (F rounded up to even) doubles fit 48 KB, else
    st_cuda_vsn_table_combine's row kernel (table_combine4_kernel at the
    fused Dv, which the table mode needs)."""
    return "tt_combine_kernel" if 8 * 8 * ((z.F + 1) & ~1) <= 49152 else "table_combine4_kernel"


def sel_tail_group(z):
    """vsn.cu sel_tail_group_kernel (8 lanes a row): reads glu [g1; g2] 2F,
    x F (the skip); writes sigma(g2) and x in place, the saved alpha and the
    caller's alpha [R, F], mean, rstd [R]; ln_w, ln_b. Per value sigmoid 3,
    x + g1 sg 2, the statistics 4, the norm and affine 4, the softmax's
    max, sub, exp, sum, divide 5; per row 4."""
    R, F = z.R, z.F
    return Cost(18 * R * F + 4 * R, F4 * R * (7 * F + 2) + 8 * F)


def elu_bwd(z, n):
    """vsn.cu elu_bwd_kernel over [R, n]: reads h and d, writes d."""
    return Cost(2 * z.R * n, F4 * 3 * z.R * n)

# ---- the Mamba2 block and the norms (conv1d.cu, rmsnorm_gated.cu, layernorm.cu, linear.cu)


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



def rms_forward(z, rows=None):
    """rmsnorm_gated.cu rms_forward_regs_kernel<J> (a warp per row, the row
    in registers, d_inner <= 128 J): reads y [R, di] and z (zx's first di
    columns), norm_w; writes gated [R, di], rstd [R]. Per value SiLU 4,
    y SiLU(z) 1, the square summed 2 (double), the scale 2. The tail's
    (st_cuda_rmsnorm_gated_forward_rs, the same kernel) over the Bsz last
    rows: rows = Bsz, y, z, gated at stride K rows, rstd at stride K."""
    R, n = rows or z.R, z.di
    return Cost(9 * R * n + 4 * R, F4 * (3 * R * n + R + n))


def rms_bwd_splits(z, rows=None):
    """rmsnorm_gated.cu rms_backward_regs: ~128 rows a split, at most 1,024
    (ST_RMS_SPLIT_ROWS, ST_RMS_MAX_SPLITS), within the 2^20 doubles of the
    column sums' scratch (linear.cu st_cuda_rowsplit_plan_n): 1,024 at R =
    131,072, 16 over the tail's 2,048 last rows."""
    R = rows or z.R
    return max(1, min(-(-R // 128), 1024, R, (1 << 20) // z.di))


def rms_backward(z, rows=None):
    """rmsnorm_gated.cu rms_backward_regs_kernel<J> (a block per row split,
    a warp a row in registers): reads y, z, dout (d_gated) [R, di], rstd
    [R], norm_w; writes dy (d_ssd_y) and dz (d_zx's z columns) [R, di] and
    the norm weight's partials [splits, di] (double). Per value the first
    pass SiLU 4, y SiLU 1, ghat 1, the mean's dout w ghat 3, dw's ghat dout
    2; the second (its SiLU and ghat again: not counted) dg 4, dy 1, dz 5;
    per row 2. The tail's (_rs, the same kernel) over the Bsz last rows:
    y, z, rstd, dz at stride K rows, dout and dy compact [Bsz, di]."""
    R, n = rows or z.R, z.di
    return Cost(21 * R * n + 2 * R, F4 * (5 * R * n + R + n) + 8 * rms_bwd_splits(z, R) * n)


def rms_dw_finish_calls(z):
    """rmsnorm_gated.cu rms_dw_finish_kernel, after each register-path
    backward of more than one split, in step order (the tail's first): reads
    the partials [splits, di] (double), adds them into dw (read + write).
    A few us each: launch latency."""
    rows = ([z.Bsz] if z.tail else []) + [z.R] * z.Lf
    return [Cost(s * z.di, 8 * s * z.di + F4 * 2 * z.di) for s in (rms_bwd_splits(z, r) for r in rows) if s > 1]


def add_rows(z):
    """mamba2.cu m2_add_rows_kernel (the tail's backward, a thread a value):
    du += du_out at the Bsz last rows (the residual path; du_out's other
    rows are not read): reads du_out and du [Bsz, D] (stride K rows),
    writes du. 1 add a value."""
    n = z.Bsz * z.D
    return Cost(n, F4 * 3 * n)


def ln_forward_calls(z):
    """layernorm.cu ln_forward_kernel (a warp a row), in step order: each
    Mamba2 block's norm over [R, D] (mamba2.cu: with the residual's copy
    u_out written on the same pass; the tail's block without it: its
    residual is out_proj's at the last rows), then the heads' over the
    windows' last rows [Bsz, D]. Reads x, w, b; writes y (and the copy),
    mean, rstd. Per value the sum 1, the variance 3, the norm and affine 4;
    per row 4."""
    R, n, D = z.R, z.Bsz, z.D
    blk = Cost(8 * R * D + 4 * R, F4 * (3 * R * D + 2 * R + 2 * D))
    last = Cost(8 * R * D + 4 * R, F4 * (2 * R * D + 2 * R + 2 * D))
    head = Cost(8 * n * D + 4 * n, F4 * (2 * n * D + 2 * n + 2 * D))
    return [blk] * z.Lf + [last] * z.tail + [head]


def ln_backward_dx_calls(z):
    """layernorm.cu ln_backward_dx_kernel (a warp a row), in step order: the
    heads' [Bsz, D], the Mamba2 blocks' [R, D] from the last (dx = du_out +
    LN'(dy): the residual read too), the VSN selection norm's [R, F]. Reads
    x, dy, mean, rstd, w (and res), writes dx. Per value xhat 2, g 1, the
    two sums 3 (double); the second pass (xhat, g again: not counted) 4,
    the residual's add 1; per row 4. The tail's block: no residual
    (st_cuda_layernorm_backward; m2_add_rows_kernel adds du_out at the last
    rows after it)."""
    R, n, D, F = z.R, z.Bsz, z.D, z.F
    head = Cost(10 * n * D + 4 * n, F4 * (3 * n * D + 2 * n + D))
    blk = Cost(11 * R * D + 4 * R, F4 * (4 * R * D + 2 * R + D))
    last = Cost(10 * R * D + 4 * R, F4 * (3 * R * D + 2 * R + D))
    sel = Cost(10 * R * F + 4 * R, F4 * (3 * R * F + 2 * R + F))
    return [head] + [last] * z.tail + [blk] * z.Lf + [sel]


def ln_param_grad_calls(z):
    """layernorm.cu ln_param_grad_kernel: the heads' norm, then each Mamba2
    block's (the VSN's selection norm takes its parameter sums from its own
    products and the column sums): reads x, dy, mean, rstd; writes [splits,
    2n] double partials (st_cuda_rowsplit_plan over 2n columns). Per value
    xhat 2, the two sums 3."""
    def one(rows, n):
        s = rowsplit_splits(rows, 2 * n)
        return Cost(5 * rows * n, F4 * (2 * rows * n + 2 * rows) + (8 * s * 2 * n if s > 1 else F4 * 4 * n))
    return [one(z.Bsz, z.D)] + [one(z.R, z.D)] * z.L


def colsum_shapes(z):
    """The (rows, cols) of the step's st_cuda_colsum_add calls, in order (colsum_calls)."""
    R, n, F, Hs = z.R, z.Bsz, z.F, z.Hs
    shapes = [(n, c) for c in (z.A, z.Hh, 1, z.Hh)]
    shapes += [(R, z.H)] * z.L + [(R, z.D)]
    return shapes + [(R, c) for c in (F, F, F, 2 * F, Hs, Hs)]


def colsum_calls(z):
    """linear.cu colsum_part_kernel, one call per st_cuda_colsum_add: each
    reads its [rows, cols] once (double sums) and writes [splits, cols]
    partials. The calls of a step in the order the backward makes them:
    the heads' biases (A, Hh, 1, Hh over the windows), dt_bias of each
    layer (H columns of d_zx), w_in's bias (D); the selection GRN (norm w,
    b, the skip's gk: F each; glu_b 2F, fc2_b Hs, fc1's gs Hs). The
    per-variable GRNs' sums are the fused backward's own (13 a step at the
    default preset; 19 before it)."""
    calls = []
    for rows, cols in colsum_shapes(z):
        s = rowsplit_splits(rows, cols)
        calls.append(Cost(rows * cols, F4 * rows * cols + (8 * s * cols if s > 1 else F4 * cols)))
    return calls


def colsum_finish_calls(z):
    """linear.cu colsum_finish_kernel (st_cuda_rowsplit_finish): for every
    split column sum, the partials [splits, cols] (double) added in order
    into the sum (read + write): the colsum calls', then the LayerNorms'
    parameter sums (dw and db each); not in the step's interleaved order
    (which matters only for a capture cut inside a step). A few us each:
    launch latency, not bytes."""
    calls = []
    for rows, cols in colsum_shapes(z):
        s = rowsplit_splits(rows, cols)
        if s > 1:
            calls.append(Cost(s * cols, 8 * s * cols + F4 * 2 * cols))
    for rows in [z.Bsz] + [z.R] * z.L:
        s = rowsplit_splits(rows, 2 * z.D)
        if s > 1:
            calls += [Cost(s * z.D, 8 * s * z.D + F4 * 2 * z.D)] * 2
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



# ---- the SSD scans (ssd_scan.cu, ssd_scan_tc.cu, ssd_scan_backward.cu) ----------
#
# A block per (window, head) walking the window's chunks, the state carried
# (no summary kernel, no states through global memory at nc = 2). The chunk
# math is chunk_forward's / chunk_backward's, counted by the same functions,
# with the boundary states' recomputation replaced by the carried recurrence
# (S <- e[L-1] S + own: 2 p N a chunk). The fp32 kernels (CUDA cores) take
# their decays from segment sums as ssd.cu does; the TF32 ones (bf16 mode)
# from one prefix a chunk (L adds instead of seg_adds(L)).

SCAN_BWD_MAX_SPT = 8  # ssd_scan_backward.cu: P N <= 256 x 8 state elements


def scan_backward_fits(z):
    """ssd_scan_backward.cu st_cuda_ssd_scan_backward_fits (the shared memory
    assumed to fit where the chunk kernels' staging does)."""
    return z.P * z.N <= 256 * SCAN_BWD_MAX_SPT and ssd_fused(z)


def scan_forward_fits(z):
    """ssd_scan.cu: the fp32 scan for P N <= 256 x 32; the TC one (bf16)
    wherever its shared memory fits (assumed)."""
    return z.tc or z.P * z.N <= 256 * 32


def scan_tc_shape(z):
    """ssd_chunk_tc.cuh ssd_tc_shape_fits: Q, p, N multiples of 16, K of Q."""
    return z.Qe % 16 == 0 and z.K % z.Qe == 0 and z.P % 16 == 0 and z.N % 16 == 0


def scan_pair(z):
    """ssd_scan_tc.cu: scan_tc_pair_kernel for two whole chunks of a multiple
    of 16 rows (K = 2Q), else scan_tc_kernel's walk."""
    return z.tc and z.nc == 2 and z.K == 2 * z.Qe and z.Qe % 16 == 0


def bwd_tc_products(z, L, c):
    """The TF32 products of one backward chunk (ssd_chunk_tc.cuh): G, dM
    over the pairs T (2N + 2p); X dS_out (c < nc-1) and dY S_in (c > 0)
    2pNL each; dC, dB 4NT; dX = M^T dY 2pT, + (wB) dS_out^T 2pNL (c <
    nc-1); U = (e dY)^T C 2pNL (c > 0)."""
    P, N, T = z.P, z.N, tri(L)
    has_in, has_out = c > 0, c + 1 < z.nc
    return T * (2 * N + 2 * P) + (has_in + has_out) * 2 * P * N * L + 4 * N * T + 2 * P * T + \
        has_out * 2 * P * N * L + has_in * 2 * P * N * L


def scan_backward(z):
    """ssd_scan_backward.cu scan_backward_kernel<SPT, TC>, a block per
    (window, head): the forward walk over chunks 0..nc-2 (their own states
    X^T diag(w) B: X diag(w) L p, 2pNL; w L; the recurrence 2pN; the
    decays are the backward chunks' again: not counted), then the chunks
    from the last with chunk_backward's steps (backward_chunk_flops less
    the boundary states it formed from the other chunks' states), U =
    dY^T diag(e) C for c > 0 (2pNL + Lp) and the dS_out recurrence (2pN).
    Reads x, dy [R, H p], B, C [R, G N], dt [R, H], A, D; writes dx [R, H p],
    ddt [R, H], this head's dB, dC partials [Bsz H, K N] each (reduce_group
    reads them back), the dA, dD partials [Bsz H nc]; the states entering
    chunks 1..nc-2 written and read back once (none at nc = 2). Design: B,
    C read once per head of their group; the forward walk stages x, B and
    dt of chunks 0..nc-2 again. TC: the products of bwd_tc_products and
    the own states on the tensor cores (bf16 mode where ssd_tc_shape_fits;
    other shapes run the SIMT variant in bf16 mode too)."""
    R, H, P, N, GN, nc = z.R, z.H, z.P, z.N, z.G * z.N, z.nc
    bh = z.Bsz * H
    tc = z.tc and scan_tc_shape(z)
    blk = tcb = 0
    for c, L in enumerate(z.chunks):
        f = backward_chunk_flops(z, L, c)
        f -= 2 * max(c - 1, 0) * P * N + 2 * max(nc - 2 - c, 0) * P * N  # carried, not re-formed
        if tc:
            f -= seg_adds(L) - L  # one prefix a chunk
            tcb += bwd_tc_products(z, L, c)
        if c + 1 < nc:  # the forward walk's own state and recurrence
            f += L + L * P + 2 * P * N * L + 2 * P * N
            tcb += 2 * P * N * L if tc else 0
        if c > 0:  # U and the dS_out recurrence
            f += 2 * P * N * L + L * P + 2 * P * N
        blk += f
    reads = R * (2 * H * P + 2 * GN + H) + 2 * H
    writes = R * (H * P + H) + 2 * R * H * N + 2 * bh * nc
    states = 2 * bh * max(nc - 2, 0) * P * N
    walk = bh * sum(L * (P + N + 1) for L in z.chunks[:-1])
    extra = 2 * R * GN * (H // z.G - 1) + walk
    minimum = F4 * (reads + writes + states)
    return Cost(bh * blk, minimum, minimum + F4 * extra, bh * tcb)


def scan_forward(z):
    """The forward scans, a block per (window, head): ssd_scan.cu
    scan_forward_kernel (fp32 mode, CUDA cores), ssd_scan_tc.cu
    scan_tc_kernel (the TF32 walk) or scan_tc_pair_kernel (two chunks at
    once). Each chunk as chunk_forward counts it (without forming S_in from
    the chunks before: carried), the states after every chunk but the last
    (X diag(w) L p or, in the pair kernel, w B L N; 2pNL; w L; the
    recurrence 2pN, none in the pair kernel: S_in[0] = 0). Reads x [R, H p],
    B, C [R, G N], dt [R, H], A, D [H]; writes y [R, H p]. Design: B, C once
    per head of their group. TC: G = C B^T and M X over the pairs, C S^T
    and the states on the tensor cores."""
    R, H, P, N, GN, nc = z.R, z.H, z.P, z.N, z.G * z.N, z.nc
    bh, pair = z.Bsz * H, scan_pair(z)
    blk = tcb = 0
    for c, L in enumerate(z.chunks):
        f = forward_chunk_flops(z, L, c) - 2 * max(c - 1, 0) * P * N
        if z.tc:
            f -= seg_adds(L) - L
            tcb += tri(L) * (2 * N + 2 * P) + (c > 0) * 2 * P * N * L
        if c + 1 < nc:
            f += L + (L * N if pair else L * P) + 2 * P * N * L + (0 if pair else 2 * P * N)
            tcb += 2 * P * N * L if z.tc else 0
        blk += f
    minimum = F4 * (R * (2 * H * P + 2 * GN + H) + 2 * H)
    return Cost(bh * blk, minimum, minimum + F4 * 2 * R * GN * (H // z.G - 1), bh * tcb)


# ---- the quad scans (ssd_scan_quad.cu, ssd_scan_quad_backward.cu) ----------------
#
# bf16 mode, K <= 64 (K, P, N multiples of 16): the window as one chunk, a
# block a (window, group), G = C B^T once for the group's heads, every
# product over the lower 16 x 16 tiles (Kt (Kt + 1) / 2 of them, Kt = K /
# 16) on the TF32 tensor cores; no state.


def quad_fits(z):
    """ssd_scan_quad.cu scan_quad_takes / st_cuda_ssd_scan_quad_fits (the
    shared memory assumed to fit)."""
    return z.K <= 64 and z.K % 16 == 0 and z.P % 16 == 0 and z.N % 16 == 0 and z.H % z.G == 0


def quad_tiles(z):
    """The lower 16 x 16 tiles of a K x K triangle."""
    kt = z.K // 16
    return kt * (kt + 1) // 2


def scan_quad(z):
    """ssd_scan_quad.cu scan_quad_kernel. TF32 a block: G's lower tiles 2
    (256 tiles) N, each head's M X 2 (256 tiles) p. Element-wise a head: the
    prefix K, M = G o L o dt over the triangle 4 T (T = K (K + 1) / 2), D X
    2 K p. Bytes: the scan forward's minimum, B and C once a group (its
    design, none re-read)."""
    R, H, P, N, GN, hg = z.R, z.H, z.P, z.N, z.G * z.N, z.H // z.G
    t, T = 256 * quad_tiles(z), z.K * (z.K + 1) // 2
    tc = 2 * t * N + hg * 2 * t * P
    blk = tc + hg * (z.K + 4 * T + 2 * z.K * P)
    return Cost(z.Bsz * z.G * blk, F4 * (R * (2 * H * P + 2 * GN + H) + 2 * H), None, z.Bsz * z.G * tc)


def scan_quad_backward(z):
    """ssd_scan_quad_backward.cu scan_quad_backward_kernel. TF32 a block:
    G = C B^T 2 (256 tiles) N once, each head's dW = dY X^T and dX = W^T dY
    2 (256 tiles) p each, dC = dG B and dB = dG^T C 2 (256 tiles) N each.
    Element-wise a head (~): the prefix K, L and W, Z, dG over the triangle
    ~10 T, the head's vectors ~10 K, dD 2 K p. Bytes: reads x, dy [R, H p],
    B, C [R, G N], dt [R, H], A, D; writes dx [R, H p], ddt [R, H], dB, dC
    [R, G N] (summed over the group's heads in the block: no partials, no
    reduce_group) and a dA, dD partial a (window, head)."""
    R, H, P, N, GN, hg = z.R, z.H, z.P, z.N, z.G * z.N, z.H // z.G
    t, T = 256 * quad_tiles(z), z.K * (z.K + 1) // 2
    tc = 3 * 2 * t * N + hg * 2 * 2 * t * P
    blk = tc + hg * (z.K + 10 * T + 10 * z.K + 2 * z.K * P)
    reads = R * (2 * H * P + 2 * GN + H) + 2 * H
    writes = R * (H * P + H) + 2 * R * GN + 2 * z.Bsz * H
    return Cost(z.Bsz * z.G * blk, F4 * (reads + writes), None, z.Bsz * z.G * tc)


# ---- the last block's SSD at the last rows (ssd_last_row.cu) ----------------
#
# A block of 256 threads a window b, all heads, everything of the window in
# shared memory (lr_smem_bytes); per (head h, row s < K) L_s = the sum of
# dt_r over s < r < K (a thread a head, K double adds from the last row),
# q_s = B_s . C_{K-1} a (group, row) (a warp, lanes over N), w_s = exp(A
# L_s) dt_s. x, B, dt of every row come from xBC and dt (row strides
# conv_dim and H); y and the gradients of the one row from compact [Bsz,
# d_inner] buffers (mamba2.cu's last-row views).


def lr_forward(z):
    """ssd_last_row.cu lr_forward_kernel, a block a window: y[h, p] = sum_s
    (w q)[h][s] x_s[h, p] + D x_{K-1}[h, p] (double). Reads C of the last
    row [G N], dt, B and x of every row ([K, H], [K, G N], [K, H p]), A, D;
    writes y of the last row [H p] (the tail's y at stride K rows). FLOPs a
    window: L H K adds, q 2 G K N, w exp(A L) dt times q 4 H K, y (2K + 2)
    H p. dt again for w and x_{K-1} again for D x are the block's own rows,
    from L1 (not counted)."""
    n, K, H, P, GN = z.Bsz, z.K, z.H, z.P, z.G * z.N
    HP = H * P
    flops = n * (H * K + 2 * GN * K + 4 * H * K + (2 * K + 2) * HP)
    return Cost(flops, F4 * (z.R * (HP + GN + H) + n * (GN + HP) + 2 * H))


def lr_backward(z):
    """ssd_last_row.cu lr_backward_kernel, a block a window, given dy at the
    last row: e_s = dy . x_s a (head, row) (a warp, lanes over p); dQ_s =
    sum_{h in g} e w; dw = e q, ww = dw w, dw exp(A L) (the exponential
    formed again: not counted); dx_s = w q dy (+ D dy at K-1); dB_s = dQ_s
    C_{K-1}; dC_{K-1} = sum_s dQ_s B_s (double; dC written zero at every
    other row: conv's backward reads all rows); a thread a head walks s for
    ddt_s = dw exp(A L) + A sum_{s'<s} ww and the dA partial sum_s ww L;
    dD's partial e_{K-1}. Reads C_{K-1} [G N], dy [H p] (compact), dt [K, H],
    B [K, G N], x [K, H p], A, D; writes dx [K, H p], dB and dC [K, G N]
    each (d_xBC's columns), ddt [K, H] (d_zx's dt columns), the dA, dD
    partials [Bsz, H] each. FLOPs a window: L H K, q 2 G K N, e 2 H K p, w 3
    H K, dQ 2 H K, dw, ww, ddt's own term 3 H K, dx 2 K H p + 2 H p, dB G K
    N, dC 2 G K N, the walk 5 H K: 14 H K + 4 H K p + 2 H p + 5 G K N.
    Design: B again for dC's sum, dt again for w (from L1/L2)."""
    n, K, H, P, GN, R = z.Bsz, z.K, z.H, z.P, z.G * z.N, z.R
    HP = H * P
    flops = n * (14 * H * K + 4 * H * K * P + 2 * HP + 5 * GN * K)
    reads = R * (H + GN + HP) + n * (GN + HP) + 2 * H
    writes = R * (HP + 2 * GN + H) + 2 * n * H
    return Cost(flops, F4 * (reads + writes), F4 * (reads + writes + R * (GN + H)))


def lr_reduce(z):
    """ssd_last_row.cu lr_reduce_kernel, a block a head: dA[h] += the sum
    of partA[b, h] over the windows (and dD from partD), double, thread t
    taking windows t, t + 256, ..., then a fixed tree: reads the partials
    [Bsz, H] x 2, dA and dD [H] read and written. 2 Bsz H + 2 H adds (the
    tree's 255 a head each: not counted). A few us: one block a head."""
    n, H = z.Bsz, z.H
    return Cost(2 * n * H + 2 * H, F4 * (2 * n * H + 4 * H))


# ---- cuBLAS (src/model/linear.cu, through every op) -------------------------


def cublas_products(z):
    """Every st_cuda_gemm / st_cuda_gemm_batched of one step as (M, N, Kd,
    batch, beta != 0, calls): C[M, N] (+)= op(A)[M, Kd] op(B)[Kd, N]. In
    order: the VSN forward (the selection GRN's fc1 and skip over the folded
    weights, ctx, fc2, glu; the per-variable GRNs are the fused kernels'
    own FMAs, no cuBLAS), w_in, the Mamba2 blocks (in_proj, out_proj), the
    heads on each window's last row; then the backward: heads, blocks (dX
    and dW of out_proj and in_proj), w_in, ln_b's product (alpha^T dv, the
    fused backward's bwd_finish), the selection GRN (skip, glu, fc2, fc1,
    ctx). 41 a step at the default preset without the tail (127 before
    the fused VSN kernels, whose per-variable products were 86 of them);
    43 with it: block L-1's out_proj over the Bsz last rows (forward, dX,
    dW), its in_proj backward in two, [xBC, dt_raw] (conv_dim + H columns)
    over every row and z (d_inner) over the last rows, dX added (beta 1)."""
    R, n, F, C, Dv, Hs, D, L, Lf = z.R, z.Bsz, z.F, z.C, z.Dv, z.Hs, z.D, z.L, z.Lf
    vcw, gw, Hh, A, di, t, xd = Dv + C, D + C, z.Hh, z.A, z.di, int(z.tail), z.conv + z.H
    g = [(R, Hs, F, 1, 1, 1), (R, Hs, C, 1, 1, 1), (R, Hs, Hs, 1, 1, 1), (R, 2 * F, Hs, 1, 1, 1),
         (R, F, F, 1, 1, 1)]
    g += [(R, D, vcw, 1, 1, 1), (R, z.io, D, 1, 0, L), (R, D, di, 1, 1, Lf), (n, D, di, 1, 1, t)]
    g += [(n, Hh, gw, 1, 1, 1), (n, A, Hh, 1, 1, 1), (n, Hh, gw, 1, 1, 1), (n, 1, Hh, 1, 1, 1)]
    g += [(n, Hh, A, 1, 0, 1), (A, Hh, n, 1, 1, 1), (n, gw, Hh, 1, 0, 1), (Hh, gw, n, 1, 1, 1),
          (n, Hh, 1, 1, 0, 1), (1, Hh, n, 1, 1, 1), (n, gw, Hh, 1, 1, 1), (Hh, gw, n, 1, 1, 1)]
    g += [(n, di, D, 1, 0, t), (D, di, n, 1, 1, t), (R, D, xd, 1, 0, t), (xd, D, R, 1, 1, t), (n, D, di, 1, 1, t),
          (di, D, n, 1, 1, t)]
    g += [(R, di, D, 1, 0, Lf), (D, di, R, 1, 1, Lf), (R, D, z.io, 1, 0, Lf), (z.io, D, R, 1, 1, Lf)]
    g += [(R, vcw, D, 1, 0, 1), (D, vcw, R, 1, 1, 1)]
    g += [(F, Dv, R, 1, 1, 1)]
    g += [(F, F, R, 1, 0, 1), (R, Hs, 2 * F, 1, 0, 1), (2 * F, Hs, R, 1, 1, 1), (R, Hs, Hs, 1, 0, 1),
          (Hs, Hs, R, 1, 1, 1), (F, Hs, R, 1, 0, 1), (R, C, Hs, 1, 0, 1), (Hs, C, R, 1, 1, 1)]
    return [p for p in g if min(p[:3]) > 0 and p[5] > 0]


def gemm_cost(M, N, Kd, batch, beta):
    """2 M N Kd a product; bytes: A and B read, C written (and read, beta)."""
    return Cost(2 * M * N * Kd * batch, F4 * batch * (M * Kd + Kd * N + M * N * (1 + beta)))


def cublas_step(z):
    calls = []
    for M, N, Kd, batch, beta, times in cublas_products(z):
        calls += [gemm_cost(M, N, Kd, batch, beta)] * times
    return calls



# ---- the step: each modelled kernel and its calls ----------------------------


def ssd_calls(z):
    """The SSD's kernels a step by ssd.cu's dispatch, for the Lf = L - tail
    blocks that run in full (forward: the scans where they fit, else
    chunk_summary + chunk_forward; backward: the scan where it fits, else
    chunk_summary (with the gradients) + chunk_backward; reduce_group after
    either); with the tail, block L-1's lr_forward, lr_backward and
    lr_reduce once each. A kernel of no call a step is left out."""
    L, out = z.Lf, {}
    bc = "B, C read once per head; states again at nc > 2"
    if z.quad:
        out["scan_quad_kernel"] = ("ssd_scan_quad.cu", [scan_quad(z)] * L, "")
        out["scan_quad_backward_kernel"] = ("ssd_scan_quad_backward.cu", [scan_quad_backward(z)] * L, "")
        summ = None
    elif scan_forward_fits(z):
        name = "scan_tc_pair_kernel" if scan_pair(z) else "scan_tc_kernel" if z.tc else "scan_forward_kernel"
        out[name] = ("ssd_scan_tc.cu" if z.tc else "ssd_scan.cu", [scan_forward(z)] * L, "B, C read once per head")
        summ = []
    else:
        out["chunk_forward_kernel"] = ("ssd.cu", [chunk_forward(z)] * L, bc)
        summ = [chunk_summary(z, False)] * L
    if summ is None:
        pass  # the quad backward: dB, dC summed in the block, no reduce_group
    elif scan_backward_fits(z):
        out["scan_backward_kernel"] = ("ssd_scan_backward.cu", [scan_backward(z)] * L,
                                       "B, C read once per head; the forward walk stages x, B again")
    else:
        out["chunk_backward_kernel"] = ("ssd.cu", [chunk_backward(z)] * L, bc)
        summ += [chunk_summary(z, True)] * L
    if summ:
        out["chunk_summary_kernel"] = ("ssd.cu", summ, "B, C read once per head")
    if summ is not None:
        out["reduce_group_kernel"] = ("ssd.cu", [reduce_group(z)] * L, "")
    out = {k: v for k, v in out.items() if v[1]}
    if z.tail:
        out["lr_forward_kernel"] = ("ssd_last_row.cu", [lr_forward(z)], "")
        out["lr_backward_kernel"] = ("ssd_last_row.cu", [lr_backward(z)], "B again for dC's sum, dt again for w")
        out["lr_reduce_kernel"] = ("ssd_last_row.cu", [lr_reduce(z)], "")
    return out


def step_calls(z):
    """Kernel name -> (file, the Costs of its calls in one step in the order
    the step runs them, what its design re-reads). With the training table
    the VSN forward fills the table (vsn_fused_kernel, table mode) and
    combines; the backward runs tt_grad, the fused backward over the bars,
    its finish and dlog. Without it (few windows: the expected distinct
    bars over 0.8 of the rows) the fused kernels run over the rows
    (vsn_fused_kernel's v mode, no combine; bwd_ds_kernel, not modelled,
    besides). dlog: the tile kernel (bwd_dlog_kernel past F = 95). With the
    tail, block L-1's gated RMSNorm over the last rows (after the full
    blocks' in the forward, before them in the backward) and
    m2_add_rows_kernel; conv runs over every row in every block."""
    L, n = z.L, z.Bsz
    out = ssd_calls(z)
    fill = vsn_fill(z)
    if z.table:
        out[fill[0]] = (fill[1], [fill[2]], "weights per block from L2")
        if combine_kernel(z) == "tt_combine_kernel":
            out["tt_combine_kernel"] = ("vsn_train_table.cu", [tt_combine(z)], "")
        else:
            out["table_combine4_kernel"] = ("vsn_forward_fused.cu", [table_combine(z)], "a table row once a window row")
        out["tt_grad_kernel"] = ("vsn_train_table.cu", [tt_grad(z)], "a row's dv once a variable, from cache")
    else:
        out[fill[0]] = (fill[1], [fill[2]], "")
    if z.tail:
        out["m2_add_rows_kernel"] = ("mamba2.cu", [add_rows(z)], "")
    out.update({
        "vsn_bwd_fused_kernel": ("vsn_backward_fused.cu", [vsn_backward_fused(z)], "dv from L2 once a variable"),
        "bwd_finish_kernel": ("vsn_backward_fused.cu", [bwd_finish(z)], ""),
        dlog_kernel(z): ("vsn_backward_fused.cu", [bwd_dlog(z)], "dalpha read twice"),
        "sel_tail_group_kernel": ("vsn.cu", [sel_tail_group(z)], ""),
        "elu_bwd_kernel": ("vsn.cu", [elu_bwd(z, z.Hs)], ""),
        "conv_forward_tile_kernel": ("conv1d.cu", [conv_forward(z)] * L, "history rows from cache"),
        "conv_backward_tile_kernel": ("conv1d.cu", [conv_backward(z)] * L, "halo rows from cache"),
        "conv_params_finish_kernel": ("conv1d.cu", [conv_params_finish(z)] * L, ""),
        "rms_forward_regs_kernel": ("rmsnorm_gated.cu", [rms_forward(z)] * z.Lf + [rms_forward(z, n)] * z.tail, ""),
        "rms_backward_regs_kernel": ("rmsnorm_gated.cu", [rms_backward(z, n)] * z.tail + [rms_backward(z)] * z.Lf,
                                     ""),
        "rms_dw_finish_kernel": ("rmsnorm_gated.cu", rms_dw_finish_calls(z), ""),
        "ln_forward_kernel": ("layernorm.cu", ln_forward_calls(z), ""),
        "ln_backward_dx_kernel": ("layernorm.cu", ln_backward_dx_calls(z), ""),
        "ln_param_grad_kernel": ("layernorm.cu", ln_param_grad_calls(z), ""),
        "colsum_part_kernel": ("linear.cu", colsum_calls(z), ""),
        "colsum_finish_kernel": ("linear.cu", colsum_finish_calls(z), ""),
    })
    return {k: v for k, v in out.items() if v[1]}

# ---- reading the profile -------------------------------------------------------

GEMM_WORDS = ("gemm", "xmma", "cutlass", "splitkreduce", "cublas", "gemv")


def display_name(full):
    """The kernel's name as ncu_summary.py shows it: the text before the
    first "(" of ncu's demangled signature."""
    return full.replace("(anonymous namespace)::", "").split("(")[0].strip()


def base_name(full):
    """The bare function name, to match our models: no return type, no
    namespace, no template arguments ("void scan_backward_kernel<8, 1>" ->
    "scan_backward_kernel")."""
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




def kernel_calls(prof, name):
    """The profile's calls of one of our kernels (by its bare name)."""
    return sum(c for n, c in prof.calls.items() if base_name(n) == name)


def infer_steps(prof, z):
    """Steps in the capture from the first of STEP_MARKERS that the step
    runs and the profile holds: scan_backward_kernel (or
    chunk_backward_kernel) L - 1 a step with the tail, L without; else
    lr_backward_kernel, once a step with the tail."""
    model = step_calls(z)
    for marker in STEP_MARKERS:
        per, calls = len(model[marker][1]) if marker in model else 0, kernel_calls(prof, marker)
        if per and calls:
            break
    else:
        return 1, f"no {' or '.join(STEP_MARKERS)} in the profile: 1 step assumed (give --steps)"
    steps = max(1, round(calls / per))
    note = f"{steps} steps, from {marker}: {calls} calls, {per} a step"
    if z.tail and marker != "lr_backward_kernel":
        note += " (L - 1: the last block runs the last-row tail)"
    if calls != steps * per:
        note += " (not a whole number of steps: rounded)"
    return steps, note


def tail_check(prof, z):
    """A sentence where the profile's path and --tail disagree (None where
    they agree): the lr_* kernels ran, or did not, against the model's."""
    lr = kernel_calls(prof, "lr_backward_kernel") + kernel_calls(prof, "lr_forward_kernel")
    full = sum(kernel_calls(prof, m) for m in FULL_MARKERS)
    if lr and not z.tail:
        return (f"the profile has the last-row tail's kernels ({lr} lr_forward / lr_backward calls) but the model "
                f"counts the full last block (--tail 0{'' if tail_fits(z) else ': the tail does not fit here'}): "
                f"the step count and the rows are wrong; give --tail 1")
    if z.tail and not lr and full:
        return ("the profile has no lr_forward / lr_backward_kernel but the model counts the last-row tail "
                "(--tail 1): a build run with --last-row-tail 0? give --tail 0")
    return None


# ---- ceilings ------------------------------------------------------------------


def quad_check(prof, z):
    """A sentence where the profile's SSD kernels and --quad disagree (None
    where they agree): the quad backward ran and the model counts the scan
    backward, or the other way round."""
    quad = kernel_calls(prof, "scan_quad_backward_kernel")
    old = kernel_calls(prof, "scan_backward_kernel") + kernel_calls(prof, "reduce_group_kernel")
    if quad and not z.quad:
        return ("the profile has the quad SSD backward (scan_quad_backward_kernel) but the model counts the scan "
                "backward (--quad 0, or a shape or precision it does not take): give --quad 1")
    if z.quad and not quad and old:
        return ("the profile has scan_backward / reduce_group but the model counts the quad SSD scans (--quad 1): "
                "a run with --scan-quad 0 --scan-quad-backward 0, or an older build? give --quad 0")
    return None

class Ceilings:
    """copy GB/s; fp32 (sgemm, the CUDA cores) TFLOP/s; gemm: the cuBLAS
    products' ceiling in bf16 mode (32F_FAST_16BF); tf32: the scans' TF32
    WMMA tiles; where each came from; the JSON (or {})."""

    def __init__(self, args):
        ours, src = {}, "defaults (H200, 2026-12-01)"
        if args.ceilings:
            with open(args.ceilings) as f:
                ours = json.load(f)
            src = args.ceilings
        c = ours.get("ceilings", {})
        self.ours, self.src = ours, src
        self.copy = args.copy_gbps or c.get("copy", {}).get("GBps") or DEFAULT_COPY_GBPS
        self.fp32 = args.fp32_tflops or c.get("sgemm", {}).get("TFLOPs") or DEFAULT_FP32_TFLOPS
        json_gemm = c.get("gemm_fp32_fast_bf16", {}).get("TFLOPs")
        self.gemm = args.gemm_tflops or json_gemm or DEFAULT_GEMM_TFLOPS
        self.gemm_src = ("--gemm-tflops" if args.gemm_tflops else "measured, gemm_fp32_fast_bf16" if json_gemm
                         else "2026-12-01 measured (bench/results/2026-12-01-a), no JSON")
        json_tf32 = c.get("gemm_tf32", {}).get("TFLOPs")
        self.tf32 = args.tf32_tflops or json_tf32 or DEFAULT_TF32_TFLOPS
        self.tf32_src = ("--tf32-tflops" if args.tf32_tflops else "measured, gemm_tf32" if json_tf32
                         else "H200 dense TF32 spec, not measured")
        self.precision = args.precision

    def line(self):
        s = f"Ceilings ({self.src}): copy {self.copy:.1f} GB/s (read + written), fp32 {self.fp32:.1f} TFLOP/s " \
            f"(sgemm, no TF32: the CUDA cores"
        if self.precision == "bf16":
            s += f"; the fused VSN kernels' FMAs and the element-wise work), cuBLAS products on the tensor cores " \
                 f"{self.gemm:.1f} TFLOP/s ({self.gemm_src}; 32F_FAST_16BF, bf16 or TF32 kernels), the scans' " \
                 f"TF32 WMMA tiles {self.tf32:.1f} TFLOP/s ({self.tf32_src})."
        else:
            s += f"; every product, cuBLAS's too: fp32 mode runs cublasSgemm and the CUDA-core scans)."
        return s


def graph_median_ms(ours, windows, precision):
    """The bench's own median of the training step (graph replays)."""
    for row in ours.get("train", []) or []:
        if row.get("windows") == windows and row.get("precision") == precision and "median_ms" in row:
            return row["median_ms"]
    return None


# ---- the table -------------------------------------------------------------------


def fmt_si(x, unit=""):
    return fmt_num(x, unit, sep=" ")


def fmt(x, spec):
    return "n/a" if x is None or not math.isfinite(x) else format(x, spec)


class Row:
    """One line of the table: per step the measured calls and ms and the
    counted FLOPs and bytes (None: not counted), of which step_tc on the
    tensor cores (tc_kind "tf32": the scans' tiles, "gemm": cuBLAS in bf16
    mode); per call = per step / calls. fixed: the floors given (the whole
    step: the sum of the rows')."""

    def __init__(self, name, calls, ms, step_flops=None, step_bytes=None, step_tc=0.0, tc_kind=None):
        self.name, self.calls, self.ms, self.step_f, self.step_b = name, calls, ms, step_flops, step_bytes
        self.step_tc, self.tc_kind = step_tc, tc_kind
        self.per_call, self.fixed = True, None

    def floors(self, ceil):
        """Compute and memory floors of the step's calls, ms (None: not counted)."""
        if self.fixed:
            return self.fixed
        cf = mf = None
        if self.step_f is not None:
            tcc = {"tf32": ceil.tf32, "gemm": ceil.gemm}.get(self.tc_kind, ceil.fp32)
            cf = (self.step_f - self.step_tc) / (ceil.fp32 * 1e9) + self.step_tc / (tcc * 1e9)
        if self.step_b is not None:
            mf = self.step_b / (ceil.copy * 1e6)
        return cf, mf

    def cells(self, ceil):
        cf, mf = self.floors(ceil)
        sec = self.ms * 1e-3

        def per(x):
            return x if not self.per_call else x / self.calls if x is not None and self.calls else None

        tf = self.step_f / sec / 1e12 if self.step_f is not None and sec > 0 else None
        gb = self.step_b / sec / 1e9 if self.step_b is not None and sec > 0 else None
        floor = max(cf, mf) if cf is not None and mf is not None else None
        binds = ("compute" if cf > mf else "memory") if floor is not None else "n/a"
        over = self.ms / floor if floor else None
        pct = 100.0 * gb / ceil.copy if gb is not None else None
        calls = f"{self.calls:.0f}" if abs(self.calls - round(self.calls)) < 1e-9 else f"{self.calls:.1f}"
        return [self.name, calls, fmt(self.ms, ".3f"), fmt_si(per(self.step_f)), fmt_si(per(self.step_b), "B"),
                fmt(cf, ".3f"), fmt(mf, ".3f"), fmt(tf, ".2f"), fmt(gb, ".0f"), fmt(pct, ".1f"), fmt(over, ".1f"),
                binds]


HEADER = ["kernel", "calls/step", "ms/step", "FLOP/call", "bytes/call", "compute floor ms", "memory floor ms",
          "TFLOP/s", "GB/s", "% copy", "x floor", "binds"]


def measured_cost(costs, calls):
    """FLOPs, bytes, design bytes and tensor-core FLOPs of `calls` calls of a
    kernel whose step runs `costs` in that order: whole steps, then the
    first calls of the step the capture ends in."""
    whole, rest = divmod(calls, len(costs))
    run = costs * whole + costs[:rest]
    return (sum(c.flops for c in run), sum(c.bytes for c in run), sum(c.design or c.bytes for c in run),
            sum(c.tc for c in run))


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
        f, b, d, t = measured_cost(costs, calls)
        rows.append(Row(key, calls / steps, us / 1000.0 / steps, f / steps, b / steps, t / steps,
                        "tf32" if t else None))
        if calls != steps * len(costs):
            notes.append(f"{key}: {calls} calls in {steps} steps, {len(costs)} a step expected (the capture "
                         f"ends inside a step, or another path ran): counted as the first calls of a step, in the "
                         f"order it runs them")
        if d > b:
            gbs = d / (us * 1e-6) / 1e9 if us > 0 else float("nan")
            notes.append(f"{key} ({fname}): the design reads {fmt_si(d / calls, 'B')} a call (minimum "
                         f"{fmt_si(b / calls, 'B')}; {note}): {gbs:.0f} GB/s at that count")
    cub = cublas_step(z)
    if gemm[0]:
        # the products of whole steps, however many kernels (split-K reductions too) ran them
        f, b = sum(c.flops for c in cub), sum(c.bytes for c in cub)
        tc = f if z.tc else 0.0
        rows.append(Row(f"cuBLAS products ({len(gemm[2])} names)", gemm[0] / steps, gemm[1] / 1000.0 / steps, f, b,
                        tc, "gemm" if z.tc else None))
        if gemm[0] < steps * len(cub):
            notes.append(f"cuBLAS: {gemm[0]} kernels in {steps} steps, fewer than the {len(cub)} products a step: "
                         f"the capture (or the summary's rows) misses some, so its rates are too high")
    for mismatch in (tail_check(prof, z), quad_check(prof, z)):
        if mismatch:
            notes.insert(0, "WARNING: " + mismatch)
    missing = sorted(k for k in model if k not in seen)
    if missing:
        notes.append("modelled, not in the profile (or below a summary's rows): " + ", ".join(missing))
    rows.sort(key=lambda r: -r.ms)
    unlisted = (max(prof.launches - sum(prof.calls.values()), 0), max(prof.total_us - sum(prof.us.values()), 0.0))
    if other[2]:
        top = sorted(other[2], key=lambda n: -prof.us[n])[:5]
        notes.append(f"not modelled ({len(other[2])} names, in the rest): " + ", ".join(
            f"{n} {prof.us[n] / 1000.0 / steps:.3f} ms" for n in top) + (", ..." if len(other[2]) > 5 else ""))
    return rows, (other[0] + unlisted[0], other[1] + unlisted[1]), notes, cub


def render(prof, z, steps, steps_note, args, ceil):
    rows, (rest_calls, rest_us), notes, cub = build_rows(prof, z, steps)
    shown = rows[: args.top] if args.top else rows
    hidden = rows[len(shown):]
    rest_calls += sum(r.calls for r in hidden) * steps
    rest_us += sum(r.ms for r in hidden) * 1000.0 * steps
    whole = Row("whole step (all kernels)", prof.launches / steps, prof.total_us / 1000.0 / steps,
                sum(r.step_f for r in rows), sum(r.step_b for r in rows))
    whole.per_call = False  # its FLOP and byte cells are the step's
    whole.fixed = (sum(r.floors(ceil)[0] for r in rows), sum(r.floors(ceil)[1] for r in rows))
    tail = Row("the rest (time only)" + (f", {len(hidden)} rows below --top" if hidden else ""), rest_calls / steps,
               rest_us / 1000.0 / steps)
    table = (f"training bar table on: the VSN's per-variable GRNs over {z.nb:,} distinct bars ({z.bars_from})"
             if z.table else "training bar table off (expected distinct bars over 0.8 of the rows): the VSN "
                             "over the rows")
    if z.tail:
        lr = (f"last-row tail on (--tail 1): block {z.L - 1}'s SSD, gated RMSNorm, out_proj and residual at the "
                f"{z.Bsz:,} last rows")
    else:
        lr = "last-row tail off (--tail 0" + ("" if tail_fits(z) else ", or its SSD does not fit") + \
               "): every block over every row"
    out = [f"Roofline of one training step: preset {args.preset}, {z.Bsz:,} windows ({z.R:,} rows), "
           f"{z.precision}; {steps_note}; {table}; {lr}.", ceil.line(), ""]
    out.append("| " + " | ".join(HEADER) + " |")
    out.append("|" + "---|" * len(HEADER))
    for r in [whole] + shown + [tail]:
        out.append("| " + " | ".join(r.cells(ceil)) + " |")
    floors = sum(max(r.floors(ceil)) for r in rows)
    out += ["", f"Whole step: FLOP and bytes a step, those of the modelled rows (the rest not counted), its floors "
                f"the sums of theirs; each modelled row at its own floor: {floors:.2f} ms a step, against "
                f"{whole.ms:.2f} ms measured (ncu, serialised). x floor: the time over the larger floor."]
    graph = graph_median_ms(ceil.ours, z.Bsz, z.precision)
    if graph:
        out.append(f"The bench's own median of the step (graph replays, same JSON): {graph:.2f} ms.")
    out.append(f"cuBLAS products: {len(cub)} a step, FLOPs and bytes counted from their shapes "
               f"({fmt_si(sum(c.flops for c in cub), 'FLOP')} a step); calls/step counts their kernels, split-K "
               f"reductions included.")
    tcrows = [r for r in rows if r.tc_kind == "tf32"]
    if tcrows:
        out.append("Scans (bf16 mode): compute floor = their TF32 tiles' FLOPs at the TF32 figure + the rest "
                   "(decays, element-wise double work) at fp32: " + "; ".join(
                       f"{r.name} {fmt_si(r.step_tc / r.calls, 'FLOP')} of {fmt_si(r.step_f / r.calls, 'FLOP')} a "
                       f"call on the tensor cores" for r in tcrows) + ".")
    tfw = ceil.ours.get("train_flops_per_window")
    if tfw:
        out.append(f"The bench's hand count of the step (train_flops_per_window x windows: every product, the "
                   f"SSD's and the VSN's own too, no element-wise work): {fmt_si(tfw * z.Bsz, 'FLOP')}.")
    if args.summary:
        out.append("From a summary: the kernels below its printed rows are in the rest (cuBLAS ones too).")
    slow = [r.name for r in rows if r.step_f is not None and r.ms > 4 * max(r.floors(ceil))]
    if slow:
        out.append(f"More than 4x over both floors (latency, occupancy or re-reads, not a ceiling): "
                   f"{', '.join(slow)}.")
    if z.Dv not in (8, 16, 32):
        out.append(f"VSN: Dv = {z.Dv} runs the unfused per-variable path (vsn.cu's products and gate kernels), "
                   f"which nothing here models: the fused kernels' rows stand for it.")
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


SB = "void scan_backward_kernel<8, 1>(ssd_dev_args, float *, float *, float *, float *, float *)"
SAMPLE_CSV = "\n".join(
    ["==PROF== Connected to process 1234", "== train: the program's own output comes first",
     ",".join(f'"{c}"' for c in NCU_COLUMNS),
     ncu_line(0, "void vsn_bwd_fused_kernel<32, 1>(bwd_args)", "usecond", "2,198.50"),
     ncu_line(1, SB, "msecond", "2.7"), ncu_line(2, SB, "msecond", "2.8"),
     ncu_line(3, "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_16x5_nt_align4>(T1::Params)", "nsecond",
              "32,900"),
     ncu_line(4, SB, "msecond", "2.6"), ncu_line(5, SB, "msecond", "2.9")]) + "\n"

# the samples above and below: 2 steps of the build before the tail (4 scan_backward_kernel calls)
SAMPLE_SUMMARY = """358 kernel launches, 32.25 ms in all
kernel                                                                    calls   total us   mean us  share
void scan_backward_kernel<8, 1>                                               4    10918.8    2729.7  33.9%
void vsn_bwd_fused_kernel<32, 1>                                              2     4397.1    2198.5  13.6%
scan_tc_pair_kernel                                                           4     2185.0     546.2   6.8%
tt_grad_kernel                                                                2     1688.7     844.4   5.2%
void cublasLt::splitKreduce_kernel<32, 16, int, float, float, float, f       30      257.5       8.6   0.8%
"""


# 2 steps with the tail: rows of bench/results/2026-12-02-profile-merged.txt (2,048 windows, bf16)
SAMPLE_SUMMARY_TAIL = """364 kernel launches, 23.90 ms in all
kernel                                                                    calls   total us   mean us  share
void scan_backward_kernel<8, 1>                                               2     5507.8    2753.9  23.0%
scan_tc_pair_kernel                                                           2     1099.6     549.8   4.6%
lr_backward_kernel                                                            2      741.6     370.8   3.1%
void rms_backward_regs_kernel<2>                                              4      728.1     182.0   3.0%
reduce_group_kernel                                                           2      296.3     148.1   1.2%
lr_forward_kernel                                                             2      167.1      83.6   0.7%
"""


def synthetic_profile(z, steps):
    """A profile of `steps` whole steps as the model runs them at z: each
    modelled kernel its calls a step times steps (10 us a call), the cuBLAS
    products one GEMM kernel each."""
    prof = Profile()
    for name, (_, costs, _) in step_calls(z).items():
        prof.add(name, steps * len(costs), steps * len(costs) * 10.0)
    prof.add("sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32", steps * len(cublas_step(z)), 100.0)
    return prof


def per_step_calls(prof, z, steps):
    """Kernel -> calls a step as build_rows reads them, and its notes."""
    rows, _, notes, _ = build_rows(prof, z, steps)
    return {r.name: r.calls for r in rows if not r.name.startswith("cuBLAS")}, notes


class Tiny:
    """Sizes of the self-test's one small chunk."""
    P, N, nc = 1, 1, 1


class Tiny96:
    """F = 96: past the dlog tile's 48 KB (4 x 32 x 97 floats)."""
    F = 96


class Args:
    """The flags render and Ceilings read, as main's defaults give them."""
    ceilings = copy_gbps = fp32_tflops = gemm_tflops = tf32_tflops = None
    preset, top, summary, precision, tail = "default", 0, "x", "bf16", 1


def selftest():
    # the 2026-12-02 build (the sample profiles'): bf16, the default 70,000 bars, the tail on, no quad scans
    z = Sizes("default", 2048, quad=0, vsn_tc=0)
    z0 = Sizes("default", 2048, tail=0, quad=0, vsn_tc=0)  # the full last block (--last-row-tail 0)
    zf = Sizes("default", 2048, "fp32")
    zq = Sizes("default", 2048)  # the 2026-12-03 build: the quad scans and the VSN fill on the tensor cores
    qf, qb = scan_quad(zq), scan_quad_backward(zq)
    sb, sp, sf = scan_backward(z), scan_forward(z), scan_forward(zf)
    lf, lb, lrr = lr_forward(z), lr_backward(z), lr_reduce(z)
    checks = [
        ("rows", z.R, 131072), ("d_inner, heads, conv_dim, in_proj_out", (z.di, z.H, z.conv, z.io), (256, 8, 384, 648)),
        ("chunks", z.chunks, [32, 32]),
        ("bars: 70,000 at 2,048 windows, table on; 64 windows: off", (z.nb, z.table, Sizes("default", 64).table),
         (70000, True, False)),
        ("bars scaled at 8,192 windows (70,000 / 71,491.6 x 95,592.2)", Sizes("default", 8192).nb, 93598),
        ("scan_backward FLOPs (bf16)", sb.flops, 20_494_942_208), ("scan_backward TF32 FLOPs", sb.tc, 19_595_788_288),
        ("scan_backward FLOPs (fp32)", scan_backward(zf).flops, 20_672_675_840),
        ("scan_backward bytes", sb.bytes, 1_015_283_776),
        ("scan_tc_pair FLOPs", sp.flops, 7_814_774_784), ("scan_tc_pair TF32 FLOPs", sp.tc, 7_616_856_064),
        ("scan_tc_pair bytes", sp.bytes, 339_738_688),
        # fp32: chunk 0 110,496 + chunk 1 244,176 + the state L + Lp + 2pNL + 2pN 136,224 = 490,896 a block
        ("scan_forward (fp32) FLOPs", (sf.flops, sf.tc), (8_042_840_064, 0)),
        ("vsn_bwd_fused (table) FLOPs, bytes", (vsn_backward_fused(z).flops, vsn_backward_fused(z).bytes),
         (56_985_600_000, 404_491_200)),
        ("vsn_fused (table) FLOPs, bytes", (vsn_forward_fused(z).flops, vsn_forward_fused(z).bytes),
         (19_084_800_000, 370_412_480)),
        ("tt_grad FLOPs, bytes", (tt_grad(z).flops, tt_grad(z).bytes), (671_088_640, 797_296_068)),
        ("table_combine FLOPs, bytes, design",
         (table_combine(z).flops, table_combine(z).bytes, table_combine(z).design),
         (335_544_320, 396_673_024, 709_361_664)),
        # 4 (R (F + 1 + Dv) + nb P + nb + 1) = 4 (9,568,256 + 89,600,000 + 70,001)
        ("tt_combine FLOPs, bytes; the training combine", (tt_combine(z).flops, tt_combine(z).bytes, combine_kernel(z)),
         (335_544_320, 396_953_028, "tt_combine_kernel")),
        ("the dlog kernel at F = 40, at 96", (dlog_kernel(z), dlog_kernel(Tiny96())),
         ("bwd_dlog_tile_kernel", "bwd_dlog_kernel")),
        # a window: 5 H K 2,560 + 2 G K N 8,192 + (2K + 2) H p 33,280 = 44,032; 4 (R 328 + Bsz 320 + 16)
        ("lr_forward FLOPs, bytes", (lf.flops, lf.bytes), (90_177_536, 174_587_968)),
        # a window: 14 H K 7,168 + 4 H K p 65,536 + 2 H p 512 + 5 G K N 20,480 = 93,696;
        # 4 (R (2 H p + 3 G N + 2 H) 720 + Bsz (G N + H p + 2 H) 336 + 2 H); design + 4 R (G N + H)
        ("lr_backward FLOPs, bytes, design", (lb.flops, lb.bytes, lb.design),
         (191_889_408, 380_239_936, 417_988_672)),
        ("lr_reduce FLOPs, bytes (2 Bsz H + 2 H; 4 (2 Bsz H + 4 H))", (lrr.flops, lrr.bytes), (32_784, 131_200)),
        # 8 H K + 4 (G N + G K + H K + H p + 2 H K + G K) = 4,096 + 4 x 1,984
        ("lr shared memory a window (backward); tail fits: default, large, K = 4,096",
         (lr_smem_bytes(64, 8, 32, 1, 64, 1), z.tail, Sizes("large", 64).tail,
          lr_smem_bytes(4096, 8, 32, 1, 64, 1) <= SMEM_OPTIN), (12_032, True, True, False)),
        # over the 2,048 last rows: 9 n di + 4 n; 4 (3 n di + n + di); 21 n di + 2 n; + 8 x 16 splits x di
        ("the tail's rms_forward FLOPs, bytes", (rms_forward(z, 2048).flops, rms_forward(z, 2048).bytes),
         (4_726_784, 6_300_672)),
        ("the tail's rms_backward FLOPs, bytes, splits",
         (rms_backward(z, 2048).flops, rms_backward(z, 2048).bytes, rms_bwd_splits(z, 2048)),
         (11_014_144, 10_527_744, 16)),
        # the tail's LayerNorm: no copy in the forward (4 (2 R D + 2 R + 2 D)), no residual in the backward
        ("the tail's LayerNorms: forward bytes, dx FLOPs and bytes",
         (ln_forward_calls(z)[1].bytes, ln_backward_dx_calls(z)[1].flops, ln_backward_dx_calls(z)[1].bytes),
         (135_267_328, 168_296_448, 202_375_680)),
        ("m2_add_rows FLOPs, bytes (Bsz D; 12 Bsz D)", (add_rows(z).flops, add_rows(z).bytes), (262_144, 3_145_728)),
        ("rms_backward_regs FLOPs, bytes", (rms_backward(z).flops, rms_backward(z).bytes), (704_905_216, 673_711_104)),
        ("rms_forward_regs FLOPs, bytes", (rms_forward(z).flops, rms_forward(z).bytes), (302_514_176, 403_178_496)),
        ("bwd_dlog FLOPs, bytes", (bwd_dlog(z).flops, bwd_dlog(z).bytes), (20_971_520, 83_886_080)),
        ("sel_tail_group FLOPs, bytes", (sel_tail_group(z).flops, sel_tail_group(z).bytes), (94_896_128, 147_849_536)),
        ("conv_forward bytes", conv_forward(z).bytes, 402_660_864),
        ("in_proj forward FLOPs", gemm_cost(z.R, z.io, z.D, 1, 0).flops, 21_743_271_936),
        ("cuBLAS products a step: tail on, off", (len(cublas_step(z)), len(cublas_step(z0))), (43, 41)),
        # out_proj forward, dX, dW and in_proj's z columns' dX, dW over Bsz rows, not R: 5 x 2 (R - Bsz) D di
        ("cuBLAS FLOPs the tail saves",
         sum(c.flops for c in cublas_step(z0)) - sum(c.flops for c in cublas_step(z)), 42_278_584_320),
        ("colsum calls a step (the profile's 26 in 2 steps)", len(colsum_calls(z)), 13),
        ("colsum_finish calls a step (38 in 2 steps)", len(colsum_finish_calls(z)), 19),
        ("LayerNorm calls a step: forward, dx, params (6, 8, 6 in 2 steps)",
         (len(ln_forward_calls(z)), len(ln_backward_dx_calls(z)), len(ln_param_grad_calls(z))), (3, 4, 3)),
        ("SSD staged and fused: default yes, large no", (ssd_fused(z), ssd_fused(Sizes("large", 64))), (True, False)),
        ("SSD kernels without the tail: bf16, fp32, large",
         (sorted(ssd_calls(z0)), sorted(ssd_calls(Sizes("default", 2048, "fp32", tail=0))),
          sorted(ssd_calls(Sizes("large", 64, tail=0)))),
         (["reduce_group_kernel", "scan_backward_kernel", "scan_tc_pair_kernel"],
          ["reduce_group_kernel", "scan_backward_kernel", "scan_forward_kernel"],
          # large: P N = 8,192 > 2,048 (the chunk backward); K = 2Q = 128, Q = 64: the pair kernel
          ["chunk_backward_kernel", "chunk_summary_kernel", "reduce_group_kernel", "scan_tc_pair_kernel"])),
        ("SSD calls a step: tail on (L - 1 full blocks), off",
         ({k: len(v[1]) for k, v in ssd_calls(z).items()}, {k: len(v[1]) for k, v in ssd_calls(z0).items()}),
         ({"scan_tc_pair_kernel": 1, "scan_backward_kernel": 1, "reduce_group_kernel": 1, "lr_forward_kernel": 1,
           "lr_backward_kernel": 1, "lr_reduce_kernel": 1},
          {"scan_tc_pair_kernel": 2, "scan_backward_kernel": 2, "reduce_group_kernel": 2})),
        # large, tail on: 3 full blocks, the chunk kernels' summaries one a direction a block
        ("large with the tail: chunk_summary, chunk_backward, lr_backward calls",
         tuple(len(ssd_calls(Sizes("large", 64))[k][1]) for k in
               ("chunk_summary_kernel", "chunk_backward_kernel", "lr_backward_kernel")), (3, 3, 1)),
        ("tiny (L = 1) with the tail: no scan, the lr kernels",
         sorted(ssd_calls(Sizes("tiny", 64))), ["lr_backward_kernel", "lr_forward_kernel", "lr_reduce_kernel"]),
        ("norms a step with the tail: rms forward rows, rms backward rows, rms_dw_finish, m2_add_rows",
         ([c.flops for c in step_calls(z)["rms_forward_regs_kernel"][1]] == [rms_forward(z).flops,
                                                                             rms_forward(z, 2048).flops],
          [c.bytes for c in step_calls(z)["rms_backward_regs_kernel"][1]] == [rms_backward(z, 2048).bytes,
                                                                              rms_backward(z).bytes],
          len(step_calls(z)["rms_dw_finish_kernel"][1]), len(step_calls(z)["m2_add_rows_kernel"][1]),
          "m2_add_rows_kernel" in step_calls(z0)), (True, True, 2, 1, False)),
        # a chunk of L = 2, P = N = 1 (c = 0): a 2, M 3 x 5 + 1 segment add, Y 2 x 3, D X 4
        ("chunk_forward one small chunk", forward_chunk_flops(Tiny(), 2, 0), 28),
        # quad forward a block: TF32 2 x 2,560 x 64 + 8 x 2 x 2,560 x 32 = 1,638,400; + 8 (64 + 4 x 2,080 +
        # 4,096) = 1,738,240, x 2,048 blocks
        ("scan_quad FLOPs, TF32 FLOPs, bytes (the scan forward's minimum)", (qf.flops, qf.tc, qf.bytes),
         (3_559_915_520, 3_355_443_200, 339_738_688)),
        # quad backward a block: TF32 3 x 2 x 2,560 x 64 + 8 x 4 x 2,560 x 32 = 3,604,480; + 8 (64 + 10 x 2,080 +
        # 10 x 64 + 4,096) = 3,809,280 (notes-scan-quad-backward.md: 7.4 GFLOP, 545 MB a call);
        # bytes 4 R (648 + 264 + 128) + 4 (16 + 2 Bsz H)
        ("scan_quad_backward FLOPs, TF32 FLOPs, bytes", (qb.flops, qb.tc, qb.bytes),
         (7_801_405_440, 7_381_975_040, 545_390_656)),
        ("the 2026-12-03 build's SSD and VSN fill kernels: bf16 with the tail; fp32; --quad 0",
         (sorted(ssd_calls(zq)), vsn_fill(zq)[0], vsn_fill(zf)[0], sorted(ssd_calls(Sizes("default", 2048, quad=0)))),
         (["lr_backward_kernel", "lr_forward_kernel", "lr_reduce_kernel", "scan_quad_backward_kernel",
           "scan_quad_kernel"], "vsn_fused_tc_kernel", "vsn_fused_kernel",
          ["lr_backward_kernel", "lr_forward_kernel", "lr_reduce_kernel", "reduce_group_kernel",
           "scan_backward_kernel", "scan_tc_pair_kernel"])),
        ("the VSN fill's tensor-core FLOPs (70,000 bars x 40 x 6 x 32^2)", vsn_fill(zq)[2].tc, 17_203_200_000),
    ]
    ceil = Ceilings(Args())
    rb = Row("scan_backward_kernel", 1, 2.73, sb.flops, sb.bytes, sb.tc, "tf32")
    rv = Row("vsn_bwd_fused_kernel", 1, 2.2, vsn_backward_fused(z).flops, vsn_backward_fused(z).bytes)
    checks += [
        # 19,595,788,288 / 495e9 + 899,153,920 / 51.3e9 = 0.03959 + 0.01753 ms; 1,015,283,776 / 4,257.8e6
        ("scan_backward floors (TF32 495, fp32 51.3, copy 4,257.8)", tuple(round(x, 4) for x in rb.floors(ceil)),
         (0.0571, 0.2385)),
        ("vsn_bwd_fused compute floor (fp32 51.3)", round(rv.floors(ceil)[0], 4), 1.1108),
    ]
    prof = parse_ncu_csv(SAMPLE_CSV)
    checks += [
        ("CSV kernels", sorted(base_name(n) for n in prof.calls),
         ["Kernel2", "scan_backward_kernel", "vsn_bwd_fused_kernel"]),
        ("CSV templated name", base_name("void vsn_bwd_fused_kernel<32, 1>"), "vsn_bwd_fused_kernel"),
        ("CSV units (us, ms, ns)",
         round(prof.us["void vsn_bwd_fused_kernel<32, 1>"] + prof.us["void scan_backward_kernel<8, 1>"], 3),
         2198.5 + 11000.0),
        ("CSV gemm", is_gemm("void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_16x5_nt_align4>"), True),
        ("CSV steps (tail off: 4 scan_backward calls, 2 a step)", infer_steps(prof, z0)[0], 2),
    ]
    summ = parse_summary(SAMPLE_SUMMARY)
    text = render(summ, z0, 2, "2 steps (--steps)", Args(), ceil)
    checks += [
        ("summary rows", summ.calls["void cublasLt::splitKreduce_kernel<32, 16, int, float, float, float, f"], 30),
        ("summary whole capture", (summ.launches, round(summ.total_us, 1)), (358, 32250.0)),
        ("summary untemplated name", base_name("scan_tc_pair_kernel"), "scan_tc_pair_kernel"),
        ("summary steps (tail off)", infer_steps(summ, z0)[0], 2),
        ("summary: the first table only", parse_summary(SAMPLE_SUMMARY + SAMPLE_SUMMARY).launches, 358),
        ("the table names bf16 and the TF32 figure",
         ("bf16;" in text, "TF32 WMMA tiles 495.0 TFLOP/s" in text, "| scan_backward_kernel | 2 |" in text),
         (True, True, True)),
    ]
    # synthetic profiles of 2 whole steps: each kernel's calls a step recovered, the tail on and off
    for name, zz in (("tail on", z), ("tail off", z0), ("quad, tail on", zq),
                     ("quad, tail off", Sizes("default", 2048, tail=0)), ("tiny, tail on (L = 1)", Sizes("tiny", 64)),
                     ("fp32, tail on", zf), ("large, tail on", Sizes("large", 64))):
        syn = synthetic_profile(zz, 2)
        steps, note = infer_steps(syn, zz)
        calls, notes = per_step_calls(syn, zz, steps)
        want = {k: len(v[1]) for k, v in step_calls(zz).items()}
        checks += [(f"synthetic 2 steps, {name}: steps; calls a step; no count or tail note",
                    (steps, calls == want, [n for n in notes if "a step expected" in n or "WARNING" in n]),
                    (2, True, []))]
    on, off = synthetic_profile(z, 2), synthetic_profile(z0, 2)
    checks += [
        ("a tail-on profile read with --tail 0: 1 step and a warning",
         (infer_steps(on, z0)[0], tail_check(on, z0) is not None), (1, True)),
        ("a tail-off profile read with --tail 1: 4 steps and a warning",
         (infer_steps(off, z)[0], tail_check(off, z) is not None), (4, True)),
        ("an old build's profile read with --quad 1, a quad one with --quad 0: warnings; none when they agree",
         (quad_check(on, zq) is not None, quad_check(synthetic_profile(zq, 2), z) is not None,
          quad_check(on, z), quad_check(synthetic_profile(zq, 2), zq)), (True, True, None, None)),
        ("the quad build's step marker", infer_steps(synthetic_profile(zq, 2), zq)[1],
         "2 steps, from scan_quad_backward_kernel: 2 calls, 1 a step (L - 1: the last block runs the last-row tail)"),
        ("the step's marker: scan_backward with the tail, lr_backward at L = 1",
         (infer_steps(on, z)[1], infer_steps(synthetic_profile(Sizes("tiny", 64), 2), Sizes("tiny", 64))[1]),
         ("2 steps, from scan_backward_kernel: 2 calls, 1 a step (L - 1: the last block runs the last-row tail)",
          "2 steps, from lr_backward_kernel: 2 calls, 1 a step")),
    ]
    summ = parse_summary(SAMPLE_SUMMARY_TAIL)
    text = render(summ, z, *infer_steps(summ, z), Args(), ceil)
    checks += [
        ("2026-12-02 rows (tail on): steps", infer_steps(summ, z)[0], 2),
        ("2026-12-02 rows: the whole step, scan_backward, lr_backward, rms_backward (2 a step: R and Bsz rows)",
         tuple(any(line.startswith(row) for line in text.splitlines()) for row in (
             "| whole step (all kernels) | 182 | 11.950 |", "| scan_backward_kernel | 1 | 2.754 | 20.5 G | 1.02 GB |",
             "| lr_backward_kernel | 1 | 0.371 | 192 M | 380 MB |",
             "| rms_backward_regs_kernel | 2 | 0.364 | 358 M |")),
         (True, True, True, True)),
        ("2026-12-02 rows: no tail warning with --tail 1, one with --tail 0",
         ("WARNING" in text, "WARNING" in render(summ, z0, 1, "1 step", Args(), ceil)), (False, True)),
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
    ap.add_argument("--precision", default="fp32", choices=("fp32", "bf16"),
                    help="the run's matrix-product precision (default fp32, gpu-check.sh's PROFILE_PRECISION's)")
    ap.add_argument("--ceilings", help="ssmtrade bench --json output (ceilings, train rows)")
    ap.add_argument("--copy-gbps", type=float, help=f"copy ceiling, GB/s (default {DEFAULT_COPY_GBPS})")
    ap.add_argument("--fp32-tflops", type=float, help=f"fp32 ceiling, TFLOP/s (default {DEFAULT_FP32_TFLOPS})")
    ap.add_argument("--gemm-tflops", type=float,
                    help=f"bf16 mode's cuBLAS ceiling, TFLOP/s (default the JSON's, else {DEFAULT_GEMM_TFLOPS})")
    ap.add_argument("--tf32-tflops", type=float,
                    help=f"the scans' TF32 tiles' ceiling, TFLOP/s (default {DEFAULT_TF32_TFLOPS}, the spec)")
    ap.add_argument("--preset", default="default", choices=sorted(PRESETS))
    ap.add_argument("--windows", type=int, default=2048)
    ap.add_argument("--bars", type=int, help="distinct bars of the minibatch (default: 70,000 at 2,048 windows, "
                                             "scaled by the expected count elsewhere)")
    ap.add_argument("--market-bars", type=int, default=MARKET_BARS,
                    help=f"bars of the market the windows are drawn from (default {MARKET_BARS:,})")
    ap.add_argument("--tail", type=int, default=1, choices=(0, 1),
                    help="the last block's last-row tail: 1 (default, the build's) or 0 (a profile of "
                         "`ssmtrade bench --last-row-tail 0`, the full last block)")
    ap.add_argument("--quad", type=int, default=1, choices=(0, 1),
                    help="bf16: the quad SSD scans as the build ran them (ssmtrade bench --scan-quad, "
                         "--scan-quad-backward; default 1)")
    ap.add_argument("--vsn-tc", type=int, default=1, choices=(0, 1),
                    help="bf16: the VSN fill on the tensor cores as the build ran it (--vsn-tc; default 1)")
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
        ceil = Ceilings(args)
    except (OSError, ValueError) as e:
        print(f"kernel_roofline.py: {path}: {e}", file=sys.stderr)
        return 2
    z = Sizes(args.preset, args.windows, args.precision, args.bars, args.market_bars, args.tail, args.quad,
              args.vsn_tc)
    steps, note = (args.steps, f"{args.steps} steps (--steps)") if args.steps else infer_steps(prof, z)
    print(render(prof, z, steps, note, args, ceil))
    return 0


if __name__ == "__main__":
    sys.exit(main())
