"""emu_scan_quad_backward.py: a float64 emulation of
src/model/ssd_scan_quad_backward.cu's index logic, for checking it without a
GPU: the shared-memory layout as one flat float array (poisoned with NaN, so
that a read of a region not yet written shows in the outputs), the (X, dY)
double buffer, the warps' tile deals and k-ranges (the lower tiles of G and
dW, dX from the last row block, dC and dB; each product as quad_mma's two
chains of k-steps, even and odd), the row/col-major view each WMMA load
takes, the elementwise pass's lane mapping and halving row sums, the head
vectors' lane pairs, suffix scan and dA's prefix form, the epilogue's
overlays; on strided x, dy, B, C, dt views, H = 4 heads in G = 2 groups,
P = 16, N = 32.
A transcription of the kernel code: keep it in step by hand.
  python3 bench/emu_scan_quad_backward.py [K]         every output against
                                        central differences of the
                                        recurrence's loss sum(y dy) (K = 64,
                                        48, 32 or 16; default 64)
  python3 bench/emu_scan_quad_backward.py [K] --tf32  the products' operands
                                        rounded to TF32 (cvt.rna) and the
                                        values the kernel keeps in float
                                        rounded to float: each output's
                                        relative error (norm) against the
                                        float64 run
Pure Python (no numpy): a few seconds."""
import math, random, struct, sys

ARGS = [a for a in sys.argv[1:] if not a.startswith('--')]
TF32 = '--tf32' in sys.argv
random.seed(3)
Bsz, K, H, G, P, N = 2, int(ARGS[0]) if ARGS else 64, 4, 2, 16, 32
hg, PAD, WARPS, LOG2E = H // G, 4, 8, 1.4426950408889634
R, HP, GN = Bsz * K, H * P, G * N
xs_, dts_, bs_, dys_ = HP + 3, H + 1, GN + 5, HP + 1  # the views' row strides
x = [random.gauss(0, 1) for _ in range(R * xs_)]
dy = [random.gauss(0, 1) for _ in range(R * dys_)]
Bm = [random.gauss(0, 1) for _ in range(R * bs_)]
Cm = [random.gauss(0, 1) for _ in range(R * bs_)]
dt = [random.uniform(0.01, 0.3) for _ in range(R * dts_)]
A = [-random.uniform(1, 8) for _ in range(H)]
Dsk = [random.gauss(0, 1) for _ in range(H)]


def f32(v): return struct.unpack('f', struct.pack('f', v))[0]


def tf32(v):
    b = struct.unpack('I', struct.pack('f', v))[0]
    b = (b + 0x1000) & 0xFFFFE000  # round half away from zero to 10 mantissa bits
    return struct.unpack('f', struct.pack('I', b))[0]


def ident(v): return v


# quad_smem_of's offsets (floats; a double takes 2, its value in the first)
lbc, lw, lx = N + PAD, K + PAD, P + PAD
region = max(5 * K * lx, 2 * K * lbc)
oB = 0
oC = oB + K * lbc
oW = oC + K * lbc
odX = oW + K * lw
orows = odX + K * lx
odCo, odBo = odX, odX + K * lbc
ocum = odX + region
odt = ocum + 2 * hg * K
ocol = odt + hg * K
orowz = ocol + WARPS * K
odpart = orowz + K
total = odpart + 2 * WARPS
assert total == 2 * K * lbc + K * lw + region + 2 * hg * K + hg * K + WARPS * K + K + 2 * WARPS  # quad_smem_floats


def ox(buf): return orows + 2 * buf * K * lx
def ody(buf): return ox(buf) + K * lx


