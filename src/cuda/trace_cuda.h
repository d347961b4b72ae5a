/* trace_cuda.h: the NaN/Inf tracer's scans on the GPU (DESIGN section 8),
 * the device twin of trace/scan.c: same labels, same records, no host
 * synchronisation, capturable inside CUDA graphs. Kernels: trace/scan.cu.
 *
 * A device tracer mirrors a host st_trace (its label table, scanning mode,
 * run, seq and injection, read at init): the records live in device
 * memory, one st_trace_record per label, and st_cuda_trace_download copies
 * them into the host tracer's rec[] so that the host's report, ordering
 * and status code work unchanged. Semantics per scan of label id over the
 * logical [rows, width] part of a buffer (row stride >= width; the gap is
 * never read), exactly those of st_trace_tensor:
 *   - seq advances by one for every scan (a device counter), as the host's
 *     ++tr->seq does, whether or not the label trips or scanning is on;
 *   - an armed injection for this label (host tracer's inject: label, step,
 *     index, kind) fires once per run, when the step read from step_dev
 *     equals inject.step and index < rows * width: the NaN (0x7fc00000,
 *     f64 0x7ff8000000000000, the host's NAN) or +-Inf is written at
 *     (index / width) * stride + index % width before the scan, and the
 *     device "done" flag is set;
 *   - with scanning on, on the label's first trip of the run only (record
 *     index still -1) the record is filled exactly as record_trip does:
 *     index = the first non-finite element's flat index in the logical
 *     layout, coord = index decoded by the label's shape, kind (NaN, +Inf,
 *     -Inf), bits of that value (float bits for f32), count of non-finite
 *     elements in the tensor, step = *step_dev, sub = *sub_dev, seq, run,
 *     f64 (of the item).
 * The tracer does not fill the host's use[] table (no dumps of inputs from
 * the device) and takes no captures.
 * step_dev and sub_dev are DEVICE words owned by the caller (the trainer
 * advances them from its own control kernels or copies between graph
 * replays); they are read when the kernels run, not at the call.
 * Where several threads find bad values the first index is their minimum
 * and the count their sum (64-bit integer atomics: the same result in any
 * order); the record is written by one thread after the scan, walking the
 * items in call order, so the record order is deterministic.
 *
 * A batch of items is scanned by st_cuda_trace_scan with one scan kernel
 * and one finalising kernel per ST_CUDA_TRACE_CHUNK items (not two
 * launches per label), plus a one-thread kernel before the items of an
 * armed injection's label. The items travel by value as kernel parameters
 * (a chunk fits the classic 4 KB parameter limit), so a captured launch is
 * replayed with the same items and no host memory need outlive the call;
 * the per-item scratch (minimum index, count) is device memory allocated
 * at init and reset by the finaliser. Calls are asynchronous on `stream`
 * (cudaStream_t; NULL: default), allocate nothing and never synchronise,
 * so scan and reset can be captured. Calls of one tracer must be ordered
 * (one stream, or streams joined by events): the scratch and the records
 * are shared. Return ST_OK, ST_ERR_INPUT (bad label or shape; nothing is
 * launched then), ST_ERR_MEMORY or ST_ERR_DEVICE. */
#ifndef ST_TRACE_CUDA_H
#define ST_TRACE_CUDA_H

#include <stdint.h>

#include "trace/trace.h"

/* Items per scan/finalise launch pair. */
#define ST_CUDA_TRACE_CHUNK 64

typedef struct {
    int label;                   /* label id (st_labels_*) */
    int f64;                     /* 1: p points at doubles, else floats; must match the label's f64 */
    const void *p;               /* device pointer to element (0, 0) */
    int64_t rows, width, stride; /* rows, width > 0, stride >= width (any shape, as the host's hook) */
} st_cuda_scan_item;

struct st_cuda_trace_dev; /* device-side tables and host-side settings (private) */

typedef struct {
    int nlabels;
    st_trace_record *rec; /* device [nlabels] */
    int64_t *seq;         /* device scan counter */
    const int64_t *step_dev;
    const int32_t *sub_dev;
    int32_t run;
    int inject_label; /* -1: none armed */
    struct st_cuda_trace_dev *dev;
} st_cuda_trace;

/* A device tracer for host tracer `host` (labels, scanning, run, seq and
 * the injection with its done flag are read from it at this call; the
 * host tracer may change or go afterwards); step_dev / sub_dev as above
 * (both required). Records start clean. Synchronous (allocates). */
int st_cuda_trace_init(st_cuda_trace *t, const st_trace *host, const int64_t *step_dev, const int32_t *sub_dev);
/* Frees the device memory (safe on a zeroed or freed tracer). */
void st_cuda_trace_free(st_cuda_trace *t);

/* Scanning on (1: full scans) or off (0: seq and injection only, as the
 * host hook without tr->scanning), for the calls made from now on; a graph
 * keeps what was captured. Initially host->scanning. */
void st_cuda_trace_set_scanning(st_cuda_trace *t, int on);

/* Scans items[0..n) in order (n == 0: nothing). */
int st_cuda_trace_scan(st_cuda_trace *t, int n, const st_cuda_scan_item *items, void *stream);

/* Clean records, injection re-armed (before a replay), as st_trace_reset:
 * seq keeps counting (the host's seq is per run, not per reset). */
int st_cuda_trace_reset(st_cuda_trace *t, void *stream);

/* Records -> host->rec[], host->seq, host->ntrip (tripped labels),
 * host->inject.done. Synchronous: waits for the whole device first
 * (cudaDeviceSynchronize), so not while any stream is being captured.
 * ST_ERR_INPUT when host's label count differs from the tracer's. */
int st_cuda_trace_download(const st_cuda_trace *t, st_trace *host);

#endif
