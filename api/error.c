/* error.c — how the API reports failure: a coil_error filled from the internal Err (whose
 * codes are coil's) or from a message of the API's own. */
#include <stdarg.h>
#include <stdio.h>

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