def run(rt, rf):
    """The kernel over every block; rt rounds an MMA operand, rf a float."""
    dx, ddt = [None] * (R * HP), [None] * (R * H)
    dB, dC = [None] * (R * GN), [None] * (R * GN)
    partA, partD = [None] * (Bsz * H), [None] * (Bsz * H)
    l16, p16, n16 = K // 16, P // 16, N // 16

    for blk in range(Bsz * G):
        b, g = blk // G, blk % G
        h0 = g * hg
        sm = [float('nan')] * total

        def mma(acc, a, lda, arow, bb, ldb, brow, kn):  # acc = A B, quad_mma: ssd_tc::mma's views, two chains
            assert kn % 16 == 0
            for i in range(16):
                for j in range(16):
                    chain = [0.0, 0.0]  # the even k-steps of 8, the odd
                    for k in range(kn):
                        chain[(k // 8) % 2] += rt(sm[a + (i * lda + k if arow else i + k * lda)]) * \
                            rt(sm[bb + (k * ldb + j if brow else k + j * ldb)])
                    acc[i][j] = rf(rf(chain[0]) + rf(chain[1]))

        def store(out, ld, acc):
            for i in range(16):
                for j in range(16):
                    sm[out + i * ld + j] = acc[i][j]

        def lower_abt(a, bb, ld, kn, out, lo):  # quad_lower_abt (every warp's tiles)
            for ti in range(l16):
                for si in range(ti + 1):
                    acc = [[0.0] * 16 for _ in range(16)]
                    mma(acc, a + 16 * ti * ld, ld, True, bb + 16 * si * ld, ld, False, kn)
                    store(out + 16 * ti * lo + 16 * si, lo, acc)

        def stage_head(h, buf):
            for t in range(K):
                for p in range(P):
                    r = b * K + t
                    sm[ox(buf) + t * lx + p] = x[r * xs_ + h * P + p]
                    sm[ody(buf) + t * lx + p] = dy[r * dys_ + h * P + p]

        # prologue
        for t in range(K):
            for n in range(N):
                sm[oB + t * lbc + n] = Bm[(b * K + t) * bs_ + g * N + n]
                sm[oC + t * lbc + n] = Cm[(b * K + t) * bs_ + g * N + n]
        stage_head(h0, 0)
        for i in range(hg * K):
            t, j = i // hg, i % hg
            sm[odt + j * K + t] = dt[(b * K + t) * dts_ + h0 + j]
        for j in range(hg):  # quad_cum: the warp's scan is a prefix sum
            c = 0.0
            for i in range(K):
                c += sm[odt + j * K + i] * A[h0 + j]
                sm[ocum + 2 * (j * K + i)] = c * LOG2E
        lower_abt(oC, oB, lbc, N, oW, lw)
        Gr, dGr = {}, {}
        for w in range(WARPS):
            for lane in range(32):
                for i in range(8):
                    for jj in range(2):
                        t, s = w + 8 * i, lane + 32 * jj
                        Gr[w, lane, i, jj] = sm[oW + t * lw + s] if t < K and s <= t else 0.0
                        dGr[w, lane, i, jj] = 0.0

        for j in range(hg):
            h, buf = h0 + j, j & 1
            Xo, dYo, dto, cumo = ox(buf), ody(buf), odt + j * K, ocum + 2 * j * K
            if j + 1 < hg:
                stage_head(h + 1, buf ^ 1)
            if j > 0:
                for t in range(K):
                    for p in range(P):
                        dx[(b * K + t) * HP + (h - 1) * P + p] = sm[odX + t * lx + p]
            for w in range(WARPS):  # dD's shares
                pf = 0.0
                for t in range(w, K, 8):
                    for p in range(P):
                        pf = rf(pf + sm[dYo + t * lx + p] * sm[Xo + t * lx + p])
                sm[odpart + 2 * w] = pf
            lower_abt(dYo, Xo, lx, P, oW, lw)
            # | quad_elementwise
            D = Dsk[h]
            for w in range(WARPS):
                lanes_rz, colz = [], [[0.0, 0.0] for _ in range(32)]
                for lane in range(32):
                    rz = [0.0] * 8
                    for i in range(8):
                        t = w + 8 * i
                        if t >= K:
                            continue
                        ct = sm[cumo + 2 * t]
                        for jj in range(2):
                            s = lane + 32 * jj
                            if s >= K:
                                continue
                            at = oW + t * lw + s
                            if s > t:
                                sm[at] = 0.0
                                continue
                            dts = sm[dto + s]
                            l = rf(2.0 ** rf(ct - sm[cumo + 2 * s]))
                            d = sm[at]
                            gl = rf(Gr[w, lane, i, jj] * l)
                            zq = rf(d * gl)
                            dGr[w, lane, i, jj] = rf(dGr[w, lane, i, jj] + d * rf(l * dts))
                            colz[lane][jj] = rf(colz[lane][jj] + zq)
                            rz[i] = rf(rz[i] + zq * dts)
                            sm[at] = rf(gl * dts + (D if s == t else 0.0))
                    lanes_rz.append(rz)
                cur, half, o = [list(v) for v in lanes_rz], 4, 16  # quad_rows_sum
                while half:
                    new = [list(v) for v in cur]
                    for lane in range(32):
                        up, q = (lane & o) != 0, lane ^ o
                        for k in range(half):
                            send = cur[q][k] if (q & o) else cur[q][k + half]
                            keep = cur[lane][k + half] if up else cur[lane][k]
                            new[lane][k] = rf(keep + send)
                    cur, half, o = new, half // 2, o // 2
                r = [cur[ln][0] for ln in range(32)]
                r = [rf(r[ln] + r[ln ^ 2]) for ln in range(32)]
                r = [rf(r[ln] + r[ln ^ 1]) for ln in range(32)]
                for lane in range(32):
                    t = w + 8 * (lane >> 2)
                    if lane & 3 == 0 and t < K:
                        sm[orowz + t] = r[lane]
                    for jj in range(2):
                        s = lane + 32 * jj
                        if s < K:
                            sm[ocol + w * K + s] = colz[lane][jj]
            # | dX's tiles, the last row block first
            for tile in range(l16 * p16):
                si, pi = l16 - 1 - tile // p16, tile % p16
                t0 = 16 * si
                acc = [[0.0] * 16 for _ in range(16)]
                mma(acc, oW + t0 * lw + t0, lw, False, dYo + t0 * lx + 16 * pi, lx, True, K - t0)
                store(odX + t0 * lx + 16 * pi, lx, acc)
            # quad_head_vectors (warp 0; lane l has s = 2l, 2l+1)
            dd, dc, dtv = [0.0] * 64, [0.0] * 64, [0.0] * 64
            for s in range(K):
                dd[s] = sum(sm[ocol + w * K + s] for w in range(WARPS))
                dtv[s] = sm[dto + s]
                dc[s] = sm[orowz + s] - dtv[s] * dd[s]
            pair = [dc[2 * ln] + dc[2 * ln + 1] for ln in range(32)]
            incl = [sum(pair[ln:]) for ln in range(32)]
            da = [0.0] * 64
            for ln in range(32):
                after = incl[ln + 1] if ln < 31 else 0.0
                da[2 * ln], da[2 * ln + 1] = pair[ln] + after, dc[2 * ln + 1] + after
            for s in range(K):
                ddt[(b * K + s) * H + h] = rf(dd[s] + A[h] * da[s])
            T = [sum(dtv[:s + 1]) for s in range(64)]  # dA's partial the other way round: sum_t dcum[t] T[t]
            partA[b * H + h] = rf(sum(dc[s] * T[s] for s in range(64)))
            partD[b * H + h] = rf(sum(sm[odpart + 2 * w] for w in range(WARPS)))

        # epilogue
        for t in range(K):
            for p in range(P):
                dx[(b * K + t) * HP + (h0 + hg - 1) * P + p] = sm[odX + t * lx + p]
        for (w, lane, i, jj), v in dGr.items():
            t, s = w + 8 * i, lane + 32 * jj
            if t < K and s < K:
                sm[oW + t * lw + s] = v
        for tile in range(2 * l16 * n16):
            acc = [[0.0] * 16 for _ in range(16)]
            if tile < l16 * n16:
                ti, ni = tile // n16, tile % n16
                mma(acc, oW + 16 * ti * lw, lw, True, oB + 16 * ni, lbc, True, 16 * (ti + 1))
                store(odCo + 16 * ti * lbc + 16 * ni, lbc, acc)
            else:
                k = tile - l16 * n16
                si, ni = k // n16, k % n16
                t0 = 16 * si
                mma(acc, oW + t0 * lw + t0, lw, False, oC + t0 * lbc + 16 * ni, lbc, True, K - t0)
                store(odBo + t0 * lbc + 16 * ni, lbc, acc)
        for t in range(K):
            for n in range(N):
                dC[(b * K + t) * GN + g * N + n] = sm[odCo + t * lbc + n]
                dB[(b * K + t) * GN + g * N + n] = sm[odBo + t * lbc + n]

    out = {'dx': dx, 'ddt': ddt, 'dB': dB, 'dC': dC, 'dA': [sum(partA[b * H + h] for b in range(Bsz)) for h in range(H)],
           'dD': [sum(partD[b * H + h] for b in range(Bsz)) for h in range(H)]}
    for name, v in out.items():
        assert all(e is not None and e == e for e in v), name + ': an element unwritten or NaN'
    return out


def loss():
    """sum(y dy) of the recurrence S_t = exp(dt_t A) S_{t-1} + dt_t x_t B_t^T, y_t = S_t C_t + D x_t."""
    tot = 0.0
    for b in range(Bsz):
        for h in range(H):
            g, S = h // hg, [[0.0] * N for _ in range(P)]
            for t in range(K):
                r = b * K + t
                d = dt[r * dts_ + h]
                dec = math.exp(d * A[h])
                Bt, Ct = Bm[r * bs_ + g * N:r * bs_ + g * N + N], Cm[r * bs_ + g * N:r * bs_ + g * N + N]
                for p in range(P):
                    xp, Sp = x[r * xs_ + h * P + p], S[p]
                    for n in range(N):
                        Sp[n] = dec * Sp[n] + d * xp * Bt[n]
                    tot += (sum(Sp[n] * Ct[n] for n in range(N)) + Dsk[h] * xp) * dy[r * dys_ + h * P + p]
    return tot


def fd(arr, i, eps=1e-5):
    v = arr[i]
    arr[i] = v + eps
    lp = loss()
    arr[i] = v - eps
    lm = loss()
    arr[i] = v
    return (lp - lm) / (2 * eps)


exact = run(ident, ident)
if TF32:
    rounded = run(tf32, f32)
    for name in exact:
        d = math.sqrt(sum((a - e) ** 2 for a, e in zip(rounded[name], exact[name])))
        print('K=%d %-3s TF32 vs float64: rel err %.2e' % (K, name, d / math.sqrt(sum(e * e for e in exact[name]))))
else:
    rnd, worst = random.Random(7), 0.0
    checks = [('dA', exact['dA'][h], A, h) for h in range(H)] + [('dD', exact['dD'][h], Dsk, h) for h in range(H)]
    for _ in range(6):
        b, t, h, p, g, n = (rnd.randrange(v) for v in (Bsz, K, H, P, G, N))
        r = b * K + t
        checks += [('dx', exact['dx'][r * HP + h * P + p], x, r * xs_ + h * P + p),
                   ('ddt', exact['ddt'][r * H + h], dt, r * dts_ + h),
                   ('dB', exact['dB'][r * GN + g * N + n], Bm, r * bs_ + g * N + n),
                   ('dC', exact['dC'][r * GN + g * N + n], Cm, r * bs_ + g * N + n)]
    for name, got, arr, i in checks:
        want = fd(arr, i)
        err = abs(got - want) / (abs(want) + 1e-2)
        worst = max(worst, err)
        if err > 1e-4:
            print('MISMATCH %s: emulation %.9g, central difference %.9g' % (name, got, want))
    print('K=%d: %d outputs against central differences, worst rel err %.2e' % (K, len(checks), worst))
