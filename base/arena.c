/* arena.c — bump allocation in chained blocks; a graph's or a pass's memory is
 * released at once. Out of memory is the one failure that aborts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

typedef struct Block {
    struct Block *next;
    size_t used, size;
    _Alignas(16) unsigned char data[];
} Block;

struct Arena {
    Block *head;
};

static void *xmalloc(size_t n)
{
    void *p = malloc(n);
    if (!p) {
        fprintf(stderr, "coil: out of memory allocating %zu bytes\n", n);
        abort();
    }
    return p;
}

Arena *arena_new(void)
{
    Arena *a = xmalloc(sizeof *a);
    a->head = NULL;
    return a;
}

void arena_free(Arena *a)
{
    if (!a)
        return;
    for (Block *b = a->head, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    free(a);
}

void *arena_alloc(Arena *a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    Block *b = a->head;
    if (!b || b->size - b->used < n) {
        size_t size = n > 64 * 1024 ? n : 64 * 1024;
        b = xmalloc(sizeof *b + size);
        b->size = size;
        b->used = 0;
        b->next = a->head;
        a->head = b;
    }
    void *p = b->data + b->used;
    b->used += n;
    memset(p, 0, n);
    return p;
}

char *arena_strndup(Arena *a, const char *s, size_t n)
{
    char *p = arena_alloc(a, n + 1);
    memcpy(p, s, n);
    return p;
}

char *arena_strdup(Arena *a, const char *s)
{
    return s ? arena_strndup(a, s, strlen(s)) : NULL;
}

void *arena_memdup(Arena *a, const void *p, size_t n)
{
    void *q = arena_alloc(a, n ? n : 1);
    if (n)
        memcpy(q, p, n);
    return q;
}
