/* test_core.c — the IR core against values computed independently: IEEE half and
 * bfloat16 bit patterns, Philox known-answer vectors, builder errors, symbol binding. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ir/ir.h"

static int failures;
#define CHECK(c) do { if (!(c)) { fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c); failures++; } } while (0)

static void test_half(void)
{
    CHECK(f32_to_f16(1.0f) == 0x3c00);
    CHECK(f32_to_f16(-2.0f) == 0xc000);
    CHECK(f32_to_f16(65504.0f) == 0x7bff);          /* largest finite */
    CHECK(f32_to_f16(65520.0f) == 0x7c00);          /* rounds to inf */
    CHECK(f32_to_f16(0x1p-24f) == 0x0001);          /* smallest subnormal */
    CHECK(f32_to_f16(0x1p-25f) == 0x0000);          /* tie to even: 0 */
    CHECK(f32_to_f16(1.0f + 0x1p-11f) == 0x3c00);   /* tie to even, down */
    CHECK(f32_to_f16(1.0f + 3 * 0x1p-11f) == 0x3c02); /* tie to even, up */
    CHECK(f16_to_f32(0x3555) == 0x1.554p-2f);
    CHECK(isnan(f16_to_f32(f32_to_f16(NAN))));
    for (unsigned h = 0; h < 0x7c00; h++) /* every finite positive half round-trips */
        if (f32_to_f16(f16_to_f32((uint16_t)h)) != h) {
            CHECK(!"half round trip");
            break;
        }
}

static void test_bf16_and_ints(void)
{
    CHECK(f32_to_bf16(1.0f) == 0x3f80);
    CHECK(f32_to_bf16(3.14159265f) == 0x4049);
    CHECK(bf16_to_f32(0x4049) == 3.140625f);
    CHECK(f32_to_bf16(1.0f + 0x1p-8f) == 0x3f80);  /* tie to even */
    CHECK(dtype_round(DT_BF16, 1.0 + 0x1p-8 + 0x1p-30) == 1.0 + 0x1p-7); /* no double rounding */
    CHECK(dtype_round(DT_I8, 200) == -56);
    CHECK(dtype_round(DT_I8, -3.7) == -3);
    CHECK(dtype_round(DT_I32, 2147483648.0) == -2147483648.0);
    CHECK(dtype_round(DT_BOOL, -0.5) == 1);
    CHECK(dtype_round(DT_F32, 0.1) == (double)0.1f);
}

/* Random123's known-answer vectors for philox4x32_10. */
static void test_philox(void)
{
    static const uint32_t kat[3][10] = {
        {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
        {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff,
         0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd},
        {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0,
         0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1},
    };
    for (int i = 0; i < 3; i++) {
        uint32_t out[4];
        philox4x32_10(kat[i], kat[i] + 4, out);
        CHECK(memcmp(out, kat[i] + 6, sizeof out) == 0);
    }
    double u = philox_uniform(0, 0, 0);
    CHECK(u == (double)(0x6627e8d5u >> 8) * 0x1p-24);
    CHECK(philox_uniform(7, 5, 3) == philox_uniform(7, 8, 0));
    /* the rng step is counter words 2 and 3: the third vector, its counter split into
     * (index, step); step 0 is philox4x32 */
    uint32_t out[4], zero[4];
    philox4x32_step(0x299f31d0a4093822ull, 0x85a308d3243f6a88ull, 0x0370734413198a2eull, out);
    CHECK(memcmp(out, kat[2] + 6, sizeof out) == 0);
    philox4x32_step(0, 0, 0, zero);
    CHECK(memcmp(zero, kat[0] + 6, sizeof zero) == 0);
    CHECK(philox_uniform_step(0x299f31d0a4093822ull, 0x0370734413198a2eull, 0x85a308d3243f6a80ull,
                              8) == (double)(0xd16cfe09u >> 8) * 0x1p-24);
    CHECK(philox_uniform_step(7, 0, 5, 3) == philox_uniform(7, 5, 3));
    CHECK(philox_uniform_step(7, 1, 5, 3) != philox_uniform(7, 5, 3));
}

static void test_builder_errors(void)
{
    Graph *g = graph_new("t");
    Err e = {0};
    Builder b = builder_make(g, &e);
    Type t = {.dt = DT_F32, .rank = 2, .dim = {{1, 1u << graph_sym(g, "B", 1)}, {4, 0}}};
    int x = b_input(&b, "x", &t);
    CHECK(x == 0);
    b.loc = (Loc){"m.cir", 3, 7};
    Attr bogus = attr_int("bogus", 1);
    CHECK(b_op(&b, OP_NEG, &x, 1, &bogus, 1, NULL) == -1);
    CHECK(strcmp(e.msg, "m.cir:3:7: error: neg: unknown attribute 'bogus'") == 0);
    CHECK(b_unary(&b, OP_NEG, x) == -1); /* sticky */
    e = (Err){0};
    CHECK(b_op(&b, OP_ADD, &x, 1, NULL, 0, NULL) == -1);
    CHECK(strstr(e.msg, "add: expects 2 operands, got 1") != NULL);
    e = (Err){0};
    CHECK(b_op(&b, OP_TRANSPOSE, &x, 1, NULL, 0, NULL) == -1);
    CHECK(strstr(e.msg, "missing required attribute 'perm'") != NULL);
    e = (Err){0};
    char buf[64];
    CHECK(strcmp(type_fmt(g, &t, buf, sizeof buf), "f32[B,4]") == 0);
    bool of = false;
    Dim bt = dim_mul(dim_mul(t.dim[0], (Dim){1, 1u << graph_sym(g, "T", 1), 0}, &of), dim_static(2), &of);
    CHECK(!of && strcmp(dim_fmt(g, bt, buf, sizeof buf), "2*B*T") == 0);
    dim_mul(t.dim[0], t.dim[0], &of);
    CHECK(of); /* B*B is not representable */
    graph_free(g);
}

static void test_bind(void)
{
    Graph *g = graph_new("t");
    Err e = {0};
    Builder b = builder_make(g, &e);
    uint32_t B = 1u << graph_sym(g, "B", 1), T = 1u << graph_sym(g, "T", 1);
    Type t1 = {.dt = DT_F32, .rank = 1, .dim = {{2, B | T}}};
    Type t2 = {.dt = DT_F32, .rank = 2, .dim = {{1, B}, {3, 0}}};
    b_input(&b, "flat", &t1);
    b_input(&b, "x", &t2);
    Tensor in[2] = {{.dt = DT_F32, .rank = 1, .shape = {24}}, {.dt = DT_F32, .rank = 2, .shape = {4, 3}}};
    SymBind sb;
    CHECK(bind_inputs(g, in, &sb, &e));
    CHECK(sb.val[0] == 4 && sb.val[1] == 3); /* B from x, then T from 2*B*T = 24 */
    in[0].shape[0] = 25;
    CHECK(!bind_inputs(g, in, &sb, &e));
    CHECK(strstr(e.msg, "input 'flat': expected f32[2*B*T], got f32[25]") != NULL);
    graph_free(g);
}

int main(void)
{
    test_half();
    test_bf16_and_ints();
    test_philox();
    test_builder_errors();
    test_bind();
    if (failures)
        fprintf(stderr, "%d check(s) failed\n", failures);
    return failures != 0;
}
