/* scan.cu: the NaN/Inf tracer's scans on the GPU (contract in
 * cuda/trace_cuda.h; the host twin is trace/scan.c).
 *
 * The clean path is the host's integer trick: for a value with bits b,
 * (b & exponent_mask) + exponent_lsb carries into the sign bit exactly when
 * every exponent bit is set (NaN or +-Inf); each thread ORs that over its
 * elements and tests the top bit once. Only a thread whose elements hold a
 * bad value walks them again to find its smallest logical index and its
 * count, and merges them into the item's scratch slot with atomicMin and
 * atomicAdd on 64-bit integers: min and sum of integers, so the same
 * result in any execution order. Logical index i of a [rows, width] view
 * is element (i / width) * stride + i % width; a contiguous view (stride ==
 * width, or one row) is read as one vector of rows * width values with
 * 16-byte loads, a padded one row by row, never touching the gap.
 *
 * Launches per chunk of up to ST_CUDA_TRACE_CHUNK items, all on one stream:
 *   inject    one thread, only when the chunk's first item has the armed
 *             injection's label (a chunk is cut before such an item, so
 *             the injection lands after the scans of the items before it,
 *             as on the host);
 *   scan      a flat grid: item k owns blocks [block_start[k],
 *             block_start[k+1]), a count fixed by its size on the host;
 *             a label that has already tripped is skipped;
 *   finalise  the items' scratch slots and record states are read (and
 *             the slots reset) by one thread each, then one thread walks
 *             the items in order: seq + 1 for each, and the record on the
 *             label's first trip (value re-read at the first index for
 *             kind and bits).
 * The chunk travels by value as a kernel parameter (under 4 KB), so graph
 * replays see the captured items and no host buffer must outlive a call. */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/check.h"

extern "C" {
#include "cuda/trace_cuda.h"
}

typedef unsigned long long u64;

enum { ST_SCAN_THREADS = 256, ST_SCAN_PER_THREAD = 16, ST_RESET_THREADS = 256 };
#define ST_SCAN_NONE ULLONG_MAX /* scratch "first": nothing found */

/* One item as the kernels see it. */
struct scan_item {
    const void *p;
    long long rows, width, stride;
    int label, f64;
};

/* A chunk of items; item k owns scan blocks [block_start[k], block_start[k+1]). */
struct scan_chunk {
    int n;
    int block_start[ST_CUDA_TRACE_CHUNK + 1];
    scan_item item[ST_CUDA_TRACE_CHUNK];
};
static_assert(sizeof(scan_chunk) + 128 <= 4096, "a scan chunk must fit the 4 KB kernel parameter space");

/* Per chunk position: smallest bad logical index, number of bad values. */
struct scan_scratch {
    u64 first[ST_CUDA_TRACE_CHUNK];
    u64 count[ST_CUDA_TRACE_CHUNK];
};

struct label_shape {
    int ndim;
    long long shape[4];
};

struct injection {
    long long step, index;
    int kind;
};

struct st_cuda_trace_dev {
    label_shape *shape;    /* device [nlabels] */
    scan_scratch *scratch; /* device */
    int *done;             /* device: the injection fired */
    unsigned char *f64;    /* host [nlabels]: the labels' precision, for checks */
    int scanning;
    injection inj;
    int max_blocks; /* scan blocks per item at most: one full wave of the device */
};

/* ---- bit tests ------------------------------------------------------------ */

template <typename W> struct fp_bits;
template <> struct fp_bits<uint32_t> {
    static constexpr uint32_t exp = 0x7f800000u, lsb = 0x00800000u, top = 0x80000000u, mant = 0x007fffffu;
};
template <> struct fp_bits<u64> {
    static constexpr u64 exp = 0x7ff0000000000000ull, lsb = 0x0010000000000000ull, top = 0x8000000000000000ull,
                         mant = 0x000fffffffffffffull;
};

