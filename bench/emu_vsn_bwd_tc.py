"""emu_vsn_bwd_tc.py: an emulation of src/model/vsn_backward_fused_tc.cu's
fragment and index logic for one 128-row tile of one block (8 warps), for
checking it without a GPU. The kernel's side is a transcription of its
index expressions: the bf16 B fragments' build (bfrag: product, k-tile,
n-tile pair, lane, word), h1 formed into P2's A, each product's
accumulators packed into the next one's A in place (h2 -> P3, dgl -> P4,
dh2 -> P5), the stmatrix stores of h1, h2, dgl, dh2 (lane row addresses),
the ldmatrix.trans loads of the weight gradients' A (dgl^T, dh2^T) and B
(h2, h1) by unit and k-part, the transposing column butterfly (col_reduce)
and the end's decode of (unit, register, lane) and (warp, vector, column)
into the partial's layout. mma.m16n8k16, ldmatrix(.trans) and stmatrix are
emulated from the PTX ISA's fragment formulas alone (lane = 4 g + q):
  A  reg 0: (g, 2q..2q+1), 1: (g+8, 2q..), 2: (g, 2q+8..), 3: (g+8, 2q+8..)
  B  reg 0: rows (k) 2q..2q+1 of column g, 1: rows 2q+8..2q+9
  C  (g, 2q), (g, 2q+1), (g+8, 2q), (g+8, 2q+1)
  an 8x8 matrix: lane (g, q) holds row g, columns 2q, 2q+1 (.trans:
  column g, rows 2q, 2q+1); matrix i's row addresses from lanes 8i..8i+7.
Values in float64 (no bf16 rounding: the layouts, not the numbers); the
element-wise part is a stand-in (dgl = g / 2 + 1, ELU' random). Checks
h2, g, dh2 fragment by fragment and dWg, dW2, gg, fc2_b, q in the partial
against plain products, at Dv = 32 and 16. Run: python3 bench/emu_vsn_bwd_tc.py
(prints "DV 32 ok", "DV 16 ok"; a wrong index fails an assertion: the A
address's row and column offsets swapped fails dWg)."""
# dW units, col_reduce, the flush) in float64 for one tile, against numpy.
import random, math
class M:
    """a tiny 2D float array: M[r, c], M[r, c0:c1] (get / set), rows by slice, @, .T"""
    def __init__(s, rows): s.a=[list(r) for r in rows]
    @property
    def shape(s): return (len(s.a), len(s.a[0]) if s.a else 0)
    def __getitem__(s, k):
        if isinstance(k, slice): return M(s.a[k])
        r,c=k
        return s.a[r][c] if isinstance(c,int) else s.a[r][c]
    def __setitem__(s, k, v):
        if isinstance(k, slice):
            rows=range(*k.indices(len(s.a)))
            for i,r in enumerate(rows): s.a[r]=list(v.a[i])
            return
        r,c=k
        if isinstance(c,int): s.a[r][c]=v
        else:
            idx=range(*c.indices(len(s.a[r])))
            for i,cc in enumerate(idx): s.a[r][cc]=v[i]
    def __matmul__(s, o):
        oT=list(zip(*o.a)); return M([[sum(x*y for x,y in zip(r,cc)) for cc in oT] for r in s.a])
    def __mul__(s, o): return M([[x*y for x,y in zip(r,q)] for r,q in zip(s.a,o.a)])
    @property
    def T(s): return M([list(c) for c in zip(*s.a)])
    def colsum(s): return [sum(c) for c in zip(*s.a)]
def randm(rng,r,c,lo=None,hi=None): return M([[rng.uniform(lo,hi) if lo is not None else rng.gauss(0,1) for _ in range(c)] for _ in range(r)])
def close(a,b,name):
    for x,y in zip(a,b): assert abs(x-y)<=1e-8*(1+abs(y)), (name,x,y)
