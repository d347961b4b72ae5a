/* safetensors.c: the safetensors writer (atomic) and reader of safetensors.h.
 * The reader checks the whole header when it opens a file (see "reading"). */
#include "core/safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "core/file.h"

static const char *dtype_names[] = {"F32", "F64", "I32", "I64", "U8"};

size_t st_dtype_size(st_dtype t) {
    switch (t) {
    case ST_DT_F32: case ST_DT_I32: return 4;
    case ST_DT_F64: case ST_DT_I64: return 8;
    case ST_DT_U8: return 1;
    }
    return 0;
}

static size_t tensor_bytes(const st_st_tensor *t) {
    size_t n = st_dtype_size(t->dtype);
    for (int d = 0; d < t->ndim; d++) n *= (size_t)t->shape[d];
    return n;
}

static char *build_header(const st_st_tensor *t, int n, const st_st_meta *meta, int n_meta) {
    cJSON *root = cJSON_CreateObject();
    if (n_meta > 0) {
        cJSON *m = cJSON_AddObjectToObject(root, "__metadata__");
        for (int i = 0; i < n_meta; i++) cJSON_AddStringToObject(m, meta[i].key, meta[i].value);
    }
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        cJSON *e = cJSON_AddObjectToObject(root, t[i].name);
        cJSON_AddStringToObject(e, "dtype", dtype_names[t[i].dtype]);
        cJSON *sh = cJSON_AddArrayToObject(e, "shape");
        for (int d = 0; d < t[i].ndim; d++) cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)t[i].shape[d]));
        size_t b = tensor_bytes(&t[i]);
        cJSON *o = cJSON_AddArrayToObject(e, "data_offsets");
        cJSON_AddItemToArray(o, cJSON_CreateNumber((double)off));
        cJSON_AddItemToArray(o, cJSON_CreateNumber((double)(off + b)));
        off += b;
    }
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}