/* 16-byte loads: four floats or two doubles. */
template <typename W> struct vec16;
template <> struct vec16<uint32_t> {
    typedef uint4 type;
    enum { n = 4 };
    static __device__ void split(const uint4 &v, uint32_t *w) { w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w; }
};
template <> struct vec16<u64> {
    typedef ulonglong2 type;
    enum { n = 2 };
    static __device__ void split(const ulonglong2 &v, u64 *w) { w[0] = v.x, w[1] = v.y; }
};

/* What a walk does per element: OR the test (FIND false), or track the
 * smallest bad logical index and count the bad values (FIND true). */
template <typename W, bool FIND> struct visitor {
    W acc;
    u64 first, count;
    __device__ void see(W b, long long i) {
        W t = (W)((b & fp_bits<W>::exp) + fp_bits<W>::lsb);
        if (!FIND) {
            acc |= t;
        } else if (t & fp_bits<W>::top) {
            if ((u64)i < first) first = (u64)i;
            count++;
        }
    }
};

/* Thread tid of nth walks its share of item it's logical elements. */
template <typename W, bool FIND>
static __device__ void walk(const scan_item &it, long long tid, long long nth, visitor<W, FIND> &v) {
    const W *p = (const W *)it.p;
    if (it.rows == 1 || it.stride == it.width) {
        typedef typename vec16<W>::type V;
        const long long vn = vec16<W>::n, es = (long long)sizeof(W);
        long long n = it.rows * it.width, mis = (long long)((uintptr_t)p % 16);
        /* scalar head up to the first 16-byte boundary, vectors, scalar tail */
        long long head = mis % es ? n : ((16 - mis) % 16) / es;
        if (head > n) head = n;
        long long nv = (n - head) / vn, tail = head + nv * vn;
        for (long long i = tid; i < head; i += nth)
            v.see(p[i], i);
        const V *pv = (const V *)(p + head);
#pragma unroll 4
        for (long long j = tid; j < nv; j += nth) {
            W w[vec16<W>::n];
            vec16<W>::split(pv[j], w);
#pragma unroll
            for (int q = 0; q < vec16<W>::n; q++)
                v.see(w[q], head + j * vn + q);
        }
        for (long long i = tail + tid; i < n; i += nth)
            v.see(p[i], i);
        return;
    }
    /* padded rows: logical i = r * width + c advanced by nth without a division per element */
    long long w = it.width, r = tid / w, c = tid % w, dr = nth / w, dc = nth % w;
    while (r < it.rows) {
        v.see(p[r * it.stride + c], r * w + c);
        c += dc;
        r += dr;
        if (c >= w) c -= w, r++;
    }
}

template <typename W>
static __device__ void scan_one(const scan_item &it, long long tid, long long nth, scan_scratch *s, int k) {
    visitor<W, false> any = {0, 0, 0};
    walk<W, false>(it, tid, nth, any);
    if (!(any.acc & fp_bits<W>::top)) return;
    visitor<W, true> bad = {0, ST_SCAN_NONE, 0};
    walk<W, true>(it, tid, nth, bad);
    atomicMin(&s->first[k], bad.first);
    atomicAdd(&s->count[k], bad.count);
}

static __global__ void __launch_bounds__(ST_SCAN_THREADS)
    scan_kernel(const __grid_constant__ scan_chunk c, const st_trace_record *rec, scan_scratch *s) {
    int b = (int)blockIdx.x, lo = 0, hi = c.n - 1;
    while (lo < hi) { /* the item whose block range holds b */
        int mid = (lo + hi + 1) / 2;
        if (c.block_start[mid] <= b)
            lo = mid;
        else
            hi = mid - 1;
    }
    const scan_item &it = c.item[lo];
    if (rec[it.label].index >= 0) return; /* only the first trip of a label is kept */
    long long nth = (long long)(c.block_start[lo + 1] - c.block_start[lo]) * blockDim.x;
    long long tid = (long long)(b - c.block_start[lo]) * blockDim.x + threadIdx.x;
    if (it.f64)
        scan_one<u64>(it, tid, nth, s, lo);
    else
        scan_one<uint32_t>(it, tid, nth, s, lo);
}

