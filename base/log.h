/* log.h — COIL_LOG=info|debug: what the compiler decides and why, one line per decision
 * on stderr ("coil[info] ...", "coil[debug] ..."); every stage can log, so it lives in ir/. */
#ifndef COIL_IR_LOG_H
#define COIL_IR_LOG_H

#include <stdatomic.h>
#include <stdbool.h>

/* Levels in increasing detail: info (each pass's time, each stage's summary, choices the
 * user can act on), debug (every fusion refusal, every autotuner candidate). */
typedef enum LogLevel { LOG_OFF = 0, LOG_INFO = 1, LOG_DEBUG = 2 } LogLevel;

/* The most detailed level printed: LOG_UNREAD until COIL_LOG has been read, and every
 * level passes the check below then, so the first line asked for reads it (once).
 * Process-wide because the environment is; only base/log.c writes it. */
#define LOG_UNREAD 3
extern _Atomic int coil_log_threshold;

/* The slow path: reads COIL_LOG on first use (off, 0, info, 1, debug, 2; anything else
 * warns once and is off), then prints when level is enabled. */
void coil_log_emit(LogLevel level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Whether level is enabled, reading COIL_LOG first if need be. */
bool coil_log_enabled(LogLevel level);
/* Set the level instead of COIL_LOG (tests; an embedding program's own switch). Call it
 * before other threads log. */
void coil_log_set_level(LogLevel level);
/* The level COIL_LOG's text names: false for text that names none. */
bool coil_log_parse(const char *text, LogLevel *level);

/* Whether lines of `level` print: one relaxed load and a compare, so a disabled log
 * costs one branch. Guard arguments that are costly to compute with it. */
static inline bool coil_log_on(LogLevel level)
{
    int t = atomic_load_explicit(&coil_log_threshold, memory_order_relaxed);
    return (int)level <= t && (t != LOG_UNREAD || coil_log_enabled(level));
}

/* Print one line (a newline is added) when level is enabled; a whole line is written
 * at once, so threads' lines never interleave. */
#define coil_log(level, ...)                                                              \
    do {                                                                                  \
        if ((int)(level) <= atomic_load_explicit(&coil_log_threshold, memory_order_relaxed)) \
            coil_log_emit(level, __VA_ARGS__);                                            \
    } while (0)

#endif
