/* consumer.c — a program as a user writes it against an installed coil: load a model
 * (a file, or a package directory `coil compile` wrote), give it parameters, run it on
 * one batch, print what came out and, on stderr, how long loading, the parameters and the
 * first run took. It also defines a json_parse of its own: libcoil.so exports nothing but
 * the coil_ API, so they cannot clash. Usage: consumer MODEL */
#define _POSIX_C_SOURCE 199309L /* clock_gettime under -std=c99 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <coil/coil.h>

int json_parse(const char *s) { return s != NULL; } /* a name coil uses inside */

static double ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

int main(int argc, char **argv)
{
    coil_error err;
    double t0 = ms();
    coil_model *m = argc > 1 ? coil_load(argv[1], NULL, &err) : NULL;
    double t1 = ms();
    coil_dim_size b = {"B", 4};
    if (!m || !coil_init_params(m, 0, &b, 1, &err)) {
        fprintf(stderr, "consumer: %s\n", argc > 1 ? err.message : "usage: consumer MODEL");
        return 1;
    }
    const coil_info *in = coil_info_at(m, COIL_INPUT, 0);
    coil_tensor x = {.dtype = in->dtype, .rank = in->rank};
    for (int d = 0; d < in->rank; d++)
        x.shape[d] = in->shape[d] < 0 ? b.size : in->shape[d];
    float *data = calloc((size_t)coil_tensor_numel(&x), sizeof *data);
    for (int64_t i = 0; i < coil_tensor_numel(&x); i++)
        data[i] = (float)(i % 7) / 7;
    x.data = data;
    coil_tensor out[4] = {{0}};
    int nout = coil_count(m, COIL_OUTPUT);
    double t2 = ms();
    if (!coil_run(m, &x, 1, out, nout, &err)) {
        fprintf(stderr, "consumer: %s\n", err.message);
        return 1;
    }
    fprintf(stderr, "consumer: load %.1f ms, parameters %.1f ms, first run %.1f ms\n", t1 - t0,
            t2 - t1, ms() - t2);
    double sum = 0;
    for (int64_t i = 0; i < coil_tensor_numel(&out[0]); i++)
        sum += ((const float *)out[0].data)[i];
    printf("coil %s: %s -> %s, sum %.6f, json_parse %d\n", coil_version(), in->type,
           coil_info_at(m, COIL_OUTPUT, 0)->type, sum, json_parse("{}"));
    for (int i = 0; i < nout; i++)
        coil_tensor_free(&out[i]);
    free(data);
    coil_free(m);
    return 0;
}
