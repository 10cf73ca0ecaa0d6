/* libs.c — finding the NVIDIA libraries: the loader's search, then the toolkit's folders and
 * Python's NVIDIA wheels (a machine with PyTorch but no toolkit on the loader's path). */
#include <dlfcn.h>
#include <glob.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "codegen/cuda/libs.h"

#define DIR_MAX 4096

typedef struct Dirs {
    char (*d)[DIR_MAX];
    int n, max;
} Dirs;

static bool is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Appended when it exists and is not there yet. */
static void add_dir(Dirs *ds, const char *dir)
{
    if (ds->n >= ds->max || strlen(dir) >= DIR_MAX || !is_dir(dir))
        return;
    for (int i = 0; i < ds->n; i++)
        if (strcmp(ds->d[i], dir) == 0)
            return;
    snprintf(ds->d[ds->n++], DIR_MAX, "%s", dir);
}

static void add_joined(Dirs *ds, const char *base, const char *tail)
{
    char path[DIR_MAX];
    if (base && *base && (size_t)snprintf(path, sizeof path, "%s%s", base, tail) < sizeof path)
        add_dir(ds, path);
}

static void add_toolkit(Dirs *ds, const char *root)
{
    static const char *const tails[] = {"/lib64", "/lib", "/targets/x86_64-linux/lib",
                                        "/targets/sbsa-linux/lib"};
    for (size_t i = 0; i < sizeof tails / sizeof *tails; i++)
        add_joined(ds, root, tails[i]);
}

/* Every nvidia/<package>/lib of a Python installed under prefix (pip's NVIDIA wheels:
 * nvidia/cublas/lib, nvidia/cuda_nvrtc/lib, nvidia/nccl/lib, CUDA 13's nvidia/cu13/lib). */
static void add_python(Dirs *ds, const char *prefix)
{
    static const char *const patterns[] = {"%s/lib/python3*/site-packages/nvidia/*/lib",
                                           "%s/lib/python3*/dist-packages/nvidia/*/lib",
                                           "%s/local/lib/python3*/dist-packages/nvidia/*/lib"};
    if (!prefix || !*prefix)
        return;
    for (size_t i = 0; i < sizeof patterns / sizeof *patterns; i++) {
        char pattern[DIR_MAX];
        glob_t g;
        snprintf(pattern, sizeof pattern, patterns[i], prefix);
        if (glob(pattern, GLOB_ONLYDIR, NULL, &g) == 0)
            for (size_t j = 0; j < g.gl_pathc; j++)
                add_dir(ds, g.gl_pathv[j]);
        globfree(&g);
    }
}

/* The path without its last component, in place ("/opt/torch/.venv/bin" ->
 * "/opt/torch/.venv"). */
static void strip_last(char *path)
{
    char *slash = strrchr(path, '/');
    if (slash && slash != path)
        *slash = 0;
}

/* Each PATH folder holding a python3: its prefix (a venv's), and that of the python3 it
 * links to (the base installation's, where a venv's own site-packages lacks the wheels). */
static void add_path_pythons(Dirs *ds)
{
    const char *path = getenv("PATH");
    char dir[DIR_MAX], exe[DIR_MAX + 16], real[PATH_MAX], prefix[DIR_MAX];
    while (path && *path) {
        size_t len = strcspn(path, ":");
        if (len > 0 && len < sizeof dir) {
            memcpy(dir, path, len);
            dir[len] = 0;
            snprintf(exe, sizeof exe, "%s/python3", dir);
            if (access(exe, X_OK) == 0) {
                snprintf(prefix, sizeof prefix, "%s", dir);
                strip_last(prefix);
                add_python(ds, prefix);
                if (realpath(exe, real)) { /* .../bin/python3.12 -> ... */
                    strip_last(real);
                    strip_last(real);
                    add_python(ds, real);
                }
            }
        }
        path += len + (path[len] == ':');
    }
}

int cuda_lib_dirs(char (*dirs)[DIR_MAX], int max)
{
    Dirs ds = {dirs, 0, max};
    const char *home = getenv("HOME");
    add_toolkit(&ds, getenv("CUDA_HOME"));
    add_toolkit(&ds, getenv("CUDA_PATH"));
    add_toolkit(&ds, "/usr/local/cuda");
    add_dir(&ds, "/usr/local/nvidia/lib64"); /* a container's driver mount */
    add_dir(&ds, "/usr/local/nvidia/lib");
    add_python(&ds, getenv("VIRTUAL_ENV"));
    add_python(&ds, getenv("CONDA_PREFIX"));
    add_path_pythons(&ds);
    if (home && *home) {
        char local[DIR_MAX];
        snprintf(local, sizeof local, "%s/.local", home);
        add_python(&ds, local);
    }
    add_python(&ds, "/usr/local");
    add_python(&ds, "/usr");
    return ds.n;
}

bool cuda_lib_origin(void *handle, char *dir, size_t n)
{
    struct link_map *map = NULL;
    if (!handle || dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || !map || !map->l_name ||
        map->l_name[0] != '/')
        return false;
    snprintf(dir, n, "%s", map->l_name);
    strip_last(dir);
    return true;
}

/* The loaded object's own path (the loader resolved a bare name to it). */
static void loaded_path(void *h, const char *fallback, char *path, size_t n)
{
    struct link_map *map = NULL;
    const char *name = dlinfo(h, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name &&
                               map->l_name[0] ? map->l_name : fallback;
    snprintf(path, n, "%s", name);
}

void *cuda_lib_open(const char *env, const char *const *names, char *path, size_t n)
{
    const char *given = env ? getenv(env) : NULL;
    if (given && *given) {
        snprintf(path, n, "%s", given);
        return dlopen(given, RTLD_NOW | RTLD_LOCAL);
    }
    for (int i = 0; names[i]; i++) {
        void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (h) {
            loaded_path(h, names[i], path, n);
            return h;
        }
    }
    enum { MAX_DIRS = 64 };
    char (*dirs)[DIR_MAX] = malloc(sizeof *dirs * MAX_DIRS);
    int nd = dirs ? cuda_lib_dirs(dirs, MAX_DIRS) : 0;
    void *h = NULL;
    for (int d = 0; d < nd && !h; d++)
        for (int i = 0; names[i] && !h; i++) {
            char file[DIR_MAX + 256];
            snprintf(file, sizeof file, "%s/%s", dirs[d], names[i]);
            if (access(file, R_OK) == 0 && (h = dlopen(file, RTLD_NOW | RTLD_LOCAL)))
                snprintf(path, n, "%s", file);
        }
    free(dirs);
    return h;
}
