/* test_disk_cache.c — base/disk_cache.c: entries written and read back, every damaged,
 * truncated, foreign or misnamed file a miss, the directory's choice (given, the
 * environment's, off), trimming by last use, and the build ID it keys generated code on. */
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/build_id.h"
#include "base/disk_cache.h"
#include "check.h"
#include "test_files.h"

static void key_of(const char *text, char key[SHA256_HEX]) { sha256_of(text, strlen(text), key); }

static bool get_equals(const DiskCache *c, const char *key, const void *want, size_t n)
{
    void *data = NULL;
    size_t got = 0;
    bool hit = disk_cache_get(c, key, &data, &got);
    bool same = hit && got == n && memcmp(data, want, n) == 0;
    free(data);
    return same;
}

static void test_round_trip_and_damage(const char *dir)
{
    DiskCache c;
    CHECK(disk_cache_open(&c, dir, "unused", "o"));
    char key[SHA256_HEX], other[SHA256_HEX], path[600];
    key_of("one", key);
    key_of("two", other);
    unsigned char data[1000];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (unsigned char)(i * 7 + 3);
    void *got = NULL;
    size_t n = 0;
    CHECK(!disk_cache_get(&c, key, &got, &n)); /* empty */
    disk_cache_put(&c, key, data, sizeof data);
    CHECK(get_equals(&c, key, data, sizeof data));
    CHECK(!disk_cache_get(&c, other, &got, &n));
    disk_cache_put(&c, other, "", 0); /* an empty entry is an entry */
    CHECK(get_equals(&c, other, "", 0));

    snprintf(path, sizeof path, "%.500s/%s.o", dir, key);
    size_t size = 0;
    char *file = read_whole(path, &size);
    CHECK(file && size > sizeof data);
    for (size_t at = 0; file && at < size; at += size / 37 + 1) { /* any byte flipped */
        file[at] ^= 0x20;
        CHECK(write_whole(path, file, size));
        file[at] ^= 0x20;
        if (get_equals(&c, key, data, sizeof data))
            fprintf(stderr, "byte %zu flipped, still a hit\n", at), check_failures++;
    }
    for (size_t cut = 0; file && cut < size; cut += size / 13 + 1) { /* truncated */
        CHECK(write_whole(path, file, cut));
        CHECK(!disk_cache_get(&c, key, &got, &n));
    }
    if (file) { /* one byte more */
        CHECK(write_whole(path, file, size));
        FILE *f = fopen(path, "ab");
        fputc('x', f);
        fclose(f);
        CHECK(!disk_cache_get(&c, key, &got, &n));
    }
    /* another key's entry under this key's name */
    char other_path[600];
    snprintf(other_path, sizeof other_path, "%.500s/%s.o", dir, other);
    CHECK(rename(other_path, path) == 0);
    CHECK(!disk_cache_get(&c, key, &got, &n));
    disk_cache_put(&c, key, data, sizeof data); /* a miss is rewritten whole */
    CHECK(get_equals(&c, key, data, sizeof data));
    free(file);
}

static void test_directories(const char *dir)
{
    DiskCache c;
    CHECK(!disk_cache_open(&c, "", "cpu", "o")); /* off */
    char key[SHA256_HEX];
    key_of("k", key);
    void *got = NULL;
    size_t n = 0;
    disk_cache_put(&c, key, "x", 1);
    CHECK(!disk_cache_get(&c, key, &got, &n));

    char want[600];
    setenv("COIL_CACHE_DIR", dir, 1);
    CHECK(disk_cache_open(&c, NULL, "sub/deeper", "cubin")); /* made, parents too */
    snprintf(want, sizeof want, "%.500s/sub/deeper", dir);
    CHECK_STR(c.dir, want);
    struct stat st;
    CHECK(stat(want, &st) == 0 && S_ISDIR(st.st_mode));
    unsetenv("COIL_CACHE_DIR");
    setenv("XDG_CACHE_HOME", dir, 1);
    CHECK(disk_cache_open(&c, NULL, "cpu", "o"));
    snprintf(want, sizeof want, "%.500s/coil/cpu", dir);
    CHECK_STR(c.dir, want);
    unsetenv("XDG_CACHE_HOME");
    /* a file where the directory should be: off, not an error */
    snprintf(want, sizeof want, "%.500s/afile", dir);
    CHECK(write_whole(want, "x", 1));
    CHECK(!disk_cache_open(&c, want, "cpu", "o"));
    setenv("COIL_CODE_CACHE", "0", 1); /* off, whatever the directory */
    CHECK(!disk_cache_open(&c, dir, "cpu", "o"));
    unsetenv("COIL_CODE_CACHE");
}

/* Four entries of 1000 bytes and more, used in a known order: trimming keeps the most
 * recently used (a get counts as a use) and ignores files that are not entries. */
static void test_trim(const char *dir)
{
    DiskCache c;
    CHECK(disk_cache_open(&c, dir, "x", "o"));
    char keys[4][SHA256_HEX], name[8], path[600];
    char data[1000] = {0};
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "t%d", i);
        key_of(name, keys[i]);
        disk_cache_put(&c, keys[i], data, sizeof data);
        /* the file system's clock may be coarse: set each use's time apart */
        snprintf(path, sizeof path, "%.500s/%.64s.o", dir, keys[i]);
        struct timespec t[2] = {{1000000 + i, 0}, {1000000 + i, 0}};
        CHECK(utimensat(AT_FDCWD, path, t, 0) == 0);
    }
    void *got = NULL;
    size_t n = 0;
    CHECK(disk_cache_get(&c, keys[0], &got, &n)); /* the oldest, used now */
    free(got);
    snprintf(path, sizeof path, "%.500s/not-an-entry.o", dir);
    CHECK(write_whole(path, data, sizeof data));
    CHECK(disk_cache_trim(&c, 1 << 20) == 0); /* under the limit: nothing */
    CHECK(disk_cache_trim(&c, 2500) == 2);    /* keeps two: 0 (used now) and 3 */
    CHECK(get_equals(&c, keys[0], data, sizeof data));
    CHECK(get_equals(&c, keys[3], data, sizeof data));
    CHECK(!disk_cache_get(&c, keys[1], &got, &n) && !disk_cache_get(&c, keys[2], &got, &n));
    CHECK(access(path, F_OK) == 0);
}

int main(void)
{
    char dir[] = "/tmp/coil-disk-cache-XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    char sub[3][600];
    for (int i = 0; i < 3; i++) {
        snprintf(sub[i], sizeof sub[i], "%s/%d", dir, i);
        mkdir(sub[i], 0777);
    }
    test_round_trip_and_damage(sub[0]);
    test_directories(sub[1]);
    test_trim(sub[2]);
    const char *id = build_id();
    CHECK(id && strlen(id) >= 16 && strspn(id, "0123456789abcdef") == strlen(id));
    printf("build ID %s\n", id ? id : "(none)");
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    return check_status();
}
