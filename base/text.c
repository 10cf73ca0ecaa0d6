/* text.c — a growing string written with printf formats: what printers build their
 * output in (the fusion plan, a package's JSON, generated CUDA C); and the lookup of a
 * name in an enum's table of spellings. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

void text_put(Text *t, const char *fmt, ...)
{
    va_list ap;
    for (int tries = 0; tries < 2 && !t->oom; tries++) {
        size_t room = t->s ? t->cap - t->n : 0;
        va_start(ap, fmt);
        int k = vsnprintf(t->s ? t->s + t->n : NULL, room, fmt, ap);
        va_end(ap);
        if (k < 0) {
            t->oom = true;
            return;
        }
        if (t->s && (size_t)k < room) {
            t->n += (size_t)k;
            return;
        }
        size_t cap = (t->cap + (size_t)k + 1) * 2;
        char *s = realloc(t->s, cap);
        if (!s)
            t->oom = true;
        else
            t->s = s, t->cap = cap;
    }
}

char *text_take(Text *t)
{
    char *s = t->oom ? NULL : t->s ? t->s : calloc(1, 1);
    if (t->oom)
        free(t->s);
    memset(t, 0, sizeof *t);
    return s;
}

int name_index(const char *const *names, int n, const char *s)
{
    for (int i = 0; i < n; i++)
        if (names[i] && strcmp(s, names[i]) == 0)
            return i;
    return -1;
}
