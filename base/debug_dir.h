/* debug_dir.h — COIL_DEBUG_DIR=DIR: every stage of a compile written as a numbered file,
 * DIR/NNN-<graph>/NN-<stage>.<ext>, so a user can read what each stage made, in order. */
#ifndef COIL_IR_DEBUG_DIR_H
#define COIL_IR_DEBUG_DIR_H

#include <stdio.h>

#include "base/base.h"

/* One compile's directory: DIR/NNN-<graph>/, NNN one more than the highest number DIR
 * holds (so the forward and backward graphs of training, or bench's two compiles, each get
 * their own, and a second process adds to DIR instead of overwriting it). */
typedef struct DebugDir DebugDir;

/* The compile's directory when COIL_DEBUG_DIR names one, else NULL: unset, that is one
 * getenv. A directory that cannot be made warns (once per process) and gives NULL: a
 * debug write never fails a compile. Every function below takes NULL and does nothing. */
DebugDir *debug_dir_open(const char *graph_name);
void debug_dir_close(DebugDir *d);
/* The directory's path ("DIR/001-Tiny"), for messages. */
const char *debug_dir_path(const DebugDir *d);

/* text as the next file, NN-stage.ext, written whole or not at all; takes text (NULL:
 * out of memory, which warns). Returns the file's number (-1: not written). */
int debug_dir_text(DebugDir *d, const char *stage, const char *ext, char *text);

/* A stage written onto a stream (JSON through a JsonWriter): fn's false means it failed. */
typedef bool (*DebugWriteFn)(FILE *f, const void *ctx);
/* The stage as file number `number` (< 0: the next), so a summary can be written again
 * later under its first number (the compile-time breakdown, once tuning has run).
 * Returns the number used (-1: not written). */
int debug_dir_file(DebugDir *d, int number, const char *stage, const char *ext, DebugWriteFn fn,
                   const void *ctx);

/* Seconds spent writing so far, so stage timings can leave them out. */
double debug_dir_seconds(const DebugDir *d);

#endif
