/* error.c — how the API reports failure: a coil_error filled from the internal Err (whose
 * codes are coil's) or from a message of the API's own. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "api/api.h"

void api_err_clear(coil_error *err)
{
    if (err) {
        err->code = COIL_OK;
        err->message[0] = 0;
    }
}

bool api_fail_err(coil_error *err, const Err *e)
{
    if (err) {
        err->code = e->code != ERR_OK ? e->code : COIL_ERR_INPUT;
        snprintf(err->message, sizeof err->message, "%s", e->code != ERR_OK ? e->msg : "failed");
    }
    return false;
}

bool api_fail(coil_error *err, int code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
        err->code = code;
    }
    return false;
}

bool api_sized(const void *given, size_t given_size, void *out, size_t size, const char *fn,
               const char *type, coil_error *err)
{
    if (!given)
        return true;
    if (given_size == 0)
        return api_fail(err, COIL_ERR_USAGE, "%s: the %s given has size 0: pass "
                        "sizeof(%s) (the header's macros do)", fn, type, type);
    const unsigned char *bytes = given;
    for (size_t i = size; i < given_size; i++)
        if (bytes[i] != 0)
            return api_fail(err, COIL_ERR_USAGE, "%s: the %s given is %zu bytes with byte %zu "
                            "set, but this libcoil (%s) knows %zu: a field from a newer header "
                            "that it cannot honour", fn, type, given_size, i, coil_version(), size);
    size_t n = given_size < size ? given_size : size;
    memcpy(out, given, n);
    memset((char *)out + n, 0, size - n);
    return true;
}
