/* err.c — errors as values: one formatted message, the first error wins.
 * Located errors read "FILE:LINE:COL: error: MSG", as compilers print them. */
#include <stdio.h>

#include "base/base.h"

void err_vat(Err *e, Loc loc, const char *fmt, va_list ap)
{
    if (!e || e->code != ERR_OK)
        return;
    int n = 0;
    if (loc.file)
        n = snprintf(e->msg, sizeof e->msg, "%s:%d:%d: error: ", loc.file, loc.line, loc.col);
    else
        n = snprintf(e->msg, sizeof e->msg, "error: ");
    if (n < 0 || (size_t)n >= sizeof e->msg)
        n = 0;
    vsnprintf(e->msg + n, sizeof e->msg - (size_t)n, fmt, ap);
    e->code = ERR_INPUT;
}

void err_at(Err *e, Loc loc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    err_vat(e, loc, fmt, ap);
    va_end(ap);
}

void err_set(Err *e, int code, const char *fmt, ...)
{
    if (!e || e->code != ERR_OK)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    e->code = code;
}
