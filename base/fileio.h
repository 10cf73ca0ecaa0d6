/* fileio.h — files written whole or not at all (a temporary beside the file, fsynced,
 * renamed over it, the directory fsynced), and directories one writer at a time (an
 * advisory lock whose file names its holder). Packages, checkpoints and .npy outputs. */
#ifndef COIL_RUNTIME_FILEIO_H
#define COIL_RUNTIME_FILEIO_H

#include <stdio.h>

#include "base/base.h"

#define FILEIO_PATH 4096

/* A file being written: everything goes to `tmp`, which becomes `path` only whole. */
typedef struct AtomicFile {
    FILE *f;                  /* write here */
    char path[FILEIO_PATH];   /* the name it gets */
    char tmp[FILEIO_PATH + 64]; /* path + ".tmp." + the writer's pid and a unique suffix */
} AtomicFile;

/* A temporary beside path (mode 0666 less the umask, as for any file) open for writing. */
bool atomic_open(AtomicFile *af, const char *path, Err *e);
/* Finish: when `written` (the caller's writes all succeeded) the temporary is flushed,
 * fsynced and renamed over path and the directory fsynced; otherwise, or when any of that
 * fails, the temporary is removed and e names path and the cause (disk full, ...). */
bool atomic_close(AtomicFile *af, bool written, Err *e);
/* data[0..n) as path, whole or not at all. */
bool file_write_atomic(const char *path, const void *data, size_t n, Err *e);
/* Whether `name` (a directory entry) is a temporary atomic_open made for `file`. */
bool atomic_is_temporary(const char *name, const char *file);
/* Remove the temporaries of `file` in dir that a killed writer left; only call this when
 * no writer can be live (holding dir's DirLock). *removed counts them. */
bool atomic_sweep(const char *dir, const char *file, int *removed, Err *e);

/* An exclusive lock on a directory, held until dir_unlock or the process ends (a killed
 * holder's lock is released by the kernel, so a stale lock cannot exist). */
typedef struct DirLock {
    int fd;                   /* -1: not held */
} DirLock;

/* Lock dir (through its file `name`, created when missing) at once or fail: e then names
 * the holder, its PID and start time, which each holder writes into the lock file;
 * `what` says what the lock protects, for that message ("checkpoints"). */
bool dir_lock(DirLock *l, const char *dir, const char *name, const char *what, Err *e);
void dir_unlock(DirLock *l);
/* mkdir that accepts an existing directory; errors name dir and what it is for. */
bool make_dir(const char *dir, const char *what, Err *e);
/* The same for dir and every missing directory above it (mkdir -p). */
bool make_dirs(const char *dir, const char *what, Err *e);

#endif
