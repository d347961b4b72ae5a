/* safetensors.c: the safetensors writer (atomic) and reader of safetensors.h. */
#include "core/safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"

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

static int write_all(int fd, const void *p, size_t n, const char *path) {
    const char *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return ST_FAIL(ST_ERR_IO, "writing %s: %s", path, strerror(errno));
        c += w;
        n -= (size_t)w;
    }
    return ST_OK;
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
    rc = write_all(fd, len8, 8, tmp);
    if (rc == ST_OK) rc = write_all(fd, hdr, hlen, tmp);
    for (size_t i = hlen; rc == ST_OK && i < padded; i++) rc = write_all(fd, " ", 1, tmp);
    for (int i = 0; rc == ST_OK && i < n; i++) rc = write_all(fd, t[i].data, tensor_bytes(&t[i]), tmp);
    if (rc == ST_OK && fsync(fd) != 0) rc = ST_FAIL(ST_ERR_IO, "fsync %s: %s", tmp, strerror(errno));
    if (close(fd) != 0 && rc == ST_OK) rc = ST_FAIL(ST_ERR_IO, "closing %s: %s", tmp, strerror(errno));
    if (rc == ST_OK && rename(tmp, path) != 0)
        rc = ST_FAIL(ST_ERR_IO, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
    if (rc != ST_OK) unlink(tmp);
out:
    free(tmp);
    free(hdr);
    return rc;
}

int st_safetensors_open(const char *path, st_safetensors *f) {
    memset(f, 0, sizeof *f);
    FILE *fp = fopen(path, "rb");
    ST_REQUIRE(fp, ST_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    fseek(fp, 0, SEEK_END);
    long sz = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    if (sz < 8) {
        fclose(fp);
        return ST_FAIL(ST_ERR_INPUT, "%s: %ld bytes is too short for a safetensors file", path, sz);
    }
    f->blob = malloc((size_t)sz);
    if (!f->blob || fread(f->blob, 1, (size_t)sz, fp) != (size_t)sz) {
        fclose(fp);
        st_safetensors_close(f);
        return ST_FAIL(ST_ERR_IO, "cannot read %s", path);
    }
    fclose(fp);
    f->size = (size_t)sz;
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++) hlen |= (uint64_t)f->blob[i] << (8 * i);
    if (hlen > f->size - 8) {
        st_safetensors_close(f);
        return ST_FAIL(ST_ERR_INPUT, "%s is not a safetensors file: its header length %llu exceeds the file size", path, (unsigned long long)hlen);
    }
    f->json = cJSON_ParseWithLength((const char *)f->blob + 8, (size_t)hlen);
    if (!f->json || !cJSON_IsObject((cJSON *)f->json)) {
        st_safetensors_close(f);
        return ST_FAIL(ST_ERR_INPUT, "%s is not a safetensors file: its header is not a JSON object", path);
    }
    f->data_start = 8 + (size_t)hlen;
    f->path = strdup(path);
    return ST_OK;
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
    cJSON *e = cJSON_GetObjectItemCaseSensitive((cJSON *)f->json, name);
    ST_REQUIRE(e, ST_ERR_INPUT, "%s: no tensor named '%s'", path, name);
    cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
    cJSON *of = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    ST_REQUIRE(cJSON_IsString(dt) && cJSON_IsArray(sh) && cJSON_IsArray(of) && cJSON_GetArraySize(of) == 2,
               ST_ERR_INPUT, "%s: tensor '%s' has a malformed header entry", path, name);
    int k = -1;
    for (int i = 0; i < 5; i++)
        if (strcmp(dt->valuestring, dtype_names[i]) == 0) k = i;
    ST_REQUIRE(k >= 0, ST_ERR_INPUT, "%s: tensor '%s' has unsupported dtype %s", path, name, dt->valuestring);
    int nd = cJSON_GetArraySize(sh);
    ST_REQUIRE(nd <= 4, ST_ERR_INPUT, "%s: tensor '%s' has %d dimensions (at most 4 supported)", path, name, nd);
    size_t count = 1;
    for (int d = 0; d < nd; d++) {
        double v = cJSON_GetArrayItem(sh, d)->valuedouble;
        ST_REQUIRE(v >= 0, ST_ERR_INPUT, "%s: tensor '%s' has a negative dimension", path, name);
        shape[d] = (int64_t)v;
        count *= (size_t)v;
    }
    double b0 = cJSON_GetArrayItem(of, 0)->valuedouble, b1 = cJSON_GetArrayItem(of, 1)->valuedouble;
    ST_REQUIRE(b0 >= 0 && b1 >= b0 && f->data_start + (size_t)b1 <= f->size, ST_ERR_INPUT,
               "%s: tensor '%s' has data offsets [%.0f, %.0f] outside the file", path, name, b0, b1);
    ST_REQUIRE((size_t)(b1 - b0) == count * st_dtype_size((st_dtype)k), ST_ERR_INPUT,
               "%s: tensor '%s' has %.0f bytes for its shape's %zu elements", path, name, b1 - b0, count);
    *dtype = (st_dtype)k;
    *ndim = nd;
    *data = f->blob + f->data_start + (size_t)b0;
    *bytes = (size_t)(b1 - b0);
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
        char got[64] = "", want[64] = "";
        for (int d = 0; d < nd; d++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", d ? "," : "", (long long)sh[d]);
        for (int d = 0; d < ndim; d++)
            snprintf(want + strlen(want), sizeof want - strlen(want), "%s%lld", d ? "," : "", (long long)shape[d]);
        return ST_FAIL(ST_ERR_INPUT, "%s: tensor '%s' has shape [%s], expected [%s]", path, name, got, want);
    }
    memcpy(out, data, bytes);
    return ST_OK;
}
