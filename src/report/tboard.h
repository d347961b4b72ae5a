/* tboard.h: TensorBoard event files written by hand (DESIGN section 10).
 *
 * A run directory gets one file events.out.tfevents.<unix time>.<host>.ssmtrade
 * that TensorBoard reads as scalar time series. The file is a sequence of
 * TFRecords (little-endian u64 length, masked CRC32C of those 8 bytes, the
 * payload, masked CRC32C of the payload); each payload is a serialised
 * tensorflow.Event protobuf. The first event carries file_version
 * "brain.Event:2"; each later one carries one scalar summary. No protobuf
 * library is needed: the few fields used are encoded in tboard.c. */
#ifndef ST_TBOARD_H
#define ST_TBOARD_H

#include <stddef.h>
#include <stdint.h>

typedef struct st_tboard st_tboard;

/* Creates dir (and its parents) when missing, creates the event file in it
 * and writes the file_version event. On success *out owns the open file. */
int st_tboard_open(const char *dir, st_tboard **out);
/* Appends one scalar summary event: wall_time now, step, tag, value (stored
 * as a float, as TensorBoard's simple_value is). */
int st_tboard_scalar(st_tboard *tb, const char *tag, long step, double value);
/* Pushes buffered events to the file so a running TensorBoard sees them. */
int st_tboard_flush(st_tboard *tb);
/* Flushes, closes and frees; NULL is a no-op. */
void st_tboard_close(st_tboard *tb);
/* The event file's path (valid until close). */
const char *st_tboard_path(const st_tboard *tb);

/* CRC32C (Castagnoli, reflected polynomial 0x82F63B78) of n bytes, and the
 * TFRecord mask of a CRC; exposed for tests and readers. */
uint32_t st_crc32c(const void *data, size_t n);
uint32_t st_crc32c_mask(uint32_t crc);

#endif
