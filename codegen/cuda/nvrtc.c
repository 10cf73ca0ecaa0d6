/* nvrtc.c — NVRTC, opened with dlopen at first use (so coil runs where the CUDA toolkit is
 * not installed, and says so when asked to compile for a GPU), compiling generated sources
 * to cubins; a cache on disk keyed by the source, the options, NVRTC's version and the
 * architecture makes the second compile of a model free. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nvrtc.h>

#include "base/disk_cache.h"
#include "base/hash.h"
#include "codegen/cuda/cuda.h"
#include "codegen/cuda/libs.h"

/* The entry points coil uses, resolved once per process (pthread_once: they never
 * change, so this is the one piece of global state, and it is immutable after). */
typedef struct Nvrtc {
    void *lib;
    const char *why; /* why it is unavailable, or NULL */
    nvrtcResult (*version)(int *, int *);
    nvrtcResult (*create)(nvrtcProgram *, const char *, const char *, int, const char *const *,
                          const char *const *);
    nvrtcResult (*destroy)(nvrtcProgram *);
    nvrtcResult (*compile)(nvrtcProgram, int, const char *const *);
    nvrtcResult (*log_size)(nvrtcProgram, size_t *);
    nvrtcResult (*log)(nvrtcProgram, char *);
    nvrtcResult (*cubin_size)(nvrtcProgram, size_t *);
    nvrtcResult (*cubin)(nvrtcProgram, char *);
    nvrtcResult (*ptx_size)(nvrtcProgram, size_t *);
    nvrtcResult (*ptx)(nvrtcProgram, char *);
    const char *(*error_string)(nvrtcResult);
    int major, minor;
    char path[4096];   /* the libnvrtc opened */
    void *builtins;    /* libnvrtc-builtins, preloaded from libnvrtc's folder (or NULL) */
} Nvrtc;

static Nvrtc nv;
static pthread_once_t nv_once = PTHREAD_ONCE_INIT;

static void *sym(const char *name)
{
    void *f = dlsym(nv.lib, name);
    if (!f && !nv.why)
        nv.why = "libnvrtc lacks an entry point coil needs (too old a CUDA toolkit?)";
    return f;
}

/* NVRTC opens libnvrtc-builtins.so.<major>.<minor> by name when it compiles, so a libnvrtc
 * found outside the loader's path (the toolkit's lib64, a Python wheel) would fail every
 * compile. Loaded here from libnvrtc's own folder, the builtins are already in the process
 * when NVRTC asks for them by that name (the loader matches it against their soname). */
static void preload_builtins(void)
{
    char dir[4096], file[4400];
    if (!cuda_lib_origin(nv.lib, dir, sizeof dir))
        return;
    snprintf(file, sizeof file, "%s/libnvrtc-builtins.so.%d.%d", dir, nv.major, nv.minor);
    if (access(file, R_OK) == 0)
        nv.builtins = dlopen(file, RTLD_NOW | RTLD_GLOBAL);
}

