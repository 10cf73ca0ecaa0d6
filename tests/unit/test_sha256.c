/* test_sha256.c — base/sha256.c against the test vectors of FIPS 180-2 (appendix B:
 * "abc", the 448-bit message, a million 'a'), the empty message, every length around the
 * padding's block boundaries against coreutils' sha256sum, and streaming in pieces. */
#include <stdlib.h>
#include <unistd.h>

#include "base/sha256.h"
#include "check.h"

static void test_fips_vectors(void)
{
    char hex[SHA256_HEX];
    sha256_of("abc", 3, hex);
    CHECK_STR(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    sha256_of(two, strlen(two), hex);
    CHECK_STR(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    Sha256 s;
    sha256_init(&s);
    char a[1000];
    memset(a, 'a', sizeof a);
    for (int i = 0; i < 1000; i++)
        sha256_update(&s, a, sizeof a);
    sha256_hex(&s, hex);
    CHECK_STR(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    sha256_of("", 0, hex);
    CHECK_STR(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

/* Bytes i * 7 + 3: no run of equal bytes hides a wrong offset. */
static void fill(unsigned char *buf, size_t n)
{
    for (size_t i = 0; i < n; i++)
        buf[i] = (unsigned char)(i * 7 + 3);
}

/* Lengths where the padding changes shape (55, 56, 63, 64, 119, 120, ...), against an
 * independent implementation: sha256sum, through sha256_file. */
static void test_boundaries(void)
{
    char dir[] = "/tmp/coil-sha256-XXXXXX", path[64], cmd[160], want[SHA256_HEX], got[SHA256_HEX];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/m", dir);
    static const size_t lengths[] = {1, 55, 56, 57, 63, 64, 65, 119, 120, 127, 128, 129, 1000};
    unsigned char buf[1000];
    fill(buf, sizeof buf);
    for (size_t k = 0; k < sizeof lengths / sizeof *lengths; k++) {
        FILE *f = fopen(path, "wb");
        CHECK(f && fwrite(buf, 1, lengths[k], f) == lengths[k] && fclose(f) == 0);
        snprintf(cmd, sizeof cmd, "sha256sum %s", path);
        FILE *p = popen(cmd, "r");
        CHECK(p && fscanf(p, "%64s", want) == 1);
        if (p)
            pclose(p);
        int64_t bytes = 0;
        Err e = {0};
        CHECK(sha256_file(path, got, &bytes, &e) && bytes == (int64_t)lengths[k]);
        if (strcmp(got, want) != 0)
            fprintf(stderr, "length %zu: %s, sha256sum says %s\n", lengths[k], got, want);
        CHECK_STR(got, want);
        sha256_of(buf, lengths[k], got);
        CHECK_STR(got, want);
    }
    unlink(path);
    rmdir(dir);
}

/* Any split of the message into pieces gives the one-shot digest. */
static void test_streaming(void)
{
    unsigned char buf[777];
    char whole[SHA256_HEX], pieces[SHA256_HEX];
    fill(buf, sizeof buf);
    sha256_of(buf, sizeof buf, whole);
    for (size_t step = 1; step < 200; step += 13) {
        Sha256 s;
        sha256_init(&s);
        for (size_t at = 0; at < sizeof buf; at += step)
            sha256_update(&s, buf + at, at + step <= sizeof buf ? step : sizeof buf - at);
        sha256_update(&s, buf, 0);
        sha256_hex(&s, pieces);
        CHECK_STR(pieces, whole);
    }
    CHECK(sha256_is_hex(whole) && !sha256_is_hex("abc") && !sha256_is_hex(
          "BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD"));
    Err e = {0};
    int64_t n;
    CHECK(!sha256_file("/nonexistent/file", whole, &n, &e) && strstr(e.msg, "/nonexistent/file"));
}

int main(void)
{
    test_fips_vectors();
    test_boundaries();
    test_streaming();
    return check_status();
}
