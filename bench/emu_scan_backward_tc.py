"""emu_scan_backward_tc.py: a float64 emulation of src/cuda/ssd_chunk_tc.cuh's
index logic, for checking it without a GPU: the shared-memory offsets of
the TC layout (as one flat float array), the row/col-major views each WMMA
load takes, the tiles and k-ranges, the in-place phases of tc_outputs, with
every region not yet (or no longer) valid poisoned with NaN so that a read
of it fails. Each chunk's G, dM, xds, dys, dC, dB, dX, U and the forward
walk's own state are compared with the SIMT formulas (model/ssd.cu's top
comment). A transcription of the kernel code: keep it in step by hand.
  python3 bench/emu_scan_backward_tc.py          exact check (float64)
  python3 bench/emu_scan_backward_tc.py --tf32   operands rounded to TF32
                                                  (cvt.rna), relative errors
                                                  printed
  python3 bench/emu_scan_backward_tc.py [--tf32] --float-decays
                                                  Lm as tc_products forms
                                                  it: expf of the float-rounded
                                                  difference of double prefixes
                                                  (expf as exp rounded to float:
                                                  CUDA's is within 2 ulp)
Pure Python (no numpy): the default shape takes ~1 minute."""
import math, random, struct, sys

TF32 = '--tf32' in sys.argv
FLOAT_DECAYS = '--float-decays' in sys.argv


def f32(x): return struct.unpack('f', struct.pack('f', x))[0]


def tf32(x):
    b = struct.unpack('I', struct.pack('f', x))[0]
    b = (b + 0x1000) & 0xFFFFE000  # round half away from zero to 10 mantissa bits
    return struct.unpack('f', struct.pack('I', b))[0] if TF32 else x

random.seed(1)
NAN = float('nan')
class M:
    def __init__(s, r, c, v=0.0): s.r, s.c, s.a = r, c, [[v]*c for _ in range(r)]
    @staticmethod
    def of(rows): m = M(len(rows), len(rows[0])); m.a = [list(x) for x in rows]; return m
    def __getitem__(s, ij): return s.a[ij[0]][ij[1]]
    def __setitem__(s, ij, v): s.a[ij[0]][ij[1]] = v
    def __matmul__(s, o):
        assert s.c == o.r
        ot = list(zip(*o.a))
        return M.of([[sum(x*y for x, y in zip(row, col)) for col in ot] for row in s.a])
    @property
    def T(s): return M.of([list(c) for c in zip(*s.a)])
    def __add__(s, o):
        if isinstance(o, (int, float)) and o == 0: return s
        return M.of([[x+y for x, y in zip(r1, r2)] for r1, r2 in zip(s.a, o.a)])
    def __iadd__(s, o): return s + o
    def mul(s, f): return M.of([[f(i, j, s.a[i][j]) for j in range(s.c)] for i in range(s.r)])
    def scale(s, k): return s.mul(lambda i, j, v: v*k)
def randn(r, c): return M.of([[random.gauss(0, 1) for _ in range(c)] for _ in range(r)])
def rel(a, b):
    num = sum((x - y) ** 2 for r1, r2 in zip(a.a, b.a) for x, y in zip(r1, r2))
    return math.sqrt(num / max(1e-300, sum(y * y for r2 in b.a for y in r2)))


def close(a, b, tol=1e-9):
    if TF32 or FLOAT_DECAYS:
        print('  rel %.2e' % rel(a, b), end='')
        return rel(a, b) < 2e-2
    return all(abs(x-y) <= tol*(1+abs(y)) for r1, r2 in zip(a.a, b.a) for x, y in zip(r1, r2)) and a.r == b.r and a.c == b.c
def maxdiff(a, b): return max(abs(x-y) for r1, r2 in zip(a.a, b.a) for x, y in zip(r1, r2))
THREADS = 256; PAD = 4

