/* tensor.c — host tensors in their native dtype: the currency of npy files,
 * safetensors weights and the interpreter's inputs and outputs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

int64_t tensor_numel(const Tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->rank; i++)
        n *= t->shape[i];
    return n;
}

size_t tensor_nbytes(const Tensor *t)
{
    return (size_t)tensor_numel(t) * (size_t)dtype_info[t->dt].size;
}

bool tensor_alloc(Tensor *t, DType dt, int rank, const int64_t *shape, Err *e)
{
    memset(t, 0, sizeof *t);
    if (rank < 0 || rank > COIL_MAX_RANK) {
        err_set(e, ERR_INPUT, "tensor rank %d is out of range (0..%d)", rank, COIL_MAX_RANK);
        return false;
    }
    t->dt = dt;
    t->rank = rank;
    int64_t n = 1;
    for (int i = 0; i < rank; i++) {
        if (shape[i] < 0 || __builtin_mul_overflow(n, shape[i], &n) || n > (INT64_C(1) << 40)) {
            err_set(e, ERR_INPUT, "tensor shape is negative or too large");
            return false;
        }
        t->shape[i] = shape[i];
    }
    /* a cache line's alignment: compiled kernels read whole vectors, and a GEMM operand
     * off a 64-byte boundary runs measurably slower (5% one, 20% both) */
    size_t bytes = (size_t)n * (size_t)dtype_info[dt].size, padded = (bytes + 63) / 64 * 64;
    t->data = aligned_alloc(64, padded ? padded : 64);
    if (t->data)
        memset(t->data, 0, padded ? padded : 64);
    if (!t->data) {
        err_set(e, ERR_MEMORY, "out of memory allocating a tensor of %zu bytes", bytes);
        return false;
    }
    return true;
}

void tensor_free(Tensor *t)
{
    if (t) {
        free(t->data);
        t->data = NULL;
    }
}

char *tensor_fmt(const Tensor *t, char *buf, size_t n)
{
    size_t len = (size_t)snprintf(buf, n, "%s[", dtype_info[t->dt].name);
    for (int i = 0; i < t->rank && len < n; i++)
        len += (size_t)snprintf(buf + len, n - len, "%s%lld", i ? "," : "", (long long)t->shape[i]);
    if (len < n)
        snprintf(buf + len, n - len, "]");
    return buf;
}
