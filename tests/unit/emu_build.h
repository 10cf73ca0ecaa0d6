/* emu_build.h — compiling generated CUDA C++ for the host emulator (cuda_emu.h, force-
 * included) into a shared library and opening it; tests that run CUDA sources without a
 * GPU share it. A failure is counted (check.h) and said, naming the command. -O0: the op
 * fixtures' kernels (1.7 MB of C++) compile in a third of -O1's time, which is longer
 * than they then take to run. */
#ifndef COIL_TESTS_EMU_BUILD_H
#define COIL_TESTS_EMU_BUILD_H

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"

static void *emu_build(const char *src, const char *lib, const char *what)
{
    char cwd[1024], cmd[4096];
    if (!getcwd(cwd, sizeof cwd))
        return NULL;
    snprintf(cmd, sizeof cmd, "c++ -std=c++20 -O0 -shared -fPIC -pthread -w -include "
             "'%s/tests/unit/cuda_emu.h' '%s' -o '%s'", cwd, src, lib);
    if (system(cmd) != 0) {
        fprintf(stderr, "the host compiler rejected %s: %s\n", what, cmd);
        check_failures++;
        return NULL;
    }
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "dlopen %s: %s\n", lib, dlerror());
        check_failures++;
    }
    return h;
}

#endif
