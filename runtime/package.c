/* package.c — writing and loading ahead-of-time packages (package.h). The manifest
 * records the format, coil's version and a hash of the loop IR the kernels were compiled
 * from; loading checks them, and the object itself carries the program's hash and the CPU
 * features its code uses (codegen/cpu checks those), so a package from another machine or
 * another coil is refused, never run. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "passes/passes.h"
#include "runtime/init.h"
#include "runtime/json.h"
#include "codegen/cuda/cuda.h"
#include "runtime/package.h"

#define COIL_VERSION_TEXT "0.1.0"

static void path_in(char *buf, size_t n, const char *dir, const char *file)
{
    snprintf(buf, n, "%s/%s", dir, file);
}

bool package_is(const char *path)
{
    struct stat st;
    char manifest[4096];
    path_in(manifest, sizeof manifest, path, "manifest.json");
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode) && stat(manifest, &st) == 0;
}

/* ---------------------------------------------------------------- writing */

/* Write text to dir/file through a temporary name and a rename. */
static bool write_file(const char *dir, const char *file, const char *text, Err *e)
{
    char path[4096], tmp[4200];
    path_in(path, sizeof path, dir, file);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    bool ok = f && fputs(text, f) >= 0;
    ok = f && fclose(f) == 0 && ok;
    if (ok && rename(tmp, path) != 0)
        ok = false;
    if (!ok) {
        err_set(e, ERR_INPUT, "%s: cannot write: %s", path, strerror(errno));
        remove(tmp);
    }
    return ok;
}

static bool make_dir(const char *dir, Err *e)
{
    struct stat st;
    if (mkdir(dir, 0777) == 0 || (errno == EEXIST && stat(dir, &st) == 0 && S_ISDIR(st.st_mode)))
        return true;
    err_set(e, ERR_INPUT, "%s: cannot create the package directory: %s", dir,
            errno == EEXIST ? "a file is in the way" : strerror(errno));
    return false;
}

/* The object (and what --emit asks for) through a temporary name, then renamed. */
static bool emit_file(const Compiled *c, const CompileOptions *o, const char *dir,
                      const char *what, const char *file, Err *e)
{
    char path[4096], tmp[4200];
    path_in(path, sizeof path, dir, file);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (!cpu_emit(c->p, &o->cpu, what, tmp, e))
        return false;
    if (rename(tmp, path) != 0) {
        err_set(e, ERR_INPUT, "%s: cannot write: %s", path, strerror(errno));
        remove(tmp);
        return false;
    }
    return true;
}

static bool list_has(const char *list, const char *item)
{
    size_t n = strlen(item);
    for (const char *p = list; p && *p; p += strcspn(p, ","), p += *p == ',')
        if (strncmp(p, item, n) == 0 && (p[n] == ',' || p[n] == 0))
            return true;
    return false;
}

static const char *const kind_name[] = {"input", "param", "output", "const", "temp"};

/* The buffers with their lifetimes and, at the given sizes, the arena offsets. */
static char *plan_json(const Program *p, const SymBind *sb, Err *e)
{
    MemoryPlan mp = {0};
    bool placed = sb && plan_memory(p, sb, &mp, e);
    Text t = {0};
    text_put(&t, "{\n  \"arena_bytes\": ");
    text_put(&t, placed ? "%lld" : "null", (long long)mp.arena_bytes);
    text_put(&t, ",\n  \"buffers\": [\n");
    for (int b = 0; b < p->nbuf; b++) {
        const Buffer *buf = &p->buf[b];
        char numel[128];
        dim_fmt(p->graph, buf->numel, numel, sizeof numel);
        text_put(&t, "    {\"name\": \"%s\", \"kind\": \"%s\", \"dtype\": \"%s\", \"numel\": \"%s\"",
            buf->name, kind_name[buf->kind], dtype_info[buf->dt].name, numel);
        if (buf->kind == BUF_TEMP)
            text_put(&t, ", \"steps\": [%d, %d]", buf->first, buf->last);
        if (placed && buf->kind == BUF_TEMP)
            text_put(&t, ", \"offset\": %lld", (long long)mp.offset[b]);
        text_put(&t, "}%s\n", b + 1 < p->nbuf ? "," : "");
    }
    text_put(&t, "  ]\n}\n");
    plan_free(&mp);
    char *json = text_take(&t);
    if (!json)
        err_set(e, ERR_INPUT, "out of memory writing the plan");
    return json;
}

static uint64_t program_hash(const Program *p)
{
    char *text = loop_print(p);
    uint64_t h = text ? init_stream(text) : 0;
    free(text);
    return h;
}