/* ---- finalise, inject, reset ---------------------------------------------- */

struct fin_args {
    st_trace_record *rec;
    int64_t *seq;
    const label_shape *shape;
    scan_scratch *s;
    const int64_t *step;
    const int32_t *sub;
    int run, scanning;
};

template <typename W> static __device__ int kind_of(W b) {
    if (b & fp_bits<W>::mant) return ST_TRACE_NAN;
    return (b & fp_bits<W>::top) ? ST_TRACE_NEG_INF : ST_TRACE_POS_INF;
}

/* The record of record_trip (trace/scan.c): first index, its coordinates by
 * the label's shape (decode()), kind and bits of the value there, count. */
static __device__ void fill_record(const fin_args &a, const scan_item &it, u64 first, u64 count, int64_t seq) {
    st_trace_record *rec = &a.rec[it.label];
    long long at = (long long)(first / (u64)it.width) * it.stride + (long long)(first % (u64)it.width);
    if (it.f64) {
        u64 b = ((const u64 *)it.p)[at];
        rec->kind = kind_of<u64>(b);
        rec->bits = b;
    } else {
        uint32_t b = ((const uint32_t *)it.p)[at];
        rec->kind = kind_of<uint32_t>(b);
        rec->bits = b;
    }
    const label_shape *l = &a.shape[it.label];
    long long flat = (long long)first;
    for (int i = l->ndim - 1; i >= 0; i--) {
        long long sz = l->shape[i] > 0 ? l->shape[i] : 1;
        rec->coord[i] = (int32_t)(flat % sz);
        flat /= sz;
    }
    rec->count = (int64_t)count;
    rec->step = *a.step;
    rec->sub = *a.sub;
    rec->seq = seq;
    rec->run = a.run;
    rec->f64 = it.f64;
    rec->index = (int64_t)first; /* last, as on the host */
}

/* One block of ST_CUDA_TRACE_CHUNK threads: thread k reads item k's slot
 * and record state and resets the slot (all loads at once, not one round
 * trip per item); thread 0 then walks the items in order. */
static __global__ void __launch_bounds__(ST_CUDA_TRACE_CHUNK)
    finalise_kernel(const __grid_constant__ scan_chunk c, fin_args a) {
    __shared__ u64 first[ST_CUDA_TRACE_CHUNK], count[ST_CUDA_TRACE_CHUNK];
    __shared__ int64_t open[ST_CUDA_TRACE_CHUNK]; /* record index before this chunk */
    int k = (int)threadIdx.x;
    if (k < c.n) {
        first[k] = a.s->first[k];
        count[k] = a.s->count[k];
        open[k] = a.rec[c.item[k].label].index;
        a.s->first[k] = ST_SCAN_NONE;
        a.s->count[k] = 0;
    }
    __syncthreads();
    if (k != 0) return;
    int64_t seq = *a.seq;
    for (int j = 0; j < c.n; j++) {
        seq++;
        /* the index is read again only on a trip: an earlier item of this
         * chunk with the same label may have just filled the record */
        if (a.scanning && first[j] != ST_SCAN_NONE && open[j] < 0 && a.rec[c.item[j].label].index < 0)
            fill_record(a, c.item[j], first[j], count[j], seq);
    }
    *a.seq = seq;
}

/* The host's inject(): once, at the armed step, inside the logical view. */
static __global__ void inject_kernel(scan_item it, injection in, const int64_t *step, int *done) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    if (*done || *step != in.step || in.index >= it.rows * it.width) return;
    long long at = (in.index / it.width) * it.stride + in.index % it.width;
    if (it.f64) {
        u64 v = in.kind == ST_TRACE_NAN       ? 0x7ff8000000000000ull
                : in.kind == ST_TRACE_POS_INF ? 0x7ff0000000000000ull
                                              : 0xfff0000000000000ull;
        ((u64 *)it.p)[at] = v; /* the one write into a scanned buffer */
    } else {
        uint32_t v = in.kind == ST_TRACE_NAN ? 0x7fc00000u : in.kind == ST_TRACE_POS_INF ? 0x7f800000u : 0xff800000u;
        ((uint32_t *)it.p)[at] = v;
    }
    *done = 1;
}

