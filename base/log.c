/* log.c — COIL_LOG: the level read from the environment once, and lines written whole to
 * stderr, each prefixed with its level, so a user can grep one stage's decisions. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/log.h"

_Atomic int coil_log_threshold = LOG_UNREAD;

static const char *const level_name[] = {[LOG_OFF] = "off", [LOG_INFO] = "info",
                                         [LOG_DEBUG] = "debug"};

bool coil_log_parse(const char *text, LogLevel *level)
{
    static const char *const digit[] = {"0", "1", "2"};
    for (int l = LOG_OFF; l <= LOG_DEBUG; l++)
        if (strcasecmp(text, level_name[l]) == 0 || strcmp(text, digit[l]) == 0) {
            *level = (LogLevel)l;
            return true;
        }
    if (!*text) {
        *level = LOG_OFF;
        return true;
    }
    return false;
}

/* COIL_LOG as a level. Two threads may both get here first: each computes the same
 * value from the same environment, so whichever store lands is right. */
static int read_level(void)
{
    const char *env = getenv("COIL_LOG");
    LogLevel l = LOG_OFF;
    if (env && !coil_log_parse(env, &l))
        fprintf(stderr, "coil: COIL_LOG=%s: expected info or debug (or off); logging off\n", env);
    int unread = LOG_UNREAD;
    atomic_compare_exchange_strong(&coil_log_threshold, &unread, (int)l);
    return atomic_load(&coil_log_threshold);
}

bool coil_log_enabled(LogLevel level)
{
    int t = atomic_load_explicit(&coil_log_threshold, memory_order_relaxed);
    if (t == LOG_UNREAD)
        t = read_level();
    return level != LOG_OFF && (int)level <= t;
}

void coil_log_set_level(LogLevel level) { atomic_store(&coil_log_threshold, (int)level); }

void coil_log_emit(LogLevel level, const char *fmt, ...)
{
    if (!coil_log_enabled(level))
        return;
    char line[1024];
    int n = snprintf(line, sizeof line, "coil[%s] ", level_name[level]);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof line - 2) /* cut: one line is for one decision, not a dump */
        len = sizeof line - 2;
    line[len++] = '\n';
    fwrite(line, 1, len, stderr); /* one call: stdio locks the stream for it */
}
