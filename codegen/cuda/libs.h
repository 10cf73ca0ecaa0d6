/* libs.h — where coil finds the NVIDIA libraries it opens with dlopen (NVRTC, the driver,
 * cuBLAS, cuBLASLt, NCCL): the loader's own search first, then the CUDA toolkit's folders
 * and the folders of Python's NVIDIA wheels, which is where a machine with PyTorch has them.
 * No CUDA header is needed: it builds everywhere. */
#ifndef COIL_CODEGEN_CUDA_LIBS_H
#define COIL_CODEGEN_CUDA_LIBS_H

#include <stdbool.h>
#include <stddef.h>

/* The first of `names` (NULL-terminated, most wanted first) that loads: the path in $env
 * when that is set (nothing else is tried: the user said which), else each name through
 * the dynamic loader (LD_LIBRARY_PATH, the ld.so cache), then each name in every folder of
 * cuda_lib_dirs. RTLD_NOW | RTLD_LOCAL. *path gets the full path of what was opened (or
 * the path tried from $env); NULL when nothing loads. */
void *cuda_lib_open(const char *env, const char *const *names, char *path, size_t n);

/* The folders searched after the loader's path, in order, each an existing directory:
 * $CUDA_HOME and $CUDA_PATH (lib64, lib), /usr/local/cuda (lib64, lib, targets/<arch>/lib),
 * /usr/local/nvidia/lib64 and lib (where containers mount the driver), then PREFIX/lib/python3.x/{site,dist}-packages/nvidia/<package>/lib for PREFIX in
 * $VIRTUAL_ENV, $CONDA_PREFIX, the parent of every PATH folder holding a python3, ~/.local,
 * /usr/local and /usr. Returns how many were written (at most max, each < PATH_MAX). */
int cuda_lib_dirs(char (*dirs)[4096], int max);

/* The folder a library opened with dlopen was loaded from (its origin), into dir. */
bool cuda_lib_origin(void *handle, char *dir, size_t n);

#endif