static __global__ void reset_kernel(st_trace_record *rec, int nlabels, int *done, scan_scratch *s) {
    int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < nlabels) {
        st_trace_record r;
        memset(&r, 0, sizeof r);
        r.index = -1;
        rec[i] = r;
    }
    if (i < ST_CUDA_TRACE_CHUNK) {
        s->first[i] = ST_SCAN_NONE;
        s->count[i] = 0;
    }
    if (i == 0) *done = 0;
}

/* ---- host side ------------------------------------------------------------ */

static int dev_alloc(void **p, size_t bytes, const char *what) {
    cudaError_t e = cudaMalloc(p, bytes);
    if (e == cudaSuccess) return ST_OK;
    *p = NULL;
    (void)cudaGetLastError(); /* not left for the next launch check */
    return ST_FAIL(e == cudaErrorMemoryAllocation ? ST_ERR_MEMORY : ST_ERR_DEVICE,
                   "tracer: cannot allocate %zu bytes of device memory for %s: %s", bytes, what, cudaGetErrorString(e));
}

static int init_body(st_cuda_trace *t, const st_trace *host, label_shape *shape, st_trace_record *clean) {
    st_cuda_trace_dev *d = t->dev;
    int nl = t->nlabels;
    for (int i = 0; i < nl; i++) {
        const st_label *l = &host->labels.l[i];
        ST_REQUIRE(l->ndim >= 0 && l->ndim <= 4, ST_ERR_INPUT, "tracer: label %s has %d dimensions", l->name, l->ndim);
        memset(&shape[i], 0, sizeof shape[i]);
        shape[i].ndim = l->ndim;
        for (int j = 0; j < l->ndim; j++)
            shape[i].shape[j] = l->shape[j];
        d->f64[i] = l->f64 ? 1 : 0;
        memset(&clean[i], 0, sizeof clean[i]);
        clean[i].index = -1;
    }
    int dev = 0, sms = 0, per_sm = 0;
    ST_CUDA_TRY(cudaGetDevice(&dev));
    ST_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    ST_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, scan_kernel, ST_SCAN_THREADS, 0));
    d->max_blocks = sms * per_sm;
    if (d->max_blocks < 1) d->max_blocks = 1;

    ST_TRY(dev_alloc((void **)&t->rec, sizeof(st_trace_record) * (size_t)nl, "the records"));
    ST_TRY(dev_alloc((void **)&t->seq, sizeof(int64_t), "the scan counter"));
    ST_TRY(dev_alloc((void **)&d->shape, sizeof(label_shape) * (size_t)nl, "the label shapes"));
    ST_TRY(dev_alloc((void **)&d->scratch, sizeof(scan_scratch), "the scan scratch"));
    ST_TRY(dev_alloc((void **)&d->done, sizeof(int), "the injection flag"));
    int done = host->inject.done ? 1 : 0;
    int64_t seq = host->seq;
    ST_CUDA_TRY(cudaMemcpy(t->rec, clean, sizeof(st_trace_record) * (size_t)nl, cudaMemcpyHostToDevice));
    ST_CUDA_TRY(cudaMemcpy(t->seq, &seq, sizeof seq, cudaMemcpyHostToDevice));
    ST_CUDA_TRY(cudaMemcpy(d->shape, shape, sizeof(label_shape) * (size_t)nl, cudaMemcpyHostToDevice));
    ST_CUDA_TRY(cudaMemcpy(d->done, &done, sizeof done, cudaMemcpyHostToDevice));
    ST_CUDA_TRY(cudaMemset(d->scratch->first, 0xFF, sizeof d->scratch->first)); /* ST_SCAN_NONE */
    ST_CUDA_TRY(cudaMemset(d->scratch->count, 0, sizeof d->scratch->count));
    ST_CUDA_TRY(cudaDeviceSynchronize());
    return ST_OK;
}

