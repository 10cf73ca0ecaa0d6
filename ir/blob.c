/* blob.c — large constants' elements, shared between graphs. Passes copy the graph they
 * rewrite (fold, cse, colsum, ... each build a new one), and a model imported with its
 * weights as constants holds them all in its graph: BERT-base's 110 million doubles were
 * copied, and hashed by CSE, at every pass. A blob is made once, never changes, and is
 * freed when the last graph holding it is; its hash is computed once, when it is made. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

struct Blob {
    atomic_long refs;
    int64_t n;
    uint64_t hash;
    double data[];
};

/* FNV-1a over the elements' bytes (CSE compares blobs by it before their contents). */
static uint64_t hash_bytes(const void *p, size_t n)
{
    const unsigned char *s = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 1099511628211ull;
    return h;
}

const Blob *blob_new(const double *data, int64_t n)
{
    Blob *b = malloc(sizeof *b + sizeof(double) * (size_t)(n ? n : 1));
    if (!b)
        abort();
    atomic_init(&b->refs, 1);
    b->n = n;
    memcpy(b->data, data, sizeof(double) * (size_t)n);
    b->hash = hash_bytes(b->data, sizeof(double) * (size_t)n);
    return b;
}

void blob_retain(const Blob *b) { atomic_fetch_add(&((Blob *)b)->refs, 1); }

void blob_release(const Blob *b)
{
    if (b && atomic_fetch_sub(&((Blob *)b)->refs, 1) == 1)
        free((Blob *)b);
}

const double *blob_data(const Blob *b) { return b->data; }

uint64_t blob_hash(const Blob *b) { return b->hash; }
