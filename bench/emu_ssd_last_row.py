"""emu_ssd_last_row.py: a literal emulation of src/model/ssd_last_row.cu's two
kernels (their phases, flat strided buffers with NaN gaps and their index
arithmetic, the per-window partials), in plain Python float64, against the
sequential recurrence and central differences of its loss. Written without
a GPU to check the kernels' indexing before their first run; no numpy needed.
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
    def common(b, backward):
        r0 = b*K; last = r0 + K - 1
        Cl = [xbc[last*xs + C_off + i] for i in range(GN)]
        dys_ = [dy[b*dys + i] for i in range(HP)] if backward else None
        Ld = zeros(H*K)
        for h in range(H):
            L = 0.0
            for s in range(K-1, -1, -1):
                Ld[h*K+s] = L; L += dt[(r0+s)*dts + h]
        q = zeros(G*K)
        for t in range(G*K):
            g, s = t // K, t % K
            q[t] = sum(xbc[(r0+s)*xs + B_off + g*N + i] * Cl[g*N + i] for i in range(N))
        e = None
        if backward:
            e = zeros(H*K)
            for t in range(H*K):
                h, s = t // K, t % K
                e[t] = sum(xbc[(r0+s)*xs + x_off + h*P + i] * dys_[h*P + i] for i in range(P))
        return Cl, dys_, Ld, q, e
    def lw(b, Ld, t):
        h, s = t // K, t % K
        return math.exp(A[h]*Ld[t]) * dt[(b*K+s)*dts + h]
    for b in range(Bsz):  # forward
        Cl, _, Ld, q, _ = common(b, 0)
        w = zeros(H*K)
        for t in range(H*K):
            g, s = (t//K)//hg, t % K
            w[t] = lw(b, Ld, t) * q[g*K+s]
        r0 = b*K
        for j in range(HP):
            h = j // P
            acc = sum(w[h*K+s] * xbc[(r0+s)*xs + x_off + j] for s in range(K))
            acc += Dsk[h] * xbc[(r0+K-1)*xs + x_off + j]
            y[b*ys + j] = acc
    for b in range(Bsz):  # backward
        Cl, dys_, Ld, q, e = common(b, 1)
        r0 = b*K
        w = [lw(b, Ld, t) for t in range(H*K)]
        dQ = zeros(G*K)
        for t in range(G*K):
            g, s = t // K, t % K
            dQ[t] = sum(e[h*K+s]*w[h*K+s] for h in range(g*hg, (g+1)*hg))
        ww = zeros(H*K)
        for t in range(H*K):
            h, s = t // K, t % K; g = h // hg
            dw = e[t]*q[g*K+s]
            if s == K-1: partD[b*H+h] = e[t]
            ww[t] = dw*w[t]; e[t] = dw*math.exp(A[h]*Ld[t])
        for i in range(K*HP):
            s, j = i // HP, i % HP; h = j // P; g = h // hg
            v = w[h*K+s]*q[g*K+s]*dys_[j]
            if s == K-1: v += Dsk[h]*dys_[j]
            dxbc[(r0+s)*dxs + j] = v
        for i in range(K*GN):
            s, j = i // GN, i % GN; g = j // N
            dxbc[(r0+s)*dxs + HP + j] = dQ[g*K+s]*Cl[j]
            c = 0.0
            if s == K-1:
                c = sum(dQ[g*K+s2]*xbc[(r0+s2)*xs + B_off + j] for s2 in range(K))
            dxbc[(r0+s)*dxs + HP + GN + j] = c
        for h in range(H):
            run = 0.0; sA = 0.0
            for s in range(K):
                t = h*K+s
                ddt[(r0+s)*ddts + h] = e[t] + A[h]*run
                run += ww[t]; sA += ww[t]*Ld[t]
            partA[b*H+h] = sA
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
