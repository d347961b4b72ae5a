"""emu_ssd_last_row.py: a literal emulation of src/model/ssd_last_row.cu's two
kernels (their phases, flat strided buffers with NaN gaps and their index
arithmetic: the 256 threads' row x column tiles, the warps' rows of the dot
products, a warp a head with its lanes' row segments and shuffle scans, the
per-window partials), in plain Python float64, against the sequential
recurrence and central differences of its loss; every output element must be
written exactly once and no padding read. Written without a GPU to check the
kernels' indexing before their first run; no numpy needed.
Run: python3 bench/emu_ssd_last_row.py (prints the errors, ~1e-16 and ~1e-9)."""
# Literal emulation of ssd_last_row.cu's kernels (flat strided buffers, the
# kernels' index arithmetic), against the sequential recurrence in float64.
import math, random
random.seed(1)
NAN = float('nan')
class Rng:
    def integers(self, n): return random.randrange(int(n))
rng = Rng()
def full(n, v): return [v]*n
def zeros(n): return [0.0]*n
def mat(r, c, f): return [[f() for _ in range(c)] for _ in range(r)]
def run(Bsz, K, H, P, G, N):
    hg = H // G; HP = H*P; GN = G*N; W = HP + 2*GN
    xs = W + 7; dts = H + 3; dys = HP + 5; ys = HP + 3; dxs = W + 9; ddts = H + 2
    R = Bsz*K
    xbc = full(R*xs, NAN); dt = full(R*dts, NAN)
    g_ = lambda: random.gauss(0, 1)
    X = mat(R, HP, g_); Bm = mat(R, GN, g_); Cm = mat(R, GN, g_)
    DT = mat(R, H, lambda: math.exp(math.log(1e-3) + (math.log(1e-1)-math.log(1e-3))*random.random()) * math.exp(random.random()))
    A = [-math.exp(math.log(16)*random.random()) for _ in range(H)]; Dsk = [g_() for _ in range(H)]
    dyl = mat(Bsz, HP, g_)
    for r in range(R):
        xbc[r*xs:r*xs+HP] = X[r]; xbc[r*xs+HP:r*xs+HP+GN] = Bm[r]; xbc[r*xs+HP+GN:r*xs+W] = Cm[r]
        dt[r*dts:r*dts+H] = DT[r]
    dy = full(Bsz*dys, NAN)
    for b in range(Bsz): dy[b*dys:b*dys+HP] = dyl[b]
    x_off, B_off, C_off = 0, HP, HP+GN
    y = full(Bsz*ys, NAN); dxbc = full(R*dxs, NAN); ddt = full(R*ddts, NAN)
    partA = zeros(Bsz*H); partD = zeros(Bsz*H)
    T, NW, ROWS = 256, 8, 8  # LR_THREADS, LR_WARPS, LR_ROWS
    writes = {}
    def put(buf, name, idx, v):  # every output element written once
        key = (name, idx); writes[key] = writes.get(key, 0) + 1; buf[idx] = v
    def tile(width, tid):  # lr_tile_of
        cols = min(width, T); rows = T // cols; s0 = tid // cols
        return tid - s0*cols, cols, s0, rows
    def butterfly(vals):  # xor butterfly over 32 lanes: every lane the same sum
        for o in (16, 8, 4, 2, 1):
            vals = [vals[l] + vals[l ^ o] for l in range(32)]
        assert len(set(vals)) == 1
        return vals
    def suffix_excl(vals):  # lr_suffix_excl
        for o in (1, 2, 4, 8, 16):
            vals = [vals[l] + (vals[l+o] if l+o < 32 else 0.0) for l in range(32)]
        return [vals[l+1] if l < 31 else 0.0 for l in range(32)]
    def prefix_excl(vals):  # lr_prefix_excl
        for o in (1, 2, 4, 8, 16):
            vals = [vals[l] + (vals[l-o] if l >= o else 0.0) for l in range(32)]
        return [vals[l-1] if l > 0 else 0.0 for l in range(32)]
    def rows_dot(base, ustride, vbase, n, out, warp):  # lr_rows_dot + lr_warp_dots
        for s in range(warp, K, NW*ROWS):
            nr = (K - s + NW - 1) // NW
            acc = [[0.0]*32 for _ in range(ROWS)]
            for lane in range(32):
                for i in range(lane, n, 32):
                    for r in range(ROWS):
                        if r < nr: acc[r][lane] += xbc_or(base + (warp + r*NW + s - warp)*ustride + i) * vbase(i)
            for r in range(min(ROWS, nr)):
                out[s + r*NW] = butterfly(acc[r])[0]
    def xbc_or(i):
        v = xbc[i]; assert not math.isnan(v), "read padding"; return v
    def segment(vals, lane):  # lr_segment: a lane's rows and their dt sum (vals: the head's K)
        seg = (K + 31) >> 5; b_ = min(lane*seg, K); e_ = min(b_ + seg, K)
        return b_, e_, sum(vals[b_:e_])
    def stage_dt(r0):
        dts = [None]*(H*K)
        for tid in range(T):
            j0, cols, s0, rows = tile(H, tid)
            if s0 >= rows: continue
            for h in range(j0, H, cols):
                for s_ in range(s0, K, rows):
                    assert dts[h*K+s_] is None; dts[h*K+s_] = dt[(r0+s_)*dts_ + h]
        assert None not in dts
        return dts
    def q_of(r0, last):
        q = [None]*(G*K)
        for g in range(G):
            qq = [None]*K
            for warp in range(NW):
                rows_dot((r0)*xs + B_off + g*N, xs, lambda i, g=g: xbc_or(last*xs + C_off + g*N + i), N, qq, warp)
            q[g*K:(g+1)*K] = qq
        assert None not in q
        return q
    dts_ = dts
    for b in range(Bsz):  # forward (lr_forward_kernel)
        r0 = b*K; last = r0 + K - 1
        c = stage_dt(r0); q = q_of(r0, last)
        for warp in range(NW):
            for h in range(warp, H, NW):
                g = h // hg; segs = [segment(c[h*K:(h+1)*K], l) for l in range(32)]
                Ls = suffix_excl([sg[2] for sg in segs])
                for lane in range(32):
                    sb, se, _ = segs[lane]; L = Ls[lane]
                    for s_ in range(se-1, sb-1, -1):
                        d = c[h*K+s_]; c[h*K+s_] = math.exp(A[h]*L)*d*q[g*K+s_]; L += d
        for j in range(HP):
            h = j // P
            acc = 0.0
            for s_ in range(K): acc += c[h*K+s_] * xbc_or((r0+s_)*xs + x_off + j)
            acc += Dsk[h] * xbc_or((r0+K-1)*xs + x_off + j)
            put(y, 'y', b*ys + j, acc)
    for b in range(Bsz):  # backward (lr_backward_kernel)
        r0 = b*K; last = r0 + K - 1
        ww = stage_dt(r0); q = q_of(r0, last)
        e = [None]*(H*K)
        for h in range(H):
            eh = [None]*K
            for warp in range(NW):
                rows_dot(r0*xs + x_off + h*P, xs, lambda i, h=h: dy[b*dys + h*P + i], P, eh, warp)
            e[h*K:(h+1)*K] = eh
        assert None not in e
        w = [None]*(H*K); t1 = [None]*(H*K)
        for warp in range(NW):
            for h in range(warp, H, NW):
                g = h // hg; segs = [segment(ww[h*K:(h+1)*K], l) for l in range(32)]
                Ls = suffix_excl([sg[2] for sg in segs])
                sA = [0.0]*32; wws = [0.0]*32
                for lane in range(32):
                    sb, se, _ = segs[lane]; L = Ls[lane]
                    for s_ in range(se-1, sb-1, -1):
                        t = h*K+s_; d = ww[t]; dec = math.exp(A[h]*L); wv = dec*d
                        dw = e[t]*q[g*K+s_]; wwv = dw*wv
                        w[t] = wv; ww[t] = wwv; t1[t] = dw*dec
                        sA[lane] += wwv*L; wws[lane] += wwv; L += d
                runs = prefix_excl(wws)
                for lane in range(32):
                    sb, se, _ = segs[lane]; run = runs[lane]
                    for s_ in range(sb, se):
                        t = h*K+s_; t1[t] = t1[t] + A[h]*run; run += ww[t]
                put(partA, 'pA', b*H+h, butterfly(sA)[0]); put(partD, 'pD', b*H+h, e[h*K+K-1])
        assert None not in w and None not in t1
        dQ = [None]*(G*K)
        for g in range(G):
            for tid in range(T):
                for s_ in range(tid, K, T):
                    dQ[g*K+s_] = sum(e[h*K+s_]*w[h*K+s_] for h in range(g*hg, (g+1)*hg))
        for tid in range(T):  # lr_store_dx_ddt
            j0, cols, s0, rows = tile(HP, tid)
            if s0 < rows:
                for j in range(j0, HP, cols):
                    h = j // P; g = h // hg; dyj = dy[b*dys + j]
                    for s_ in range(s0, K, rows):
                        v = w[h*K+s_]*q[g*K+s_]*dyj
                        if s_ == K-1: v += Dsk[h]*dyj
                        put(dxbc, 'dx', (r0+s_)*dxs + j, v)
            j0, cols, s0, rows = tile(H, tid)
            if s0 < rows:
                for h in range(j0, H, cols):
                    for s_ in range(s0, K, rows): put(ddt, 'ddt', (r0+s_)*ddts + h, t1[h*K+s_])
        assert None not in dQ
        rowsC = T // min(GN, T); dCp = [None]*(rowsC*GN)
        for tid in range(T):  # lr_store_dB_dC
            j0, cols, s0, rows = tile(GN, tid)
            if s0 >= rows: continue
            for j in range(j0, GN, cols):
                g = j // N; clj = xbc_or(last*xs + C_off + j); part = 0.0
                for s_ in range(s0, K, rows):
                    dq = dQ[g*K+s_]
                    put(dxbc, 'dB', (r0+s_)*dxs + HP + j, dq*clj)
                    part += dq*xbc_or((r0+s_)*xs + B_off + j)
                    if s_ != K-1: put(dxbc, 'dC', (r0+s_)*dxs + HP + GN + j, 0.0)
                assert dCp[s0*GN + j] is None; dCp[s0*GN + j] = part
        assert None not in dCp
        for j in range(GN):
            put(dxbc, 'dC', (r0+K-1)*dxs + HP + GN + j, sum(dCp[r*GN + j] for r in range(rowsC)))
    assert all(v == 1 for v in writes.values()), "an element written twice"
    assert len(writes) == Bsz*HP + R*(HP + 2*GN + H) + 2*Bsz*H, "an element not written"
    dA = [sum(partA[b*H+h] for b in range(Bsz)) for h in range(H)]; dD = [sum(partD[b*H+h] for b in range(Bsz)) for h in range(H)]
    # reference by autograd-free finite reasoning: sequential recurrence + manual reverse via torch-like numpy
    def fwd_seq(X, DT, Bm, Cm, A, Dsk):
        Y = [[0.0]*HP for _ in range(Bsz)]
        for b in range(Bsz):
            for h in range(H):
                g = h // hg; S = [[0.0]*N for _ in range(P)]
                for t in range(K):
                    r = b*K+t; dec = math.exp(DT[r][h]*A[h])
                    S = [[dec*S[p][n] + DT[r][h]*X[r][h*P+p]*Bm[r][g*N+n] for n in range(N)] for p in range(P)]
                for p in range(P):
                    Y[b][h*P+p] = sum(S[p][n]*Cm[b*K+K-1][g*N+n] for n in range(N)) + Dsk[h]*X[b*K+K-1][h*P+p]
        return Y
    Yref = fwd_seq(X, DT, Bm, Cm, A, Dsk)
    yerr = max(abs(y[b*ys+j]-Yref[b][j]) for b in range(Bsz) for j in range(HP))
    print("y err", yerr)
    eps = 1e-6
    def num(arrname, idx):
        import copy
        arrs = dict(X=copy.deepcopy(X), DT=copy.deepcopy(DT), Bm=copy.deepcopy(Bm), Cm=copy.deepcopy(Cm), A=list(A), Dsk=list(Dsk))
        a = arrs[arrname]
        def add(v):
            if isinstance(idx, tuple): a[idx[0]][idx[1]] += v
            else: a[idx] += v
        loss = lambda: sum(Yv[j]*dyl[b][j] for b, Yv in enumerate(fwd_seq(**arrs)) for j in range(HP))
        add(eps); Lp = loss(); add(-2*eps); Lm = loss()
        return (Lp-Lm)/(2*eps)
    errs = []
    for _ in range(6):
        r = rng.integers(R); c = rng.integers(HP); errs.append(abs(num('X', (r, c)) - dxbc[r*dxs+c]))
        r = rng.integers(R); c = rng.integers(GN); errs.append(abs(num('Bm', (r, c)) - dxbc[r*dxs+HP+c]))
        r = rng.integers(R); c = rng.integers(GN); errs.append(abs(num('Cm', (r, c)) - dxbc[r*dxs+HP+GN+c]))
        b = rng.integers(Bsz); r = b*K+K-1; c = rng.integers(GN); errs.append(abs(num('Cm', (r, c)) - dxbc[r*dxs+HP+GN+c]))
        r = rng.integers(R); h = rng.integers(H); errs.append(abs(num('DT', (r, h)) - ddt[r*ddts+h]))
    for h in range(H):
        errs.append(abs(num('A', h) - dA[h])); errs.append(abs(num('Dsk', h) - dD[h]))
    print("max grad err", max(errs))
    # padding untouched
    isn = math.isnan
    ok = all(all(isn(v) for v in dxbc[r*dxs+W:(r+1)*dxs]) and all(isn(v) for v in ddt[r*ddts+H:(r+1)*ddts]) for r in range(R))
    ok &= all(all(isn(v) for v in y[b*ys+HP:(b+1)*ys]) for b in range(Bsz))
    ok &= not any(isn(v) for r in range(R) for v in dxbc[r*dxs:r*dxs+W])
    ok &= not any(isn(v) for r in range(R) for v in ddt[r*ddts:r*ddts+H])
    print("padding ok", ok)
    if not (yerr < 1e-12 and max(errs) < 1e-6 and ok):
        raise SystemExit("emulation disagrees with the recurrence")
run(2, 7, 4, 3, 2, 5)
run(2, 5, 6, 2, 3, 3)
run(1, 1, 2, 2, 1, 3)
run(2, 33, 12, 3, 2, 5)    # H > 8 warps (not a multiple), K = 33: lane 16 one row, 17.. none
run(1, 70, 2, 40, 1, 3)    # P = 40 > 32 (two lane rounds in e), K = 70: seg 3, 2 batches of 8 rows a warp
run(1, 3, 2, 130, 1, 260)  # H P = 260, G N = 260 > 256 threads: columns j and j + 256
run(2, 40, 1, 1, 1, 1)     # one column: 256 row slots, K = 40
run(1, 100, 2, 3, 1, 2)    # 4 rows a lane