static void nv_open(void)
{
    static const char *const names[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so", NULL};
    nv.lib = cuda_lib_open("COIL_LIBNVRTC", names, nv.path, sizeof nv.path);
    if (!nv.lib) {
        nv.why = "libnvrtc.so was not found in the loader's path, the CUDA toolkit's lib64 or "
                 "Python's nvidia packages (install the CUDA toolkit, or add its lib64 to "
                 "LD_LIBRARY_PATH)";
        return;
    }
    nv.version = sym("nvrtcVersion");
    nv.create = sym("nvrtcCreateProgram");
    nv.destroy = sym("nvrtcDestroyProgram");
    nv.compile = sym("nvrtcCompileProgram");
    nv.log_size = sym("nvrtcGetProgramLogSize");
    nv.log = sym("nvrtcGetProgramLog");
    nv.cubin_size = sym("nvrtcGetCUBINSize");
    nv.cubin = sym("nvrtcGetCUBIN");
    nv.ptx_size = sym("nvrtcGetPTXSize");
    nv.ptx = sym("nvrtcGetPTX");
    nv.error_string = sym("nvrtcGetErrorString");
    if (nv.why)
        return;
    nv.version(&nv.major, &nv.minor);
    preload_builtins();
}

bool nvrtc_available(const char **why)
{
    pthread_once(&nv_once, nv_open);
    if (why)
        *why = nv.why;
    return nv.why == NULL;
}

const char *nvrtc_version(char *buf, size_t n)
{
    if (nvrtc_available(NULL))
        snprintf(buf, n, "%d.%d", nv.major, nv.minor);
    else
        snprintf(buf, n, "none");
    return buf;
}

const char *nvrtc_library(void)
{
    return nvrtc_available(NULL) ? nv.path : NULL;
}

void cubin_free(Cubin *c)
{
    free(c->data);
    memset(c, 0, sizeof *c);
}

/* ---------------------------------------------------------------- the cache */

/* A short tag for what was compiled, naming the file a failed source is kept in. */
static uint64_t source_tag(const char *source, const char *const *opts, int nopt)
{
    uint64_t h = fnv1a(FNV1A_OFFSET, source, strlen(source) + 1);
    for (int i = 0; i < nopt; i++)
        h = fnv1a(h, opts[i], strlen(opts[i]) + 1);
    int v[2] = {nv.major, nv.minor};
    return fnv1a(h, v, sizeof v);
}

/* The cubin cache's key: the same inputs as source_tag's, as a SHA-256. */
static void cubin_key(const char *source, const char *const *opts, int nopt, char key[SHA256_HEX])
{
    Sha256 s;
    sha256_init(&s);
    sha256_update(&s, "coil cubin\n", 11);
    sha256_update(&s, source, strlen(source) + 1);
    for (int i = 0; i < nopt; i++)
        sha256_update(&s, opts[i], strlen(opts[i]) + 1);
    int v[2] = {nv.major, nv.minor};
    sha256_update(&s, v, sizeof v);
    sha256_hex(&s, key);
}

bool cubin_read(const char *path, Cubin *out, Err *e)
{
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    long n = -1;
    if (f && fseek(f, 0, SEEK_END) == 0)
        n = ftell(f);
    char *data = f && n > 4 && fseek(f, 0, SEEK_SET) == 0 ? malloc((size_t)n) : NULL;
    bool ok = data && fread(data, 1, (size_t)n, f) == (size_t)n && memcmp(data, "\177ELF", 4) == 0;
    if (f)
        fclose(f);
    if (!ok) {
        free(data);
        err_set(e, ERR_INPUT, "%s: cannot read a cubin (missing, or not an ELF object)", path);
        return false;
    }
    *out = (Cubin){data, (size_t)n, true, 0};
    return true;
}

/* ---------------------------------------------------------------- compiling */

/* The source that failed, kept where the message says. */
static void report_failure(nvrtcProgram prog, const char *source, const char *name, uint64_t key,
                           nvrtcResult r, Err *e)
{
    size_t n = 0;
    char *log = NULL;
    if (nv.log_size(prog, &n) == NVRTC_SUCCESS && (log = malloc(n + 1)))
        nv.log(prog, log);
    char path[512];
    const char *tmpdir = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/coil-nvrtc-%016llx.cu", tmpdir && *tmpdir ? tmpdir : "/tmp",
             (unsigned long long)key);
    FILE *f = fopen(path, "w");
    bool kept = f && fputs(source, f) >= 0;
    if (f)
        fclose(f);
    err_set(e, ERR_INPUT, "nvrtc: %s: %s (%s%s): %.600s", name, nv.error_string(r),
            kept ? "source written to " : "could not write the source", kept ? path : "",
            log ? log : "");
    free(log);
}

