/* test_npy.c — .npy reading and writing against files NumPy wrote (tests/models/npy,
 * gen.py): byte-identical output, every dtype round-trips, every malformed file is refused. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/npy.h"
#include "test_files.h"

static int failures;
#define CHECK(c) do { if (!(c)) { fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c); failures++; } } while (0)

#define FIXTURES "tests/models/npy/"
static char tmpdir[] = "/tmp/coil_test_npy_XXXXXX";

static const char *tmp_path(const char *name)
{
    static char buf[256];
    snprintf(buf, sizeof buf, "%s/%s", tmpdir, name);
    return buf;
}

static size_t slurp(const char *path, unsigned char *buf, size_t cap)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, cap, f);
    fclose(f);
    return n;
}

static bool shape_is(const Tensor *t, DType dt, int rank, const int64_t *shape)
{
    return t->dt == dt && t->rank == rank && memcmp(t->shape, shape, (size_t)rank * sizeof *shape) == 0;
}

/* Values NumPy wrote (see gen.py), read back through dtype_load. */
static void test_numpy_files(void)
{
    static const struct { const char *file; DType dt; int rank; int64_t shape[2]; double v[6]; } cases[] = {
        {"f32_2x3.npy", DT_F32, 2, {2, 3}, {1, 2, 3, 4, 5, 6}},
        {"f32_v2.npy", DT_F32, 2, {1, 2}, {0.5, -1.25}},
        {"f32_scalar.npy", DT_F32, 0, {0}, {3.25}},
        {"f16_3.npy", DT_F16, 1, {3}, {1.5, -2.0, 65504.0}},
        {"bf16_2.npy", DT_BF16, 1, {2}, {1.0, 3.140625}},
        {"i8_2x2.npy", DT_I8, 2, {2, 2}, {-128, 127, 0, -1}},
        {"i32_2.npy", DT_I32, 1, {2}, {-7, 2147483647}},
        {"i64_3.npy", DT_I64, 1, {3}, {0, 2, -5}},
        {"bool_4.npy", DT_BOOL, 1, {4}, {1, 0, 1, 1}},
        {"f32_empty.npy", DT_F32, 2, {0, 3}, {0}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        Err e = {0};
        Tensor t;
        char path[256];
        snprintf(path, sizeof path, FIXTURES "%s", cases[c].file);
        CHECK(npy_read(path, &t, &e));
        if (!err_ok(&e)) {
            fprintf(stderr, "  %s\n", e.msg);
            continue;
        }
        CHECK(shape_is(&t, cases[c].dt, cases[c].rank, cases[c].shape));
        for (int64_t i = 0; i < tensor_numel(&t); i++)
            CHECK(dtype_load(t.dt, t.data, i) == cases[c].v[i]);
        /* What we write is byte for byte what NumPy wrote (format 1.0 files only). */
        if (strcmp(cases[c].file, "f32_v2.npy") != 0) {
            unsigned char want[512], got[512];
            size_t nw = slurp(path, want, sizeof want);
            CHECK(npy_write(tmp_path("out.npy"), &t, &e));
            size_t ng = slurp(tmp_path("out.npy"), got, sizeof got);
            CHECK(nw > 0 && nw == ng && memcmp(want, got, nw) == 0);
        }
        tensor_free(&t);
    }
}

/* Every dtype, with values at its edges, survives write then read bit for bit. */
static void test_round_trip(void)
{
    static const double vals[] = {0, 1, -1, 0.5, -128, 127, 65504, 3.0e38, -2147483648.0, 1e-3};
    int64_t shape[3] = {2, 1, 5};
    for (int dt = 0; dt < DT_COUNT; dt++) {
        Err e = {0};
        Tensor t, back;
        CHECK(tensor_alloc(&t, (DType)dt, 3, shape, &e));
        for (int64_t i = 0; i < 10; i++)
            dtype_store((DType)dt, t.data, i, vals[i]);
        CHECK(npy_write(tmp_path("rt.npy"), &t, &e));
        CHECK(npy_read(tmp_path("rt.npy"), &back, &e));
        CHECK(err_ok(&e) && shape_is(&back, (DType)dt, 3, shape));
        CHECK(err_ok(&e) && memcmp(t.data, back.data, tensor_nbytes(&t)) == 0);
        tensor_free(&t);
        tensor_free(&back);
    }
}

/* Read path and expect failure with `want` in the message. */
static void expect_error(const char *path, const char *want)
{
    Err e = {0};
    Tensor t;
    bool ok = npy_read(path, &t, &e);
    CHECK(!ok && (e.code == ERR_INPUT || e.code == ERR_FILE)); /* malformed, or unreadable */
    if (!ok && !strstr(e.msg, want)) {
        fprintf(stderr, "  expected '%s' in: %s\n", want, e.msg);
        failures++;
    }
    if (ok)
        tensor_free(&t);
}

/* A version 1.0 file with the given dict text and `data` bytes of payload. */
static const char *craft(const char *dict, size_t data)
{
    unsigned char buf[1024] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
    size_t n = strlen(dict);
    buf[8] = (unsigned char)n;
    buf[9] = (unsigned char)(n >> 8);
    memcpy(buf + 10, dict, n);
    CHECK(write_whole(tmp_path("craft.npy"), buf, 10 + n + data));
    return tmp_path("craft.npy");
}

static void test_errors(void)
{
    unsigned char good[256];
    size_t n = slurp(FIXTURES "f32_2x3.npy", good, sizeof good);
    CHECK(n == 152);
    CHECK(write_whole(tmp_path("short_data.npy"), good, n - 5));
    expect_error(tmp_path("short_data.npy"), "truncated data: f32[2,3] needs 24 bytes, found 19");
    CHECK(write_whole(tmp_path("short_header.npy"), good, 40));
    expect_error(tmp_path("short_header.npy"), "truncated header: expected 118 bytes, found 30");
    CHECK(write_whole(tmp_path("tiny.npy"), good, 7));
    expect_error(tmp_path("tiny.npy"), "truncated header: expected at least 10 bytes, found 7");
    CHECK(write_whole(tmp_path("long.npy"), good, n));
    FILE *f = fopen(tmp_path("long.npy"), "ab");
    if (f) {
        fputs("junk", f);
        fclose(f);
    }
    expect_error(tmp_path("long.npy"), "4 unexpected bytes after the data");
    CHECK(write_whole(tmp_path("magic.npy"), "hello, world", 12));
    expect_error(tmp_path("magic.npy"), "not a .npy file (bad magic");
    unsigned char v9[152];
    memcpy(v9, good, sizeof v9);
    v9[6] = 9;
    CHECK(write_whole(tmp_path("v9.npy"), v9, sizeof v9));
    expect_error(tmp_path("v9.npy"), "unsupported .npy format version 9.0");
    expect_error(FIXTURES "missing.npy", "missing.npy: cannot open: No such file or directory");
    expect_error(FIXTURES "fortran.npy", "Fortran-order arrays are not supported");
    expect_error(FIXTURES "f64_2.npy", "unsupported dtype '<f8' (coil reads f32 <f4, f16 <f2");
    expect_error(FIXTURES "f32_bigendian.npy", "big-endian data ('>f4') is not supported");
    expect_error(craft("{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776,), }", 8),
                 "truncated data: f32[1099511627776] needs 4398046511104 bytes, found 8");
    expect_error(craft("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", 0),
                 "shape too large");
    expect_error(craft("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", 0),
                 "shape too large");
    expect_error(craft("{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1), }", 4),
                 "more than 8 dimensions");
    expect_error(craft("{'descr': '<f4', 'shape': (2,), }", 8), "lacks 'fortran_order'");
    expect_error(craft("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,), }", 8),
                 "expected True or False");
    expect_error(craft("{'descr': '<f4', 'colour': 1}", 8), "unexpected key at ''colour'");
    expect_error(craft("{'descr': '<f4", 8), "unterminated string");
}

/* Every single-byte corruption of a header is either read or refused, never a crash. */
static void test_corruption(void)
{
    unsigned char good[256], bad[256];
    size_t n = slurp(FIXTURES "f32_2x3.npy", good, sizeof good);
    static const unsigned char subst[] = {0, ' ', '\'', '(', ')', ',', '9', '{', '}', 0xff};
    for (size_t i = 0; i < 128 && i < n; i++)
        for (size_t s = 0; s < sizeof subst; s++) {
            memcpy(bad, good, n);
            bad[i] = subst[s];
            CHECK(write_whole(tmp_path("bad.npy"), bad, n));
            Err e = {0};
            Tensor t;
            if (npy_read(tmp_path("bad.npy"), &t, &e))
                tensor_free(&t);
            else
                CHECK(e.code == ERR_INPUT && e.msg[0]);
        }
}

int main(void)
{
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_numpy_files();
    test_round_trip();
    test_errors();
    test_corruption();
    const char *names[] = {"out.npy", "rt.npy", "craft.npy", "short_data.npy", "short_header.npy",
                           "tiny.npy", "long.npy", "magic.npy", "v9.npy", "bad.npy"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        unlink(tmp_path(names[i]));
    rmdir(tmpdir);
    if (failures)
        fprintf(stderr, "test_npy: %d failures\n", failures);
    return failures != 0;
}