extern "C" int st_cuda_trace_init(st_cuda_trace *t, const st_trace *host, const int64_t *step_dev,
                                  const int32_t *sub_dev) {
    memset(t, 0, sizeof *t);
    t->inject_label = -1;
    ST_REQUIRE(host && host->labels.n > 0 && host->labels.l, ST_ERR_INPUT, "tracer: the host tracer has no labels");
    ST_REQUIRE(step_dev && sub_dev, ST_ERR_INPUT, "tracer: the device step and pass words are required");
    t->dev = (st_cuda_trace_dev *)calloc(1, sizeof *t->dev);
    ST_REQUIRE(t->dev, ST_ERR_MEMORY, "tracer: out of memory");
    int nl = host->labels.n;
    t->nlabels = nl;
    t->step_dev = step_dev;
    t->sub_dev = sub_dev;
    t->run = host->run;
    t->inject_label = host->inject.armed ? host->inject.label : -1;
    st_cuda_trace_dev *d = t->dev;
    d->scanning = host->scanning ? 1 : 0;
    d->inj.step = host->inject.step;
    d->inj.index = host->inject.index;
    d->inj.kind = host->inject.kind;
    d->f64 = (unsigned char *)malloc((size_t)nl);
    label_shape *shape = (label_shape *)malloc(sizeof(label_shape) * (size_t)nl);
    st_trace_record *clean = (st_trace_record *)malloc(sizeof(st_trace_record) * (size_t)nl);
    int rc = d->f64 && shape && clean ? init_body(t, host, shape, clean)
                                      : ST_FAIL(ST_ERR_MEMORY, "tracer: out of memory for %d labels", nl);
    free(shape);
    free(clean);
    if (rc != ST_OK) st_cuda_trace_free(t);
    return rc;
}

extern "C" void st_cuda_trace_free(st_cuda_trace *t) {
    if (!t) return;
    cudaFree(t->rec);
    cudaFree(t->seq);
    if (t->dev) {
        cudaFree(t->dev->shape);
        cudaFree(t->dev->scratch);
        cudaFree(t->dev->done);
        free(t->dev->f64);
        free(t->dev);
    }
    memset(t, 0, sizeof *t);
    t->inject_label = -1;
}

extern "C" void st_cuda_trace_set_scanning(st_cuda_trace *t, int on) {
    if (t && t->dev) t->dev->scanning = on ? 1 : 0;
}

/* Scan blocks of an item: ST_SCAN_PER_THREAD elements a thread, one wave at most. */
static int item_blocks(const st_cuda_scan_item *it, int max_blocks) {
    long long n = (long long)it->rows * it->width, per = (long long)ST_SCAN_THREADS * ST_SCAN_PER_THREAD;
    long long b = (n + per - 1) / per;
    return b < 1 ? 1 : b > max_blocks ? max_blocks : (int)b;
}