static void options(const CudaCompileOptions *o, char *arch, size_t n, const char **opts, int *nopt)
{
    snprintf(arch, n, "--gpu-architecture=%s", o->arch ? o->arch : "sm_80");
    opts[0] = arch;
    opts[1] = "--std=c++17";
    opts[2] = "-default-device";
    opts[3] = o->no_fmad ? "--fmad=false" : "--fmad=true";
    *nopt = 4;
    /* ptxas's most expensive optimisations off unless asked for: three times faster, and
     * the fused kernels are memory-bound; an NVRTC before 12.8 does not know the flag */
    if (!o->full_opt && (nv.major > 12 || (nv.major == 12 && nv.minor >= 8)))
        opts[(*nopt)++] = "--Ofast-compile=min";
}

/* Compile; out gets the cubin (ptx false) or PTX text (ptx true). */
static bool run_nvrtc(const char *source, const char *name, const char *const *opts, int nopt,
                      uint64_t key, bool ptx, char **out, size_t *size, Err *e)
{
    nvrtcProgram prog;
    nvrtcResult r = nv.create(&prog, source, name, 0, NULL, NULL);
    if (r != NVRTC_SUCCESS) {
        err_set(e, ERR_INPUT, "nvrtc: %s: %s", name, nv.error_string(r));
        return false;
    }
    r = nv.compile(prog, nopt, opts);
    if (r != NVRTC_SUCCESS) {
        report_failure(prog, source, name, key, r, e);
        nv.destroy(&prog);
        return false;
    }
    r = ptx ? nv.ptx_size(prog, size) : nv.cubin_size(prog, size);
    *out = r == NVRTC_SUCCESS ? malloc(*size + 1) : NULL;
    if (*out)
        r = ptx ? nv.ptx(prog, *out) : nv.cubin(prog, *out);
    nv.destroy(&prog);
    if (!*out || r != NVRTC_SUCCESS) {
        free(*out);
        err_set(e, ERR_INPUT, "nvrtc: %s: cannot read the %s: %s", name, ptx ? "PTX" : "cubin",
                *out ? nv.error_string(r) : "out of memory");
        return false;
    }
    return true;
}

bool nvrtc_compile(const char *source, const char *name, const CudaCompileOptions *o, Cubin *out,
                   Err *e)
{
    memset(out, 0, sizeof *out);
    const char *why;
    if (!nvrtc_available(&why)) {
        err_set(e, ERR_INPUT, "cannot compile CUDA kernels: %s", why);
        return false;
    }
    char arch[64], key[SHA256_HEX];
    const char *opts[8];
    int nopt;
    options(o, arch, sizeof arch, opts, &nopt);
    cubin_key(source, opts, nopt, key);
    DiskCache cache;
    bool cached = disk_cache_open(&cache, o->cache_dir, "cubin", "cubin");
    void *hit;
    size_t size;
    if (cached && disk_cache_get(&cache, key, &hit, &size)) {
        *out = (Cubin){hit, size, true, 0};
        return true;
    }
    double t0 = clock_seconds();
    char *data;
    if (!run_nvrtc(source, name, opts, nopt, source_tag(source, opts, nopt), false, &data, &size, e))
        return false;
    *out = (Cubin){data, size, false, clock_seconds() - t0};
    if (cached)
        disk_cache_put(&cache, key, data, size);
    return true;
}

char *nvrtc_ptx(const char *source, const char *name, const CudaCompileOptions *o, Err *e)
{
    const char *why;
    if (!nvrtc_available(&why)) {
        err_set(e, ERR_INPUT, "cannot compile CUDA kernels: %s", why);
        return NULL;
    }
    char arch[64], *text;
    const char *opts[8];
    int nopt;
    size_t size;
    options(o, arch, sizeof arch, opts, &nopt);
    if (!run_nvrtc(source, name, opts, nopt, source_tag(source, opts, nopt), true, &text, &size, e))
        return NULL;
    text[size] = 0;
    return text;
}
