/* fuzz_files.h — what the harnesses of file readers share: a private temporary directory
 * (removed at exit) to write the input's bytes into, the repository's root (examples/),
 * seed files written where run.sh asks ($COIL_FUZZ_SEED_DIR, for formats whose seeds
 * coil itself must write), and stderr silenced around a call that warns by design. */
#ifndef COIL_FUZZ_FILES_H
#define COIL_FUZZ_FILES_H

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sanitizer/common_interface_defs.h>

#ifndef COIL_SOURCE_DIR
#define COIL_SOURCE_DIR "."
#endif

static char fuzz_dir_path[256];

static inline void fuzz_dir_remove(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", fuzz_dir_path);
    if (fuzz_dir_path[0] && system(cmd) != 0)
        fprintf(stderr, "fuzz: could not remove %s\n", fuzz_dir_path);
}

/* The harness's own directory, made on first use: in $TMPDIR, else /dev/shm when there is
 * one (a memory file system: a write, or train.c's fsync, costs no disk), else /tmp. */
static inline const char *fuzz_dir(void)
{
    if (!fuzz_dir_path[0]) {
        const char *tmp = getenv("TMPDIR");
        if (!tmp || !*tmp)
            tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(fuzz_dir_path, sizeof fuzz_dir_path, "%s/coil-fuzz-XXXXXX", tmp);
        if (!mkdtemp(fuzz_dir_path)) {
            perror("fuzz: mkdtemp");
            abort();
        }
        atexit(fuzz_dir_remove);
    }
    return fuzz_dir_path;
}

/* dir/name as a path (a static buffer per call site is the caller's job: this one is
 * overwritten by the next call). */
static inline const char *fuzz_path(const char *name)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", fuzz_dir(), name);
    return path;
}

/* Write bytes to a path; a failure to write is the machine's problem: abort loudly. */
static inline void fuzz_write(const char *path, const void *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) {
        perror(path);
        abort();
    }
}

/* The whole of a file, malloc'd and NUL-terminated (NULL when unreadable); *size its length. */
static inline uint8_t *fuzz_read(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf = NULL;
    long n = -1;
    if (f && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (buf = malloc((size_t)n + 1)) && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    if (f)
        fclose(f);
    if (buf)
        buf[n] = 0; /* a NUL after the bytes: text files can be read as strings */
    *size = buf ? (size_t)n : 0;
    return buf;
}

/* A seed for the corpus: `prefix` bytes then `data`, as $COIL_FUZZ_SEED_DIR/name, when
 * run.sh asks for them (LLVMFuzzerInitialize runs before libFuzzer reads the corpus). */
static inline void fuzz_seed(const char *name, const void *prefix, size_t nprefix,
                             const void *data, size_t size)
{
    const char *dir = getenv("COIL_FUZZ_SEED_DIR");
    char path[512];
    if (!dir || !*dir)
        return;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    uint8_t *buf = malloc(nprefix + size + 1);
    if (!buf)
        abort();
    if (nprefix)
        memcpy(buf, prefix, nprefix);
    if (size)
        memcpy(buf + nprefix, data, size);
    fuzz_write(path, buf, nprefix + size);
    free(buf);
}

/* stderr to /dev/null until fuzz_stderr_restore, for a call that warns by design (once per
 * execution would drown libFuzzer's own lines). Sanitizer reports keep the real stderr. */
static int fuzz_stderr_saved = -1;

static inline void fuzz_stderr_quiet(void)
{
    static int report_fd = -1;
    if (report_fd < 0) {
        report_fd = dup(2);
        __sanitizer_set_report_fd((void *)(intptr_t)report_fd);
    }
    fflush(stderr);
    fuzz_stderr_saved = dup(2);
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) {
        dup2(null, 2);
        close(null);
    }
}

static inline void fuzz_stderr_restore(void)
{
    fflush(stderr);
    if (fuzz_stderr_saved >= 0) {
        dup2(fuzz_stderr_saved, 2);
        close(fuzz_stderr_saved);
        fuzz_stderr_saved = -1;
    }
}

#endif
