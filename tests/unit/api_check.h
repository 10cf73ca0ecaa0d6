/* api_check.h — the checks the API's tests share (test_api*.c): a failed check prints where
 * and what and counts, so one run reports every failure; main returns failures != 0. */
#ifndef COIL_TESTS_API_CHECK_H
#define COIL_TESTS_API_CHECK_H

#include <stdio.h>
#include <string.h>

static int failures;

#define CHECK(c)                                                                         \
    do {                                                                                 \
        if (!(c)) {                                                                      \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c);        \
            failures++;                                                                  \
        }                                                                                \
    } while (0)

#define CHECK_STR(got, want)                                                             \
    do {                                                                                 \
        const char *got_ = (got), *want_ = (want);                                       \
        if (!got_ || strcmp(got_, want_) != 0) {                                         \
            fprintf(stderr, "%s:%d: CHECK_STR failed: got '%s', want '%s'\n", __FILE__,  \
                    __LINE__, got_ ? got_ : "(null)", want_);                            \
            failures++;                                                                  \
        }                                                                                \
    } while (0)

/* A failed call: its code, and a message holding each of the fragments. */
#define CHECK_ERR(err, want_code, ...)                                                   \
    do {                                                                                 \
        const char *frags_[] = {__VA_ARGS__};                                            \
        if ((err).code != (want_code)) {                                                 \
            fprintf(stderr, "%s:%d: error code %d, want %d (%s)\n", __FILE__, __LINE__,  \
                    (err).code, want_code, (err).message);                               \
            failures++;                                                                  \
        }                                                                                \
        for (size_t k_ = 0; k_ < sizeof frags_ / sizeof frags_[0]; k_++)                 \
            if (!strstr((err).message, frags_[k_])) {                                    \
                fprintf(stderr, "%s:%d: message '%s' lacks '%s'\n", __FILE__, __LINE__,  \
                        (err).message, frags_[k_]);                                      \
                failures++;                                                              \
            }                                                                            \
    } while (0)

#define CHECK_OK(call, err)                                                              \
    do {                                                                                 \
        if (!(call) || (err).code != COIL_OK) {                                          \
            fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,         \
                    (err).message);                                                      \
            failures++;                                                                  \
        }                                                                                \
    } while (0)

#endif