def run(Q, P, N, has_in, has_out):
    L = Q
    X = randn(L, P); B = randn(L, N); C = randn(L, N); dY = randn(L, P); Sin = randn(P, N); dSo = randn(P, N)
    dt = [random.uniform(0.01, 0.2) for _ in range(L)]; A = -random.uniform(0.5, 4); D = random.gauss(0, 1)
    ai = [x * A for x in dt]
    e = [math.exp(sum(ai[:i + 1])) for i in range(L)]
    last = [math.exp(sum(ai[i + 1:])) for i in range(L)]
    Lm = M(L, L)
    for t in range(L):
        for s in range(t + 1):
            Lm[t, s] = math.exp(sum(ai[s + 1:t + 1]))
    w = [last[i] * dt[i] for i in range(L)]
    cum = [sum(ai[:i + 1]) for i in range(L)]  # tc_decays' prefix (double)
    # reference (SIMT math)
    tril = lambda m: m.mul(lambda i, j, v: v if j <= i else 0.0)
    Gr = tril(C @ B.T); dMr = tril(dY @ X.T)
    Mr = Gr.mul(lambda i, j, v: v * Lm[i, j] * dt[j]); dGr = dMr.mul(lambda i, j, v: v * Lm[i, j] * dt[j])
    xdsr = X @ dSo if has_out else M(L, N); dysr = dY @ Sin if has_in else M(L, N)
    rw = lambda m, f: m.mul(lambda i, j, v: v * f[i])
    dXr = Mr.T @ dY + (rw(B, w) @ dSo.T if has_out else 0) + dY.scale(D)
    dCr = dGr @ B + (rw(dysr, e) if has_in else 0)
    dBr = dGr.T @ C + (rw(xdsr, w) if has_out else 0)
    Ur = dY.T @ rw(C, e)
    ownr = X.T @ rw(B, w)
    # shared memory, float offsets (doubles region skipped: floats start at xds)
    xs, bs, sld = P + PAD, N + PAD, N + PAD
    off = {}
    o = 0
    for name, size in [('xds', Q * N), ('dys', Q * N), ('G', Q * Q), ('Lm', Q * Q), ('dM', Q * Q),
                       ('X', Q * xs), ('dY', Q * xs), ('B', Q * bs), ('C', Q * bs), ('Sin', P * sld), ('dSo', P * sld)]:
        off[name] = o; o += size
        assert off[name] % 8 == 0
    mem = [NAN] * o
    def put(name, M_, ld):
        for i in range(M_.r):
            mem[off[name] + i * ld: off[name] + i * ld + M_.c] = M_.a[i]
    def get(name, rows, cols, ld):
        return M.of([mem[off[name] + i * ld: off[name] + i * ld + cols] for i in range(rows)])
    put('X', X, xs); put('dY', dY, xs); put('B', B, bs); put('C', C, bs)
    if has_in: put('Sin', Sin, sld)
    if has_out: put('dSo', dSo, sld)
    def load(p, ld, row, R, Cc):
        assert p % 8 == 0 and ld % 4 == 0, (p, ld)
        out = M(R, Cc)
        for i in range(R):
            for j in range(Cc):
                out[i, j] = mem[p + i * ld + j] if row else mem[p + i + j * ld]
        assert not any(math.isnan(v) for r_ in out.a for v in r_), "read uninitialised"
        return out
    def store(p, ld, acc):
        assert p % 8 == 0 and ld % 4 == 0
        for i in range(16):
            mem[p + i * ld: p + i * ld + 16] = acc.a[i]
    def mma(acc, a, lda, arow, b, ldb, brow, kn):
        assert kn % 8 == 0
        for k0 in range(0, kn, 8):
            fa = load(a + (k0 if arow else k0 * lda), lda, arow, 16, 8).mul(lambda i, j, v: tf32(v))
            fb = load(b + (k0 * ldb if brow else k0), ldb, brow, 8, 16).mul(lambda i, j, v: tf32(v))
            acc = acc + fa @ fb
        return acc
    l16, n16, p16 = L // 16, N // 16, P // 16
    # forward walk own: XW into dY slot (uses a fresh copy of the slots)
    saved = list(mem)
    for idx in range(L * P):
        t, p = divmod(idx, P); mem[off['dY'] + t * xs + p] = mem[off['X'] + t * xs + p] * w[t]
    for tile in range(p16 * n16):
        pi, ni = divmod(tile, n16)
        acc = mma(M(16, 16), off['dY'] + 16 * pi, xs, False, off['B'] + 16 * ni, bs, True, L)
        store(off['dSo'] + 16 * pi * sld + 16 * ni, sld, acc)
    own = get('dSo', P, N, sld)
    assert close(own, ownr), "own"
    mem = saved
    # products
    for tile in range(2 * l16 * l16):
        which, ti, si = tile // (l16 * l16), (tile % (l16 * l16)) // l16, tile % l16
        if si > ti: continue
        acc = M(16, 16)
        if which == 0:
            acc = mma(acc, off['C'] + 16 * ti * bs, bs, True, off['B'] + 16 * si * bs, bs, False, N)
            store(off['G'] + 16 * ti * L + 16 * si, L, acc)
        else:
            acc = mma(acc, off['dY'] + 16 * ti * xs, xs, True, off['X'] + 16 * si * xs, xs, False, P)
            store(off['dM'] + 16 * ti * L + 16 * si, L, acc)
    for idx in range(L * L):
        t, s = divmod(idx, L)
        on = s <= t
        lk = f32(math.exp(f32(cum[t] - cum[s]))) if FLOAT_DECAYS else Lm[t, s]
        mem[off['Lm'] + idx] = lk if on else 0
        if not on: mem[off['G'] + idx] = 0; mem[off['dM'] + idx] = 0
    assert close(get('G', L, L, L), Gr) and close(get('dM', L, L, L), dMr), "products"
    # intra (SIMT, emulated by formula)
    G = get('G', L, L, L); dM = get('dM', L, L, L)
    Lg = get('Lm', L, L, L)
    put('G', G.mul(lambda i, j, v: v * Lg[i, j] * dt[j]), L); put('dM', dM.mul(lambda i, j, v: v * Lg[i, j] * dt[j]), L)
    # boundary
    for tile in range(2 * l16 * n16):
        which, ti, ni = tile // (l16 * n16), (tile % (l16 * n16)) // n16, tile % n16
        acc = M(16, 16)
        if which == 0:
            if has_out: acc = mma(acc, off['X'] + 16 * ti * xs, xs, True, off['dSo'] + 16 * ni, sld, True, P)
            store(off['xds'] + 16 * ti * N + 16 * ni, N, acc)
        else:
            if has_in: acc = mma(acc, off['dY'] + 16 * ti * xs, xs, True, off['Sin'] + 16 * ni, sld, True, P)
            store(off['dys'] + 16 * ti * N + 16 * ni, N, acc)
    assert close(get('xds', L, N, N), xdsr) and close(get('dys', L, N, N), dysr), "boundary"
    # (steps 5, 6: Lm is R and then free; X read by step 6: free after)
    mem[off['Lm']:off['Lm'] + L * L] = [NAN] * (L * L)
    mem[off['X']:off['X'] + L * xs] = [NAN] * (L * xs)
    # outputs phase 1
    for i in range(L): mem[off['G'] + i * L + i] += D
    for idx in range(L * N):
        t = idx // N
        mem[off['dys'] + idx] = e[t] * mem[off['dys'] + idx] if has_in else 0
        mem[off['xds'] + idx] = w[t] * mem[off['xds'] + idx] if has_out else 0
    # phase 2
    for tile in range(2 * l16 * n16 + l16 * p16):
        if tile < l16 * n16:
            ti, ni = divmod(tile, n16); o_ = off['dys'] + 16 * ti * N + 16 * ni
            acc = load(o_, N, True, 16, 16)
            acc = mma(acc, off['dM'] + 16 * ti * L, L, True, off['B'] + 16 * ni, bs, True, 16 * (ti + 1))
            store(o_, N, acc)
        elif tile < 2 * l16 * n16:
            j = tile - l16 * n16; si, ni = divmod(j, n16); t0 = 16 * si
            o_ = off['xds'] + 16 * si * N + 16 * ni
            acc = load(o_, N, True, 16, 16)
            acc = mma(acc, off['dM'] + t0 * L + t0, L, False, off['C'] + t0 * bs + 16 * ni, bs, True, L - t0)
            store(o_, N, acc)
        else:
            j = tile - 2 * l16 * n16; si, pi = divmod(j, p16); t0 = 16 * si
            acc = mma(M(16, 16), off['G'] + t0 * L + t0, L, False, off['dY'] + t0 * xs + 16 * pi, xs, True, L - t0)
            store(off['X'] + t0 * xs + 16 * pi, xs, acc)
    # phase 3
    dC = get('dys', L, N, N); dB = get('xds', L, N, N)
    assert close(dC, dCr), "dC"; assert close(dB, dBr), "dB"
    for idx in range(L * N):
        t, n = divmod(idx, N)
        if has_out: mem[off['B'] + t * bs + n] *= w[t]
    if has_in:
        for idx in range(L * P):
            t, p = divmod(idx, P); mem[off['dY'] + t * xs + p] *= e[t]
    # phase 4
    n_dx = l16 * p16 if has_out else 0; n_u = p16 * n16 if has_in else 0
    for tile in range(n_dx + n_u):
        if tile < n_dx:
            si, pi = divmod(tile, p16); o_ = off['X'] + 16 * si * xs + 16 * pi
            acc = load(o_, xs, True, 16, 16)
            acc = mma(acc, off['B'] + 16 * si * bs, bs, True, off['dSo'] + 16 * pi * sld, sld, False, N)
            store(o_, xs, acc)
        else:
            j = tile - n_dx; pi, ni = divmod(j, n16)
            acc = mma(M(16, 16), off['dY'] + 16 * pi, xs, False, off['C'] + 16 * ni, bs, True, L)
            store(off['Sin'] + 16 * pi * sld + 16 * ni, sld, acc)
    dX = get('X', L, P, xs)
    assert close(dX, dXr), "dX"
    if has_in: assert close(get('Sin', P, N, sld), Ur), "U"
    print(" ok Q=%d P=%d N=%d has_in=%d has_out=%d max |dX - ref| %.1e" % (Q, P, N, has_in, has_out, maxdiff(dX, dXr)), flush=True)

SHAPES = [(32, 32, 64)] if TF32 else [(32, 32, 64), (16, 16, 32), (64, 32, 64), (16, 48, 16)]
for (Q, P, N) in SHAPES:
    for hi, ho in [(0, 1), (1, 0), (1, 1), (0, 0)]:
        run(Q, P, N, hi, ho)
