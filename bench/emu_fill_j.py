"""emu_fill_j.py: checks of src/model/vsn_table_fill_tc.cu's index logic
without a GPU, against vsn_fused_tc_kernel's (src/model/vsn_forward_fused_tc.cu).

1. The B operands: the fill stages W2 and Wg as bfrag units (bfrag_word:
   unit u, word i) and mma_ktile reads unit (kt NP + np) 32 + lane, words
   x, y for n-tile 2 np and z, w for 2 np + 1; the old kernel's mma_w reads
   W[8 p + g][16 kt + 2 q ..] (b0) and [.. + 8 ..] (b1). For every Dv,
   product, k-tile, n-tile, lane and register, both must name the same
   two weights (n, k), (n, k + 1) in the same halves.
2. The rows: block tiles of R = 64 rows split by st_rowsplit_range over
   the splits, warp w rows 16 w + g (+ 8) of each tile of its split: every
   row below the count written exactly once, none past it; the s a tile
   uses (prefetched a tile ahead, its source rows two ahead) is the s of
   that tile's own rows.
3. fill_j_splits' choice at the H200's 132 SMs x 8 blocks.
A control exchanges b0 and b1 in the staging and must see mismatches.
Run: python3 bench/emu_fill_j.py (exits 1 on a mismatch)."""
import sys


def fill_word(DV, P, kt, np_, l, i):
    """(n, k) of bfrag word i of product P's unit (kt, np, lane l): bfrag_word."""
    n = 8 * (2 * np_ + (i >> 1)) + (l >> 2)
    k = 16 * kt + 2 * (l & 3) + 8 * (i & 1)
    return n, k


def staged(DV):
    """unit index -> (P, kt, np, l) as the staging loop decodes it."""
    NT, KT = DV // 8, DV // 16
    F3 = KT * (NT // 2) * 32
    NF = F3 + KT * NT * 32
    out = {}
    for u in range(NF):
        p3 = u >= F3
        local = u - F3 if p3 else u
        l, blk = local & 31, local >> 5
        pairs = NT if p3 else NT // 2
        out[u] = (1 if p3 else 0, blk // pairs, blk % pairs, l)
    return out, F3


def check_b(DV, word=fill_word):
    NT, KT = DV // 8, DV // 16
    units, F3 = staged(DV)
    bad = 0
    for P, ntiles in ((0, NT), (1, 2 * NT)):
        NP = ntiles // 2
        base = 0 if P == 0 else F3
        for kt in range(KT):
            for p in range(ntiles):
                np_, half = p // 2, p % 2
                for lane in range(32):
                    g, q = lane >> 2, lane & 3
                    u = base + (kt * NP + np_) * 32 + lane
                    sP, skt, snp, sl = units[u]
                    for reg in range(2):  # b0, b1
                        i = 2 * half + reg
                        got = word(DV, sP, skt, snp, sl, i)
                        want = (8 * p + g, 16 * kt + 2 * q + 8 * reg)  # mma_w: row 8p+g, cols 16kt+2q (+8)
                        if sP != P or got != want:
                            bad += 1
    return bad


def rowsplit(n, splits, sp):
    per = (n + splits - 1) // splits
    r0 = sp * per
    return r0, min(r0 + per, n)


def check_rows(rows, splits, R=64, W=4):
    seen = {}
    tiles = (rows + R - 1) // R
    for sp in range(splits):
        t0, t1 = rowsplit(tiles, splits, sp)
        if t0 >= t1:
            continue
        for w in range(W):
            for lane in range(32):
                g = lane >> 2
                wrow = 16 * w + g

                def src(row, live):
                    return [row + 8 * h if live and row + 8 * h < rows else -1 for h in range(2)]

                def s_of(srcs):  # s of a source row: the row itself stands for it
                    return list(srcs)

                sc = s_of(src(t0 * R + wrow, True))
                nxt = src((t0 + 1) * R + wrow, t0 + 1 < t1)
                for tile in range(t0, t1):
                    row = tile * R + wrow
                    sn = s_of(nxt)
                    nxt = src(row + 2 * R, tile + 2 < t1)
                    for h in range(2):
                        r = row + 8 * h
                        if sc[h] != (r if r < rows else -1):
                            return "tile %d row %d: s of row %d" % (tile, r, sc[h])
                        if r < rows and lane % 4 == 0:
                            seen[r] = seen.get(r, 0) + 1
                    sc = sn
    if any(v != 1 for v in seen.values()) or len(seen) != rows:
        return "rows covered %d of %d, %d twice" % (len(seen), rows, sum(v > 1 for v in seen.values()))
    return None


def splits_for(rows, F, slots, R=64):
    tiles = (rows + R - 1) // R
    most = max(1, tiles // 4)
    best, best_fill = 1, 0.0
    for sp in range(1, most + 1):
        blocks = F * sp
        waves = (blocks + slots - 1) // slots
        if waves > 4:
            break
        fill = blocks / (waves * slots)
        if fill > best_fill:
            best, best_fill = sp, fill
    return best, best_fill


def main():
    fails = 0
    for DV in (16, 32):
        bad = check_b(DV)
        print("Dv=%d: B operands, fill vs old kernel: %d mismatches" % (DV, bad))
        fails += bad != 0
    for rows, splits in ((1, 1), (7, 1), (129, 3), (5000, 19), (3333, 19), (70000, 79), (1000, 7)):
        err = check_rows(rows, splits)
        print("rows %d, %d splits: %s" % (rows, splits, err or "every row once, s of its own rows"))
        fails += err is not None
    for rows in (96000, 131072):
        sp, fill = splits_for(rows, 40, 132 * 8)
        print("cap %d, F=40: %d splits, %d blocks, wave fill %.4f" % (rows, sp, 40 * sp, fill))
    # the control: b0 and b1 exchanged within a unit (words 0 <-> 1) must be seen
    swapped = lambda DV, P, kt, np_, l, i: fill_word(DV, P, kt, np_, l, i ^ 1)
    ctl = check_b(32, swapped)
    print("control, b0 and b1 exchanged: %d mismatches (must be > 0)" % ctl)
    fails += ctl == 0
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
