/* file.c: see file.h. */
#define _POSIX_C_SOURCE 200809L /* fsync, O_DIRECTORY */
#include "core/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"

char *st_read_all(FILE *f, size_t *len) {
    *len = 0;
    long at = ftell(f);
    if (at < 0 || fseek(f, 0, SEEK_END) != 0) return NULL;
    long end = ftell(f);
    if (end < at || fseek(f, at, SEEK_SET) != 0) return NULL;
    size_t n = (size_t)(end - at);
    char *buf = malloc(n + 1);
    if (!buf) return NULL;
    if (fread(buf, 1, n, f) != n) {
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    *len = n;
    return buf;
}

int st_write_all(int fd, const void *p, size_t n, const char *path) {
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

int st_fsync_dir(const char *path) {
    const char *slash = strrchr(path, '/');
    char dir[4096];
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == path) snprintf(dir, sizeof dir, "/");
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    ST_REQUIRE(fd >= 0, ST_ERR_IO, "cannot open the folder %s to fsync it: %s", dir, strerror(errno));
    int rc = ST_OK;
    if (fsync(fd) != 0 && errno != EINVAL) rc = ST_FAIL(ST_ERR_IO, "fsync of the folder %s: %s", dir, strerror(errno));
    close(fd);
    return rc;
}

int st_write_file_atomic(const char *path, const void *p, size_t n) {
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 32);
    ST_REQUIRE(tmp, ST_ERR_MEMORY, "out of memory");
    snprintf(tmp, plen + 32, "%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int rc = fd >= 0 ? ST_OK : ST_FAIL(ST_ERR_IO, "cannot create %s: %s", tmp, strerror(errno));
    if (rc == ST_OK) rc = st_write_all(fd, p, n, tmp);
    if (rc == ST_OK && fsync(fd) != 0) rc = ST_FAIL(ST_ERR_IO, "fsync %s: %s", tmp, strerror(errno));
    if (fd >= 0 && close(fd) != 0 && rc == ST_OK) rc = ST_FAIL(ST_ERR_IO, "closing %s: %s", tmp, strerror(errno));
    if (rc == ST_OK && rename(tmp, path) != 0)
        rc = ST_FAIL(ST_ERR_IO, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
    if (rc != ST_OK && fd >= 0) unlink(tmp);
    if (rc == ST_OK) rc = st_fsync_dir(path);
    free(tmp);
    return rc;
}