/* device: "cpu" (target: the CPU name LLVM compiled for) or "cuda" (target: the arch). */
static char *manifest_json(const Graph *g, const Program *p, const char *device,
                           const char *target, bool no_fusion)
{
    Text t = {0};
    text_put(&t, "{\n  \"format\": %d,\n  \"coil\": \"%s\",\n  \"model\": \"%s\",\n",
             PACKAGE_FORMAT, COIL_VERSION_TEXT, g->name);
    text_put(&t, "  \"device\": \"%s\",\n  \"target\": \"%s\",\n  \"no_fusion\": %s,\n", device,
             target, no_fusion ? "true" : "false");
    text_put(&t, "  \"loop_ir_fnv1a\": \"%016llx\",\n  \"kernels\": %d,\n  \"steps\": %d\n}\n",
             (unsigned long long)program_hash(p), p->nkernel, p->nstep);
    return text_take(&t);
}

static bool write_text(const char *dir, const char *file, char *text, Err *e)
{
    if (!text) {
        if (err_ok(e))
            err_set(e, ERR_INPUT, "out of memory writing %s/%s", dir, file);
        return false;
    }
    bool ok = write_file(dir, file, text, e);
    free(text);
    return ok;
}

bool package_write(const char *dir, const Compiled *c, const CompileOptions *o,
                   const PackageOptions *po, Err *e)
{
    static const PackageOptions none = {0};
    po = po ? po : &none;
    return make_dir(dir, e) && write_text(dir, "model.cir", ir_print(c->g), e) &&
           write_text(dir, "program.loop", loop_print(c->p), e) &&
           write_text(dir, "plan.json", plan_json(c->p, po->sb, e), e) &&
           emit_file(c, o, dir, "obj", "kernels.o", e) &&
           (!list_has(po->emit, "llvm-ir") || emit_file(c, o, dir, "llvm-ir", "kernels.ll", e)) &&
           (!list_has(po->emit, "asm") || emit_file(c, o, dir, "asm", "kernels.s", e)) &&
           write_text(dir, "manifest.json", /* last: it marks a package */
                      manifest_json(c->g, c->p, "cpu", o->cpu.cpu ? o->cpu.cpu : "host",
                                    o->no_fusion), e);
}

/* A cubin as a file, through a temporary name. */
static bool write_bytes(const char *dir, const char *file, const void *data, size_t n, Err *e)
{
    char path[4096], tmp[4200];
    path_in(path, sizeof path, dir, file);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    bool ok = f && fwrite(data, 1, n, f) == n;
    ok = f && fclose(f) == 0 && ok;
    if (ok && rename(tmp, path) != 0)
        ok = false;
    if (!ok) {
        err_set(e, ERR_INPUT, "%s: cannot write: %s", path, strerror(errno));
        remove(tmp);
    }
    return ok;
}

static bool write_cubin(const char *dir, const char *source, const char *arch, bool full_opt,
                        double *nvrtc_s, Err *e)
{
    CudaCompileOptions co = {.arch = arch, .full_opt = full_opt};
    Cubin c;
    char file[64];
    snprintf(file, sizeof file, "kernels.%s.cubin", arch);
    if (!nvrtc_compile(source, "kernels.cu", &co, &c, e))
        return false;
    *nvrtc_s += c.seconds;
    bool ok = write_bytes(dir, file, c.data, c.size, e);
    cubin_free(&c);
    return ok;
}

static bool write_ptx(const char *dir, const char *source, const char *arch, bool full_opt, Err *e)
{
    CudaCompileOptions co = {.arch = arch, .full_opt = full_opt};
    char file[64];
    snprintf(file, sizeof file, "kernels.%s.ptx", arch);
    return write_text(dir, file, nvrtc_ptx(source, "kernels.cu", &co, e), e);
}

bool package_write_cuda(const char *dir, const Graph *g, const Program *p, const char *arch,
                        bool no_fusion, const PackageOptions *po, double *nvrtc_s, Err *e)
{
    static const PackageOptions none = {0};
    po = po ? po : &none;
    *nvrtc_s = 0;
    char *source = cuda_engine_source(p, e); /* the engine's helpers too: it loads this cubin */
    bool ok = source && make_dir(dir, e) && write_text(dir, "model.cir", ir_print(g), e) &&
              write_text(dir, "program.loop", loop_print(p), e) &&
              write_text(dir, "plan.json", plan_json(p, po->sb, e), e) &&
              write_file(dir, "kernels.cu", source, e) &&
              write_cubin(dir, source, arch, po->full_opt, nvrtc_s, e) &&
              (!list_has(po->emit, "ptx") || write_ptx(dir, source, arch, po->full_opt, e)) &&
              write_text(dir, "manifest.json", manifest_json(g, p, "cuda", arch, no_fusion), e);
    free(source);
    return ok;
}

/* ---------------------------------------------------------------- loading */

