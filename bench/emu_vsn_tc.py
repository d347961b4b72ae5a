"""emu_vsn_tc.py: an emulation of src/model/vsn_forward_fused_tc.cu's
fragment logic for one warp, for checking it without a GPU. The kernel's
side is a transcription of its index expressions (which lane forms which
h1 values into which A register, which weight pairs make B, how product 1's
accumulators are packed into product 2's A, which accumulators are g1 and
g2 of an output, which lanes' sums make a row's statistics, who writes
which output); the mma.m16n8k16 itself is emulated from the PTX ISA's
fragment formulas alone (lane = 4 groupID + threadID_in_group):
  A  a_i: row groupID (+8 for i in 2,3,6,7), col 2 tid + (i & 1) (+8 for i >= 4)
  B  b_i: row (k) 2 tid + (i & 1) (+8 for i >= 2), col groupID
  C  c_i: row groupID (+8 for i >= 2), col 2 tid + (i & 1)
two elements a register, the lower index in the low half. Each t_j is
compared with a float64 GRN (DESIGN section 5 with the folds U, V, Vg), and
every output must be written by exactly one lane. A transcription: keep it
in step with the kernel by hand.
  python3 bench/emu_vsn_tc.py           exact (float64 operands): ~1e-16
  python3 bench/emu_vsn_tc.py --bf16    operands rounded to bf16 (nearest
                                        even) as the kernel's cvt.rn.bf16x2:
                                        the relative error the GPU test's
                                        2e-2 bound is set against
  python3 bench/emu_vsn_tc.py --swap    product 2's A registers 1 and 2
                                        exchanged (a wrong repacking): must
                                        fail, O(1)
Pure Python (no numpy), a few seconds."""
import math, random, struct, sys

BF16 = '--bf16' in sys.argv
SWAP = '--swap' in sys.argv


def bf16(x):
    if not BF16: return x
    b = struct.unpack('I', struct.pack('f', x))[0]
    b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000  # round to nearest even, 8 mantissa bits
    return struct.unpack('f', struct.pack('I', b))[0]


def elu(x): return x if x > 0 else math.expm1(x)
def sigmoid(x): return 1 / (1 + math.exp(-x))


