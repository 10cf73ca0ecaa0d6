/* fileio.c — atomic file writes and directory locks (fileio.h): what a reader finds under
 * a name is always a whole file some writer finished, and two writers never share a
 * directory. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/fileio.h"

#define TEMP_TRIES 100

/* ---------------------------------------------------------------- atomic writes */

bool atomic_open(AtomicFile *af, const char *path, Err *e)
{
    memset(af, 0, sizeof *af);
    if (strlen(path) >= sizeof af->path) {
        err_set(e, ERR_INPUT, "%.200s...: path too long", path);
        return false;
    }
    snprintf(af->path, sizeof af->path, "%s", path);
    /* O_EXCL on a name no other writer uses (the pid, then a clock-seeded suffix) rather
     * than mkstemp, whose 0600 would ignore the umask every other file gets */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint32_t suffix = (uint32_t)ts.tv_nsec ^ (uint32_t)(uintptr_t)af;
    int fd = -1;
    for (int i = 0; fd < 0 && i < TEMP_TRIES; i++) {
        snprintf(af->tmp, sizeof af->tmp, "%s.tmp.%ld.%08x", path, (long)getpid(), suffix + (uint32_t)i);
        fd = open(af->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    af->f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!af->f) {
        err_set(e, ERR_IO, "%s: cannot write: %s", path, strerror(errno));
        if (fd >= 0) {
            close(fd);
            unlink(af->tmp);
        }
        return false;
    }
    return true;
}

/* The directory's entry for the rename on disk too; best effort: some file systems refuse
 * fsync on a directory, and the file itself is already durable. */
static void sync_parent(const char *path)
{
    char dir[FILEIO_PATH];
    const char *slash = strrchr(path, '/');
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) + (slash == path) : 1,
             slash ? path : ".");
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

bool atomic_close(AtomicFile *af, bool written, Err *e)
{
    int err = errno; /* the caller's failed write, when !written */
    bool ok = written && !ferror(af->f);
    if (ok && (fflush(af->f) != 0 || fsync(fileno(af->f)) != 0))
        ok = false, err = errno;
    if (fclose(af->f) != 0 && ok)
        ok = false, err = errno;
    af->f = NULL;
    if (ok && rename(af->tmp, af->path) != 0)
        ok = false, err = errno;
    if (!ok) {
        unlink(af->tmp);
        err_set(e, ERR_IO, "%s: cannot write: %s (nothing was written: the file, if it "
                "existed, is as it was)", af->path, strerror(err ? err : EIO));
        return false;
    }
    sync_parent(af->path);
    return true;
}

bool file_write_atomic(const char *path, const void *data, size_t n, Err *e)
{
    AtomicFile af;
    if (!atomic_open(&af, path, e))
        return false;
    bool written = n == 0 || fwrite(data, 1, n, af.f) == n;
    return atomic_close(&af, written, e);
}

bool atomic_is_temporary(const char *name, const char *file)
{
    size_t n = strlen(file);
    return strncmp(name, file, n) == 0 && strncmp(name + n, ".tmp", 4) == 0;
}

bool atomic_sweep(const char *dir, const char *file, int *removed, Err *e)
{
    *removed = 0;
    DIR *d = opendir(dir);
    if (!d) {
        err_set(e, ERR_INPUT, "%s: cannot list the directory: %s", dir, strerror(errno));
        return false;
    }
    for (struct dirent *en; (en = readdir(d)) != NULL;)
        if (atomic_is_temporary(en->d_name, file) && unlinkat(dirfd(d), en->d_name, 0) == 0)
            ++*removed;
    closedir(d);
    return true;
}

/* ---------------------------------------------------------------- directory locks */

bool make_dir(const char *dir, const char *what, Err *e)
{
    struct stat st;
    if (mkdir(dir, 0777) == 0 || (errno == EEXIST && stat(dir, &st) == 0 && S_ISDIR(st.st_mode)))
        return true;
    err_set(e, ERR_IO, "%s: cannot create the %s directory: %s", dir, what,
            errno == EEXIST ? "a file is in the way" : strerror(errno));
    return false;
}

bool make_dirs(const char *dir, const char *what, Err *e)
{
    char path[FILEIO_PATH];
    snprintf(path, sizeof path, "%s", dir);
    for (char *s = strchr(path + 1, '/'); s; s = strchr(s + 1, '/')) {
        *s = 0;
        bool ok = make_dir(path, what, e);
        *s = '/';
        if (!ok)
            return false;
    }
    return make_dir(path, what, e);
}

/* What the lock file says about its holder ("pid 12, started ..."), one line. */
static void read_holder(int fd, char *buf, size_t n)
{
    ssize_t got = pread(fd, buf, n - 1, 0);
    buf[got > 0 ? got : 0] = 0;
    buf[strcspn(buf, "\n")] = 0;
    if (!buf[0])
        snprintf(buf, n, "its PID not yet written");
}

static void write_holder(int fd)
{
    char when[64], line[128];
    time_t now = time(NULL);
    struct tm tm;
    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", gmtime_r(&now, &tm));
    int n = snprintf(line, sizeof line, "pid %ld, started %s\n", (long)getpid(), when);
    if (ftruncate(fd, 0) != 0 || pwrite(fd, line, (size_t)n, 0) != n)
        return; /* the lock holds without it; a waiter's message then lacks the PID */
}

bool dir_lock(DirLock *l, const char *dir, const char *name, const char *what, Err *e)
{
    char path[FILEIO_PATH];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    /* the lock file stays when released: removing it would let a waiter lock an inode
     * nobody else opens */
    l->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (l->fd < 0) {
        err_set(e, ERR_INPUT, "%s: cannot open the lock file: %s", path, strerror(errno));
        return false;
    }
    int r;
    while ((r = flock(l->fd, LOCK_EX | LOCK_NB)) != 0 && errno == EINTR)
        ;
    if (r != 0) {
        int err = errno;
        char holder[256];
        read_holder(l->fd, holder, sizeof holder);
        if (err == EWOULDBLOCK)
            err_set(e, ERR_INPUT, "%s is in use: another process is writing %s there (%s; lock "
                    "file %s): wait for it to finish, or use another directory", dir, what,
                    holder, path);
        else
            err_set(e, ERR_INPUT, "%s: cannot lock: %s", path, strerror(err));
        dir_unlock(l);
        return false;
    }
    write_holder(l->fd);
    return true;
}

void dir_unlock(DirLock *l)
{
    if (l->fd >= 0)
        close(l->fd); /* releases the flock */
    l->fd = -1;
}