static char *read_file(const char *path, size_t *len, Err *e)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t cap = 0, n = 0;
    while (f) {
        if (n + 4096 > cap) {
            char *nb = realloc(buf, cap = cap * 2 + 8192);
            if (!nb)
                break;
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0)
            break;
    }
    bool ok = f && !ferror(f) && buf;
    if (f)
        fclose(f);
    if (!ok) {
        err_set(e, ERR_INPUT, "%s: cannot read: %s", path, f ? "read error" : strerror(errno));
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    *len = n;
    return buf;
}

typedef struct Manifest {
    bool no_fusion;
    char hash[32];
    char device[16], target[64]; /* "cpu" and the CPU, or "cuda" and the arch */
} Manifest;

static bool field_string(const Json *m, const char *key, const char *path, const char **out, Err *e)
{
    const Json *v = json_get(m, key);
    if (!v || v->kind != JSON_STRING) {
        err_set(e, ERR_INPUT, "%s: \"%s\" is missing or not a string", path, key);
        return false;
    }
    *out = v->s;
    return true;
}

static bool check_manifest(const Json *m, const char *path, Manifest *out, Err *e)
{
    const Json *fmt = json_get(m, "format"), *nf = json_get(m, "no_fusion");
    const char *version, *hash;
    if (m->kind != JSON_OBJECT || !fmt || !fmt->is_int || fmt->i != PACKAGE_FORMAT) {
        err_set(e, ERR_INPUT, "%s: not a coil package of format %d", path, PACKAGE_FORMAT);
        return false;
    }
    if (!field_string(m, "coil", path, &version, e) ||
        !field_string(m, "loop_ir_fnv1a", path, &hash, e))
        return false;
    if (strcmp(version, COIL_VERSION_TEXT) != 0) {
        err_set(e, ERR_INPUT, "%s: written by coil %s, this is coil %s: compile the model again",
                path, version, COIL_VERSION_TEXT);
        return false;
    }
    const Json *device = json_get(m, "device"), *target = json_get(m, "target");
    out->no_fusion = nf && nf->kind == JSON_BOOL && nf->b;
    snprintf(out->hash, sizeof out->hash, "%s", hash);
    snprintf(out->device, sizeof out->device, "%s",
             device && device->kind == JSON_STRING ? device->s : "cpu");
    snprintf(out->target, sizeof out->target, "%s",
             target && target->kind == JSON_STRING ? target->s : "host");
    return true;
}

static bool read_manifest(const char *dir, Manifest *out, Err *e)
{
    char path[4096];
    size_t len;
    path_in(path, sizeof path, dir, "manifest.json");
    char *text = read_file(path, &len, e);
    Arena *a = text ? arena_new() : NULL;
    const Json *m = a ? json_parse(a, text, len, path, e) : NULL;
    bool ok = m && check_manifest(m, path, out, e);
    arena_free(a);
    free(text);
    return ok;
}

Graph *package_graph(const char *dir, Err *e)
{
    Manifest m;
    char path[4096];
    path_in(path, sizeof path, dir, "model.cir");
    return read_manifest(dir, &m, e) ? ir_parse_file(path, e) : NULL;
}

Compiled *package_load(const char *dir, const Graph *g, const CompileOptions *o, Err *e)
{
    Manifest m;
    char object[4096], hash[32], cubin_name[128];
    if (!read_manifest(dir, &m, e))
        return NULL;
    const char *want = o->device ? o->device : "cpu";
    if (strcmp(m.device, want) != 0) {
        err_set(e, ERR_INPUT, "%s: compiled for %s (%s), not for %s: run it with --device %s, "
                "or compile the model again", dir, m.device, m.target, want, m.device);
        return NULL;
    }
    CompileOptions lo = *o;
    lo.no_fusion = m.no_fusion;
    lo.no_llvm = false;
    if (strcmp(m.device, "cuda") == 0) {
        snprintf(cubin_name, sizeof cubin_name, "kernels.%s.cubin", m.target);
        path_in(object, sizeof object, dir, cubin_name);
        lo.cuda.cubin = object;
        lo.cuda.cubin_arch = m.target;
    } else {
        path_in(object, sizeof object, dir, "kernels.o");
        lo.object = object;
    }
    Graph *copy = graph_copy(g, e);
    Compiled *c = copy ? compile_optimised(copy, &lo, e) : NULL;
    if (!c)
        return NULL;
    snprintf(hash, sizeof hash, "%016llx", (unsigned long long)program_hash(c->p));
    if (strcmp(hash, m.hash) != 0) {
        err_set(e, ERR_INPUT, "%s: the kernels were compiled from another loop program (hash %s, "
                "this model lowers to %s): compile the model again", dir, m.hash, hash);
        compiled_free(c);
        return NULL;
    }
    return c;
}