def run(DV, seed=1):
    rng=random.Random(seed)
    W=8; R=128; NT=DV//8; KT=DV//16
    W2=randm(rng,DV,DV); Wg=randm(rng,2*DV,DV)
    h1=randm(rng,R,DV)
    # bfrag
    def B(P,k,n): return W2[n,k] if P==0 else Wg[n,k] if P==1 else Wg[k,n] if P==2 else W2[k,n]
    F2=0; F3=F2+KT*(NT//2)*32; F4=F3+KT*NT*32; F5=F4+KT*NT*32; NF=F5+KT*(NT//2)*32
    bw=[None]*(4*NF)
    for i in range(4*NF):
        P=0 if i<4*F3 else 1 if i<4*F4 else 2 if i<4*F5 else 3
        at=[F2,F3,F4,F5][P]; pairs=NT if P==1 else NT//2
        li=i-4*at; w=li&3; l=(li>>2)&31; blk=li>>7
        kt=blk//pairs; pn=2*(blk%pairs)+(w>>1)
        k=16*kt+2*(l&3)+8*(w&1); n=8*pn+(l>>2)
        bw[i]=[B(P,k,n),B(P,k+1,n)]
    bfr=[bw[4*i:4*i+4] for i in range(NF)]
    # mma: a[lane][4][2], b[lane][2][2], d[lane][4]
    def mma(d,a,b0,b1):
        A=M([[0.0]*16 for _ in range(16)]); Bm=M([[0.0]*8 for _ in range(16)])
        for l in range(32):
            g,q=l>>2,l&3
            A[g,2*q:2*q+2]=a[l][0]; A[g+8,2*q:2*q+2]=a[l][1]; A[g,2*q+8:2*q+10]=a[l][2]; A[g+8,2*q+8:2*q+10]=a[l][3]
            Bm[2*q,g]=b0[l][0]; Bm[2*q+1,g]=b0[l][1]; Bm[2*q+8,g]=b1[l][0]; Bm[2*q+9,g]=b1[l][1]
        C=A@Bm
        for l in range(32):
            g,q=l>>2,l&3
            for i,x in enumerate([C[g,2*q],C[g,2*q+1],C[g+8,2*q],C[g+8,2*q+1]]): d[l][i]+=x
    def mma_frag(d,a,f,NP2,KK):  # d[l][nt][4], a[l][kt][4][2]
        for kt in range(KK):
            for np_ in range(NP2):
                b=[bfr[f+(kt*NP2+np_)*32+l] for l in range(32)]
                for u in range(2):
                    dd=[d[l][2*np_+u] for l in range(32)]
                    mma(dd,[a[l][kt] for l in range(32)],[b[l][2*u] for l in range(32)],[b[l][2*u+1] for l in range(32)])
    def pack(lo,hi): return [lo[0:2],lo[2:4],hi[0:2],hi[2:4]]
    LDD=2*DV+8; LDS=DV+8
    nanm=lambda r,c: M([[math.nan]*c for _ in range(r)])
    SD=nanm(R,LDD); SH2=nanm(R,LDS); SD2=nanm(R,LDS); SH1=nanm(R,LDS)
    def stsm(buf,row0,col0,regs):  # regs[l][4][2]
        addr={}
        for l in range(32):
            m=l>>3; addr[l]=(row0+(l&7)+8*(m&1), col0+8*(m>>1))
        for i in range(4):
            for l in range(32):
                g,q=l>>2,l&3
                r,c=addr[8*i+g]; buf[r,c+2*q:c+2*q+2]=regs[l][i]
    def ldsm_trans(buf,addrf,nmat):
        out=[[None]*nmat for _ in range(32)]
        for i in range(nmat):
            rows=[addrf(8*i+j) for j in range(8)]
            MM=[buf.a[r][c:c+8] for r,c in rows]
            for l in range(32):
                g,q=l>>2,l&3
                out[l][i]=[MM[2*q][g],MM[2*q+1][g]]
        return out
    def col_reduce(vals,N):  # vals[l][N] -> per lane
        v=[list(x) for x in vals]; n=N
        for O in (16,8,4):
            if n>1:
                new=[None]*32
                for l in range(32):
                    up=(l&O)!=0; p=l^O
                    new[l]=[ (v[l][i+n//2] if up else v[l][i]) + (v[p][i+n//2] if up else v[p][i]) for i in range(n//2)]
                v=new; n//=2
            else:
                v=[[v[l][0]+v[l^O][0]] for l in range(32)]
        return [x[0] for x in v]
    csum=[[[0.0]*8 for _ in range(32)] for _ in range(W)]
    z=lambda r,c: M([[0.0]*c for _ in range(r)])
    ref_dgl=z(R,2*DV); ref_dh2=z(R,DV); ref_dh1=z(R,DV); eg_all=randm(rng,R,DV,0.1,1)
    for w in range(W):
        rr=slice(16*w,16*w+16)
        hf=[[None]*NT for _ in range(32)]
        a1=[[None]*KT for _ in range(32)]
        for l in range(32):
            g,q=l>>2,l&3
            for kt in range(KT):
                k=16*kt+2*q
                lo=[h1[16*w+g,k],h1[16*w+g,k+1],h1[16*w+g+8,k],h1[16*w+g+8,k+1]]
                hi=[h1[16*w+g,k+8],h1[16*w+g,k+9],h1[16*w+g+8,k+8],h1[16*w+g+8,k+9]]
                a1[l][kt]=pack(lo,hi)
        h2=[[[0.0]*4 for _ in range(NT)] for _ in range(32)]
        mma_frag(h2,a1,F2,NT//2,KT)
        a2=[[pack(h2[l][2*kt],h2[l][2*kt+1]) for kt in range(KT)] for l in range(32)]
        gq=[[[0.0]*4 for _ in range(2*NT)] for _ in range(32)]
        mma_frag(gq,a2,F3,NT,KT)
        # check h2, g against numpy
        H2=h1[rr]@W2.T; G=H2@Wg.T
        for l in range(32):
            g,q=l>>2,l&3
            for p in range(NT):
                for c in range(4):
                    r=g+8*(c>>1); o=8*p+2*q+(c&1)
                    assert abs(h2[l][p][c]-H2[r,o])<1e-9
            for p in range(2*NT):
                for c in range(4):
                    r=g+8*(c>>1); o=8*p+2*q+(c&1)
                    assert abs(gq[l][p][c]-G[r,o])<1e-9
        for kt in range(KT):
            stsm(SH1,16*w,16*kt,[a1[l][kt] for l in range(32)])
            stsm(SH2,16*w,16*kt,[a2[l][kt] for l in range(32)])
        # dgl = G * 0.5 + 1 (elementwise stand-in)
        DG=z(16,2*DV)
        for l in range(32):
            g,q=l>>2,l&3
            for p in range(2*NT):
                for c in range(4):
                    gq[l][p][c]=gq[l][p][c]*0.5+1; r=g+8*(c>>1); o=8*p+2*q+(c&1); DG[r,o]=gq[l][p][c]
        ref_dgl[rr]=DG
        a3=[[pack(gq[l][2*kt],gq[l][2*kt+1]) for kt in range(2*KT)] for l in range(32)]
        for kt in range(2*KT): stsm(SD,16*w,16*kt,[a3[l][kt] for l in range(32)])
        lo=[[gq[l][p][e]+gq[l][p][2+e] for p in range(NT) for e in range(2)] for l in range(32)]
        hi=[[gq[l][NT+p][e]+gq[l][NT+p][2+e] for p in range(NT) for e in range(2)] for l in range(32)]
        rl=col_reduce(lo,2*NT); rh=col_reduce(hi,2*NT)
        for l in range(32): csum[w][l][5]=rl[l]; csum[w][l][6]=rh[l]
        d2=[[[0.0]*4 for _ in range(NT)] for _ in range(32)]
        mma_frag(d2,a3,F4,NT//2,2*KT)
        D2=DG@Wg; ref_dh2[rr]=D2
        for l in range(32):
            g,q=l>>2,l&3
            for p in range(NT):
                for c in range(4):
                    assert abs(d2[l][p][c]-D2[g+8*(c>>1),8*p+2*q+(c&1)])<1e-9
        v=[[d2[l][p][e]+d2[l][p][2+e] for p in range(NT) for e in range(2)] for l in range(32)]
        r7=col_reduce(v,2*NT)
        for l in range(32): csum[w][l][7]=r7[l]
        a4=[[pack(d2[l][2*kt],d2[l][2*kt+1]) for kt in range(KT)] for l in range(32)]
        for kt in range(KT): stsm(SD2,16*w,16*kt,[a4[l][kt] for l in range(32)])
        d1=[[[0.0]*4 for _ in range(NT)] for _ in range(32)]
        mma_frag(d1,a4,F5,NT//2,KT)
        D1=(D2@W2)*eg_all[rr]; ref_dh1[rr]=D1
        v=[]
        for l in range(32):
            g,q=l>>2,l&3
            row=[]
            for p in range(NT):
                for e in range(2):
                    o=8*p+2*q+e
                    row.append(d1[l][p][e]*eg_all[16*w+g,o]+d1[l][p][2+e]*eg_all[16*w+g+8,o])
            v.append(row)
        r3=col_reduce(v,2*NT)
        for l in range(32): csum[w][l][3]=r3[l]
    # dW units
    NU=(2*DV//16)*(NT//2); KP=W//NU; KSTEPS=R//16//KP
    accw=[[[[0.0]*4 for _ in range(3)] for _ in range(32)] for _ in range(W)]
    for w in range(W):
        unit=w%NU; kp=w//NU; gm=unit//(NT//2); gp=unit%(NT//2); wm=unit//NT; wn=unit%NT
        for ks in range(KSTEPS):
            r0=16*(kp*KSTEPS+ks)
            def adr(buf_col0, rowsel):
                return lambda l: ((r0+(l&7)+8*((l>>3)>>1), buf_col0+8*((l>>3)&1)) if rowsel=='A' else (r0+(l&7)+8*((l>>3)&1), buf_col0+8*((l>>3)>>1)))
            ag=ldsm_trans(SD,adr(16*gm,'A'),4); bg=ldsm_trans(SH2,adr(16*gp,'B'),4)
            a2w=ldsm_trans(SD2,adr(16*wm,'A'),4); b2w=ldsm_trans(SH1,adr(8*wn,'B'),2)
            for u in range(2):
                dd=[accw[w][l][u] for l in range(32)]
                mma(dd,ag,[bg[l][2*u] for l in range(32)],[bg[l][2*u+1] for l in range(32)])
            dd=[accw[w][l][2] for l in range(32)]
            mma(dd,a2w,[b2w[l][0] for l in range(32)],[b2w[l][1] for l in range(32)])
    # flush
    xw=[[[0.0]*32 for _ in range(12)] for _ in range(W)]
    for w in range(W):
        for i in range(12):
            for l in range(32): xw[w][i][l]=accw[w][l][i//4][i%4]
    REP=8//(2*NT); xc=[[[math.nan]*DV for _ in range(8)] for _ in range(W)]
    for w in range(W):
        for l in range(32):
            g,q=l>>2,l&3
            if g%REP==0:
                c=g//REP; o=8*(c//2)+2*q+c%2
                for v in range(8): xc[w][v][o]=csum[w][l][v]
    DD=DV*DV; NWG=2*DD; GG=3*DD; FB=GG+2*DV; NACC=FB+DV
    part=[0.0]*(NACC+5*DV)
    for i in range(NACC+5*DV):
        t=0
        if i<GG:
            w2=i>=NWG; ii=i-NWG if w2 else i; o=ii//DV; k=ii%DV
            u=(o//16)*NT+k//8 if w2 else (o//16)*(NT//2)+k//16
            reg=(8 if w2 else 4*((k%16)//8))+2*((o%16)//8)+k%2
            l=4*(o%8)+(k%8)//2
            for p in range(KP): t+=xw[u+NU*p][reg][l]
        else:
            if i<FB: v=5 if i-GG<DV else 6; o=(i-GG)%DV
            elif i<NACC: v=7; o=i-FB
            else: v=(i-NACC)//DV; o=(i-NACC)%DV
            if v in (0,1,2,4): continue
            t=sum(xc[w][v][o] for w in range(W))
        part[i]=t
    dWg=ref_dgl.T@(h1@W2.T); dW2=ref_dh2.T@h1
    close(part[:NWG],[x for r in dWg.a for x in r],'dWg')
    close(part[NWG:GG],[x for r in dW2.a for x in r],'dW2')
    close(part[GG:FB],ref_dgl.colsum(),'gg')
    close(part[FB:NACC],ref_dh2.colsum(),'fc2_b')
    close(part[NACC+3*DV:NACC+4*DV],ref_dh1.colsum(),'q')
    for B_,n in ((SD,2*DV),(SH2,DV),(SD2,DV),(SH1,DV)):
        assert not any(math.isnan(x) for r in B_.a for x in r[:n])
    print('DV',DV,'ok')
run(32); run(16)