# ---- the mma, from the ISA's formulas only ----
def mma(d, a, b):
    """d[lane][4] += A B for one m16n8k16 tile; a[lane][4] and b[lane][2] hold (lo, hi) pairs."""
    A = [[None] * 16 for _ in range(16)]
    B = [[None] * 8 for _ in range(16)]
    for lane in range(32):
        g, t = lane >> 2, lane % 4
        for i in range(8):
            row = g if (i < 2 or 4 <= i < 6) else g + 8
            col = 2 * t + (i & 1) + (8 if i >= 4 else 0)
            A[row][col] = a[lane][i // 2][i % 2]
        for i in range(4):
            B[2 * t + (i & 1) + (8 if i >= 2 else 0)][g] = b[lane][i // 2][i % 2]
    for lane in range(32):
        g, t = lane >> 2, lane % 4
        for i in range(4):
            row, col = g + (8 if i >= 2 else 0), 2 * t + (i & 1)
            d[lane][i] += sum(A[row][k] * B[k][col] for k in range(16))


def pair(lo, hi): return (bf16(lo), bf16(hi))


def b_frag(W, p, kt):
    """mma_w's B: lane (g, q) reads W's row 8p + g at columns 16 kt + 2q, +1 and +8, +9."""
    b = []
    for lane in range(32):
        g, q = lane >> 2, lane % 4
        w, c = W[8 * p + g], 16 * kt + 2 * q
        b.append([pair(w[c], w[c + 1]), pair(w[c + 8], w[c + 9])])
    return b


# ---- the kernel's side, one warp (16 MT rows), one variable ----
def warp_variable(DV, s, W2, Wg, vec):
    MT, KT, NT = 32 // DV, DV // 16, DV // 8
    U, V, B1, B2, EW, EB, LNW, LNB = vec
    out = {}  # (row, column) -> t
    for m in range(MT):
        h2 = [[[0.0] * 4 for _ in range(NT)] for _ in range(32)]  # [lane][p][c]
        for kt in range(KT):
            a1, bs = [], []
            for lane in range(32):
                g, q = lane >> 2, lane % 4
                r = 16 * m + g
                k = 16 * kt + 2 * q
                s0, s1 = s[r], s[r + 8]
                h = lambda sj, c: pair(elu(sj * U[c] + V[c]), elu(sj * U[c + 1] + V[c + 1]))
                a1.append([h(s0, k), h(s1, k), h(s0, k + 8), h(s1, k + 8)])
            for p in range(NT):
                mma([h2[lane][p] for lane in range(32)], a1, b_frag(W2, p, kt))
        gg = [[[0.0] * 4 for _ in range(2 * NT)] for _ in range(32)]
        for kt in range(KT):
            a2 = []
            for lane in range(32):
                lo, hi = h2[lane][2 * kt], h2[lane][2 * kt + 1]
                regs = [pair(lo[0], lo[1]), pair(lo[2], lo[3]), pair(hi[0], hi[1]), pair(hi[2], hi[3])]
                if SWAP: regs[1], regs[2] = regs[2], regs[1]
                a2.append(regs)
            for p in range(2 * NT):
                mma([gg[lane][p] for lane in range(32)], a2, b_frag(Wg, p, kt))
        for h in range(2):
            xs = {}
            for lane in range(32):
                g, q = lane >> 2, lane % 4
                sj = s[16 * m + g + 8 * h]
                x = []
                for p in range(NT):
                    o = 8 * p + 2 * q
                    for e in range(2):
                        g1 = gg[lane][p][2 * h + e] + B1[o + e]
                        sg = sigmoid(gg[lane][NT + p][2 * h + e] + B2[o + e])
                        x.append((sj * EW[o + e] + EB[o + e]) + g1 * sg)
                xs[lane] = x
            for lane in range(32):
                g, q = lane >> 2, lane % 4
                quad = [l for l in range(32) if l >> 2 == g]  # row_sum<4>: xor 2, 1
                mean = sum(sum(xs[l]) for l in quad) / DV
                var = sum(sum((v - mean) ** 2 for v in xs[l]) for l in quad) / DV
                rstd = 1 / math.sqrt(var + 1e-5)
                row = 16 * m + g + 8 * h
                for p in range(NT):
                    o = 8 * p + 2 * q
                    for e in range(2):
                        key = (row, o + e)
                        assert key not in out, 'two lanes write %s' % (key,)
                        out[key] = (xs[lane][2 * p + e] - mean) * rstd * LNW[o + e] + LNB[o + e]
    assert len(out) == 16 * MT * DV, 'outputs unwritten'
    return out


def reference(DV, s, W2, Wg, vec):
    U, V, B1, B2, EW, EB, LNW, LNB = vec
    out = {}
    for r, sj in enumerate(s):
        h1 = [elu(sj * U[k] + V[k]) for k in range(DV)]
        h2 = [sum(W2[o][k] * h1[k] for k in range(DV)) for o in range(DV)]
        g = [sum(Wg[o][k] * h2[k] for k in range(DV)) for o in range(2 * DV)]
        x = [(sj * EW[o] + EB[o]) + (g[o] + B1[o]) * sigmoid(g[DV + o] + B2[o]) for o in range(DV)]
        mean = sum(x) / DV
        rstd = 1 / math.sqrt(sum((v - mean) ** 2 for v in x) / DV + 1e-5)
        for o in range(DV):
            out[(r, o)] = (x[o] - mean) * rstd * LNW[o] + LNB[o]
    return out


random.seed(7)
worst = 0.0
for DV in (32, 16):
    rows = 16 * (32 // DV)
    sd = min(0.5, 1.5 / math.sqrt(DV))  # tests/model/vsn_ref.h's matrices
    num = den = 0.0
    for j in range(3):
        s = [random.gauss(0, 1) for _ in range(rows)]
        W2 = [[random.gauss(0, sd) for _ in range(DV)] for _ in range(DV)]
        Wg = [[random.gauss(0, sd) for _ in range(DV)] for _ in range(2 * DV)]
        vec = [[random.gauss(0, 0.5) for _ in range(DV)] for _ in range(6)]
        vec += [[1 + random.gauss(0, 0.1) for _ in range(DV)], [random.gauss(0, 0.5) for _ in range(DV)]]
        got, want = warp_variable(DV, s, W2, Wg, vec), reference(DV, s, W2, Wg, vec)
        num += sum((got[k] - want[k]) ** 2 for k in want)
        den += sum(want[k] ** 2 for k in want)
    err = math.sqrt(num / den)
    worst = max(worst, err)
    print('Dv = %2d: %d rows x 3 variables, t rel err (Frobenius) %.3e' % (DV, rows, err))
bound = 2e-2 if BF16 or SWAP else 1e-12
print('%s: worst %.3e against %.0e' % ('PASS' if worst <= bound else 'FAIL', worst, bound))
sys.exit(0 if worst <= bound else 1)