int st_safetensors_write(const char *path, const st_st_tensor *t, int n, const st_st_meta *meta, int n_meta) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++)
            ST_REQUIRE(strcmp(t[i].name, t[j].name) != 0, ST_ERR_INTERNAL, "%s: tensor name '%s' twice", path,
                       t[i].name);
    char *hdr = build_header(t, n, meta, n_meta);
    ST_REQUIRE(hdr, ST_ERR_MEMORY, "%s: cannot build the safetensors header", path);
    size_t hlen = strlen(hdr), padded = (hlen + 7) & ~(size_t)7;
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 32);
    if (!tmp) {
        free(hdr);
        return ST_FAIL(ST_ERR_MEMORY, "out of memory");
    }
    snprintf(tmp, plen + 32, "%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int rc = ST_OK;
    if (fd < 0) {
        rc = ST_FAIL(ST_ERR_IO, "cannot create %s: %s", tmp, strerror(errno));
        goto out;
    }
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    rc = st_write_all(fd, len8, 8, tmp);
    if (rc == ST_OK) rc = st_write_all(fd, hdr, hlen, tmp);
    for (size_t i = hlen; rc == ST_OK && i < padded; i++) rc = st_write_all(fd, " ", 1, tmp);
    for (int i = 0; rc == ST_OK && i < n; i++) rc = st_write_all(fd, t[i].data, tensor_bytes(&t[i]), tmp);
    if (rc == ST_OK && fsync(fd) != 0) rc = ST_FAIL(ST_ERR_IO, "fsync %s: %s", tmp, strerror(errno));
    if (close(fd) != 0 && rc == ST_OK) rc = ST_FAIL(ST_ERR_IO, "closing %s: %s", tmp, strerror(errno));
    if (rc == ST_OK && rename(tmp, path) != 0)
        rc = ST_FAIL(ST_ERR_IO, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
    if (rc != ST_OK) unlink(tmp);
    if (rc == ST_OK) rc = st_fsync_dir(path);
out:
    free(tmp);
    free(hdr);
    return rc;
}

/* ---- reading -------------------------------------------------------------
 *
 * The header is untrusted input: st_safetensors_open checks every entry
 * before anything reads a byte through it. A tensor entry is an object with
 * a dtype string, a shape of whole numbers and data_offsets [begin, end] of
 * whole numbers with begin <= end <= the size of the data; for a dtype we
 * know, end - begin must be the shape's element count times the dtype's
 * size (computed without overflow: counts never exceed the data's bytes).
 * No two tensors may share a name or a byte of the data, and __metadata__,
 * when present, maps names to strings. Numbers above 2^53 are refused: a
 * double holds no larger whole number exactly, and no file is that large. */

#define MAX_WHOLE 9007199254740992.0 /* 2^53 */

typedef struct {
    const char *name;
    int dtype;          /* st_dtype, or -1 when the name is not one of ours */
    int ndim;           /* entries of the shape (only the first 4 are kept) */
    int64_t shape[4];
    size_t begin, end;  /* byte range inside the data */
} st_entry;

/* A JSON number that is a whole number in [0, 2^53]. */
static int whole_number(const cJSON *v, uint64_t *out) {
    if (!cJSON_IsNumber(v)) return 0;
    double d = v->valuedouble;
    if (!(d >= 0 && d <= MAX_WHOLE) || d != (double)(uint64_t)d) return 0;
    *out = (uint64_t)d;
    return 1;
}

/* Checks the header entry e of tensor `name` against a data section of
 * data_size bytes and fills *x. */
static int parse_entry(const char *path, const cJSON *e, const char *name, size_t data_size, st_entry *x) {
    memset(x, 0, sizeof *x);
    x->name = name;
    x->dtype = -1;
    ST_REQUIRE(cJSON_IsObject(e), ST_ERR_INPUT, "%s: tensor '%s' has a malformed header entry (not an object)", path,
               name);
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *of = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    ST_REQUIRE(cJSON_IsString(dt) && cJSON_IsArray(sh) && cJSON_IsArray(of) && cJSON_GetArraySize(of) == 2,
               ST_ERR_INPUT, "%s: tensor '%s' has a malformed header entry (needs dtype, shape and data_offsets)",
               path, name);
    for (int i = 0; i < 5; i++)
        if (strcmp(dt->valuestring, dtype_names[i]) == 0) x->dtype = i;
    uint64_t b0 = 0, b1 = 0;
    ST_REQUIRE(whole_number(cJSON_GetArrayItem(of, 0), &b0) && whole_number(cJSON_GetArrayItem(of, 1), &b1),
               ST_ERR_INPUT, "%s: tensor '%s' has data offsets that are not whole numbers in [0, 2^53]", path, name);
    ST_REQUIRE(b0 <= b1 && b1 <= data_size, ST_ERR_INPUT,
               "%s: tensor '%s' has data offsets [%llu, %llu] outside the file's %zu bytes of data", path, name,
               (unsigned long long)b0, (unsigned long long)b1, data_size);
    x->begin = (size_t)b0;
    x->end = (size_t)b1;
    /* The element count; past the data's size (over) it cannot match any byte count. */
    uint64_t count = 1;
    int zero = 0, over = 0, d = 0;
    for (const cJSON *v = sh->child; v; v = v->next, d++) {
        uint64_t n = 0;
        ST_REQUIRE(whole_number(v, &n), ST_ERR_INPUT,
                   "%s: tensor '%s' has a shape entry %d that is not a whole number in [0, 2^53]", path, name, d);
        if (d < 4) x->shape[d] = (int64_t)n;
        if (n == 0)
            zero = 1;
        else if (!over && count <= (uint64_t)data_size / n)
            count *= n;
        else
            over = 1;
    }
    x->ndim = d;
    if (zero) count = 0, over = 0;
    if (x->dtype >= 0) {
        uint64_t esize = st_dtype_size((st_dtype)x->dtype);
        ST_REQUIRE(!over && count <= (uint64_t)data_size / esize && count * esize == b1 - b0, ST_ERR_INPUT,
                   "%s: tensor '%s' has %llu bytes of data, not what its %s shape of %s%llu elements needs", path,
                   name, (unsigned long long)(b1 - b0), dtype_names[x->dtype], over ? "more than " : "",
                   (unsigned long long)(over ? data_size : count));
    }
    return ST_OK;
}

static int by_name(const void *a, const void *b) {
    return strcmp(((const st_entry *)a)->name, ((const st_entry *)b)->name);
}

static int by_begin(const void *a, const void *b) {
    const st_entry *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : x->end < y->end ? -1 : x->end > y->end;
}

/* The whole header of f: metadata, every entry, no shared names or bytes. */
static int check_header(const st_safetensors *f) {
    const cJSON *root = f->json;
    size_t data_size = f->size - f->data_start;
    int n = 0;
    for (const cJSON *e = root->child; e; e = e->next) {
        if (strcmp(e->string, "__metadata__") != 0) {
            n++;
            continue;
        }
        ST_REQUIRE(cJSON_IsObject(e), ST_ERR_INPUT, "%s: its __metadata__ is not a JSON object", f->path);
        for (const cJSON *m = e->child; m; m = m->next)
            ST_REQUIRE(cJSON_IsString(m), ST_ERR_INPUT, "%s: metadata '%s' is not a string", f->path, m->string);
    }
    st_entry *x = malloc(sizeof *x * (size_t)(n ? n : 1));
    ST_REQUIRE(x, ST_ERR_MEMORY, "%s: out of memory checking %d header entries", f->path, n);
    int rc = ST_OK, k = 0;
    int metas = 0;
    for (const cJSON *e = root->child; e && rc == ST_OK; e = e->next) {
        if (strcmp(e->string, "__metadata__") == 0) {
            if (++metas > 1) rc = ST_FAIL(ST_ERR_INPUT, "%s: the header has __metadata__ twice", f->path);
            continue;
        }
        rc = parse_entry(f->path, e, e->string, data_size, &x[k++]);
    }
    if (rc == ST_OK) {
        qsort(x, (size_t)n, sizeof *x, by_name);
        for (int i = 1; i < n && rc == ST_OK; i++)
            if (strcmp(x[i - 1].name, x[i].name) == 0)
                rc = ST_FAIL(ST_ERR_INPUT, "%s: the header names tensor '%s' twice", f->path, x[i].name);
    }
    if (rc == ST_OK) {
        qsort(x, (size_t)n, sizeof *x, by_begin);
        const st_entry *last = NULL; /* the entry whose bytes end last so far */
        for (int i = 0; i < n && rc == ST_OK; i++) {
            if (x[i].begin == x[i].end) continue; /* no bytes: shares none */
            if (last && x[i].begin < last->end)
                rc = ST_FAIL(ST_ERR_INPUT, "%s: tensors '%s' [%zu, %zu) and '%s' [%zu, %zu) overlap in the data",
                             f->path, last->name, last->begin, last->end, x[i].name, x[i].begin, x[i].end);
            if (!last || x[i].end > last->end) last = &x[i];
        }
    }
    free(x);
    return rc;
}

int st_safetensors_open(const char *path, st_safetensors *f) {
    memset(f, 0, sizeof *f);
    FILE *fp = fopen(path, "rb");
    ST_REQUIRE(fp, ST_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(fp), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(fp);
        return ST_FAIL(ST_ERR_IO, "%s is not a regular file", path);
    }
    if (sb.st_size < 8) {
        fclose(fp);
        return ST_FAIL(ST_ERR_INPUT, "%s: %lld bytes is too short for a safetensors file", path,
                       (long long)sb.st_size);
    }
    size_t size = (size_t)sb.st_size;
    f->blob = malloc(size);
    if (!f->blob || fread(f->blob, 1, size, fp) != size) {
        fclose(fp);
        st_safetensors_close(f);
        return ST_FAIL(f->blob ? ST_ERR_IO : ST_ERR_MEMORY, "cannot read %s (%zu bytes)", path, size);
    }
    fclose(fp);
    f->size = size;
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++) hlen |= (uint64_t)f->blob[i] << (8 * i);
    if (hlen > f->size - 8) {
        st_safetensors_close(f);
        return ST_FAIL(ST_ERR_INPUT, "%s is not a safetensors file: its header length %llu exceeds the file size", path, (unsigned long long)hlen);
    }
    /* cJSON gets a NUL-terminated copy: no string in the header can run on
     * into the tensor bytes or past the end of the file. */
    char *text = malloc((size_t)hlen + 1);
    if (!text) {
        st_safetensors_close(f);
        return ST_FAIL(ST_ERR_MEMORY, "%s: out of memory for a header of %llu bytes", path, (unsigned long long)hlen);
    }
    memcpy(text, f->blob + 8, (size_t)hlen);
    text[hlen] = '\0';
    const char *end = NULL;
    f->json = cJSON_ParseWithLengthOpts(text, (size_t)hlen, &end, 0);
    int trailing = 0; /* anything but the padding after the JSON object */
    for (const char *c = end; f->json && c && c < text + hlen; c++)
        trailing |= !(*c == ' ' || *c == '\t' || *c == '\n' || *c == '\r' || *c == '\0');
    free(text);
    if (!f->json || !cJSON_IsObject((cJSON *)f->json) || trailing) {
        st_safetensors_close(f);
        return ST_FAIL(ST_ERR_INPUT, "%s is not a safetensors file: %s", path,
                       trailing ? "its header has bytes after the JSON object" : "its header is not a JSON object");
    }
    f->data_start = 8 + (size_t)hlen;
    f->path = strdup(path);
    int rc = f->path ? check_header(f) : ST_FAIL(ST_ERR_MEMORY, "out of memory opening %s", path);
    if (rc != ST_OK) st_safetensors_close(f);
    return rc;
}

