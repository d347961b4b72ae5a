/* file.h: whole-file reads and crash-safe writes, shared by the
 * checkpoint writer (core/safetensors.c), the run folder's text files
 * (config.json, metrics.jsonl: cli/cmd_train.c) and the config reader.
 *
 * A crash-safe write goes to PATH.tmp.PID beside the target, is fsynced,
 * renamed over the target and the folder fsynced: at any moment PATH is
 * the old file or the new one, whole (a killed writer leaves at most its
 * temp file). */
#ifndef ST_FILE_H
#define ST_FILE_H

#include <stddef.h>
#include <stdio.h>

/* The rest of f (from its current position to the end) in a malloc'd
 * buffer with a NUL after it, its byte count in *len; NULL when it cannot
 * be read or there is no memory (the caller names the file). f stays open. */
char *st_read_all(FILE *f, size_t *len);

/* Writes n bytes of p to fd, retrying short writes and EINTR;
 * ST_ERR_IO naming path otherwise. */
int st_write_all(int fd, const void *p, size_t n, const char *path);

/* fsync of the folder that holds path, so that a rename into it survives
 * a power loss; filesystems that cannot fsync a folder (EINVAL) are let be. */
int st_fsync_dir(const char *path);

/* n bytes of p to path, crash-safe as above. */
int st_write_file_atomic(const char *path, const void *p, size_t n);

#endif
