/* defaults.c — the sanitizer build's runtime options (COIL_SANITIZE, `make test-asan`):
 * compiled into every program of that build, so ctest, lit, the scripts and a shell all run
 * with leak checking on and findings fatal, without setting anything. ASAN_OPTIONS,
 * UBSAN_OPTIONS and LSAN_OPTIONS in the environment still override any of them. */

/* abort_on_error: a finding is SIGABRT, which lit's `not` reports as a crash instead of
 * taking it for the expected failure; allocator_may_return_null: a huge request returns
 * NULL, as malloc does, so coil's out-of-memory errors are what run. */
__attribute__((used, visibility("default"))) const char *__asan_default_options(void)
{
    return "detect_leaks=1:abort_on_error=1:allocator_may_return_null=1:"
           "strict_string_checks=1:check_initialization_order=1:strict_init_order=1";
}

__attribute__((used, visibility("default"))) const char *__ubsan_default_options(void)
{
    return "print_stacktrace=1:halt_on_error=1:abort_on_error=1";
}

/* Suppressions for third-party libraries only (tests/asan/lsan.supp says which and why). */
__attribute__((used, visibility("default"))) const char *__lsan_default_options(void)
{
    return "suppressions=" COIL_LSAN_SUPPRESSIONS ":print_suppressions=0";
}