extern "C" int st_cuda_trace_scan(st_cuda_trace *t, int n, const st_cuda_scan_item *items, void *stream) {
    ST_REQUIRE(t && t->dev, ST_ERR_INPUT, "tracer scan: no device tracer");
    ST_REQUIRE(n >= 0 && (n == 0 || items), ST_ERR_INPUT, "tracer scan: %d items at %p", n, (const void *)items);
    const st_cuda_trace_dev *d = t->dev;
    for (int i = 0; i < n; i++) {
        const st_cuda_scan_item *it = &items[i];
        ST_REQUIRE(it->label >= 0 && it->label < t->nlabels, ST_ERR_INPUT, "tracer scan: item %d has label %d of %d", i,
                   it->label, t->nlabels);
        ST_REQUIRE(it->p && it->rows > 0 && it->width > 0 && it->stride >= it->width, ST_ERR_INPUT,
                   "tracer scan: item %d (label %d): %lld x %lld, stride %lld at %p", i, it->label, (long long)it->rows,
                   (long long)it->width, (long long)it->stride, it->p);
        ST_REQUIRE((it->f64 != 0) == (d->f64[it->label] != 0), ST_ERR_INPUT,
                   "tracer scan: item %d (label %d) holds %s, the label %s", i, it->label,
                   it->f64 ? "doubles" : "floats", d->f64[it->label] ? "doubles" : "floats");
    }
    cudaStream_t s = (cudaStream_t)stream;
    fin_args fa = {t->rec, t->seq, d->shape, d->scratch, t->step_dev, t->sub_dev, t->run, d->scanning};
    for (int i = 0; i < n;) {
        /* a chunk: up to ST_CUDA_TRACE_CHUNK items, cut before an injected label's item */
        int end = i + 1;
        while (end < n && end - i < ST_CUDA_TRACE_CHUNK && items[end].label != t->inject_label)
            end++;
        scan_chunk c;
        memset(&c, 0, sizeof c);
        c.n = end - i;
        int blocks = 0;
        for (int k = 0; k < c.n; k++) {
            const st_cuda_scan_item *it = &items[i + k];
            c.item[k].p = it->p;
            c.item[k].rows = it->rows;
            c.item[k].width = it->width;
            c.item[k].stride = it->stride;
            c.item[k].label = it->label;
            c.item[k].f64 = it->f64 ? 1 : 0;
            c.block_start[k] = blocks;
            blocks += item_blocks(it, d->max_blocks);
        }
        c.block_start[c.n] = blocks;
        if (t->inject_label >= 0 && items[i].label == t->inject_label) {
            inject_kernel<<<1, 1, 0, s>>>(c.item[0], d->inj, t->step_dev, d->done);
            ST_CUDA_LAUNCHED();
        }
        if (d->scanning) {
            scan_kernel<<<(unsigned)blocks, ST_SCAN_THREADS, 0, s>>>(c, t->rec, d->scratch);
            ST_CUDA_LAUNCHED();
        }
        finalise_kernel<<<1, ST_CUDA_TRACE_CHUNK, 0, s>>>(c, fa);
        ST_CUDA_LAUNCHED();
        i = end;
    }
    return ST_OK;
}

extern "C" int st_cuda_trace_reset(st_cuda_trace *t, void *stream) {
    ST_REQUIRE(t && t->dev, ST_ERR_INPUT, "tracer reset: no device tracer");
    int n = t->nlabels > ST_CUDA_TRACE_CHUNK ? t->nlabels : ST_CUDA_TRACE_CHUNK;
    unsigned blocks = (unsigned)((n + ST_RESET_THREADS - 1) / ST_RESET_THREADS);
    reset_kernel<<<blocks, ST_RESET_THREADS, 0, (cudaStream_t)stream>>>(t->rec, t->nlabels, t->dev->done,
                                                                        t->dev->scratch);
    ST_CUDA_LAUNCHED();
    return ST_OK;
}

extern "C" int st_cuda_trace_download(const st_cuda_trace *t, st_trace *host) {
    ST_REQUIRE(t && t->dev && host && host->rec, ST_ERR_INPUT, "tracer download: no tracer");
    ST_REQUIRE(host->labels.n == t->nlabels, ST_ERR_INPUT,
               "tracer download: the host tracer has %d labels, the device %d", host->labels.n, t->nlabels);
    int64_t seq = 0;
    int done = 0;
    ST_CUDA_TRY(cudaDeviceSynchronize());
    ST_CUDA_TRY(cudaMemcpy(host->rec, t->rec, sizeof(st_trace_record) * (size_t)t->nlabels, cudaMemcpyDeviceToHost));
    ST_CUDA_TRY(cudaMemcpy(&seq, t->seq, sizeof seq, cudaMemcpyDeviceToHost));
    ST_CUDA_TRY(cudaMemcpy(&done, t->dev->done, sizeof done, cudaMemcpyDeviceToHost));
    int ntrip = 0;
    for (int i = 0; i < t->nlabels; i++)
        ntrip += host->rec[i].index >= 0;
    host->seq = seq;
    host->ntrip = ntrip;
    host->inject.done = done;
    return ST_OK;
}