void st_safetensors_close(st_safetensors *f) {
    cJSON_Delete((cJSON *)f->json);
    free(f->blob);
    free(f->path);
    memset(f, 0, sizeof *f);
}

const char *st_safetensors_meta(const st_safetensors *f, const char *key) {
    cJSON *m = cJSON_GetObjectItemCaseSensitive((cJSON *)f->json, "__metadata__");
    cJSON *v = m ? cJSON_GetObjectItemCaseSensitive(m, key) : NULL;
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

int st_safetensors_find(const st_safetensors *f, const char *name, st_dtype *dtype, int *ndim, int64_t shape[4],
                        const void **data, size_t *bytes) {
    const char *path = f->path ? f->path : "safetensors";
    cJSON *e = strcmp(name, "__metadata__") != 0 ? cJSON_GetObjectItemCaseSensitive((cJSON *)f->json, name) : NULL;
    ST_REQUIRE(e, ST_ERR_INPUT, "%s: no tensor named '%s'", path, name);
    st_entry x;
    ST_TRY(parse_entry(path, e, name, f->size - f->data_start, &x));
    ST_REQUIRE(x.dtype >= 0, ST_ERR_INPUT, "%s: tensor '%s' has unsupported dtype %s", path, name,
               cJSON_GetObjectItemCaseSensitive(e, "dtype")->valuestring);
    ST_REQUIRE(x.ndim <= 4, ST_ERR_INPUT, "%s: tensor '%s' has %d dimensions (at most 4 supported)", path, name,
               x.ndim);
    *dtype = (st_dtype)x.dtype;
    *ndim = x.ndim;
    for (int d = 0; d < x.ndim; d++) shape[d] = x.shape[d];
    *data = f->blob + f->data_start + x.begin;
    *bytes = x.end - x.begin;
    return ST_OK;
}

int st_safetensors_read(const st_safetensors *f, const char *name, st_dtype dtype, int ndim, const int64_t *shape,
                        void *out) {
    st_dtype dt;
    int nd;
    int64_t sh[4];
    const void *data;
    size_t bytes;
    ST_TRY(st_safetensors_find(f, name, &dt, &nd, sh, &data, &bytes));
    const char *path = f->path ? f->path : "safetensors";
    ST_REQUIRE(dt == dtype, ST_ERR_INPUT, "%s: tensor '%s' is %s, expected %s", path, name, dtype_names[dt],
               dtype_names[dtype]);
    int same = nd == ndim;
    for (int d = 0; same && d < nd; d++) same = sh[d] == shape[d];
    if (!same) {
        char got[96] = "", want[96] = "";
        for (int d = 0; d < nd; d++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", d ? "," : "", (long long)sh[d]);
        for (int d = 0; d < ndim; d++)
            snprintf(want + strlen(want), sizeof want - strlen(want), "%s%lld", d ? "," : "", (long long)shape[d]);
        return ST_FAIL(ST_ERR_INPUT, "%s: tensor '%s' has shape [%s], expected [%s]", path, name, got, want);
    }
    memcpy(out, data, bytes);
    return ST_OK;
}
