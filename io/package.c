/* package.c — writing and loading ahead-of-time packages (package.h). The manifest
 * records the format, coil's version and every file's size and SHA-256, and carries a
 * checksum of itself; loading checks all of it before anything is parsed or mapped, then
 * that the graph lowers to the loop program the kernels came from. The object itself
 * carries the program's hash and the CPU features its code uses (codegen/cpu checks
 * those), so a damaged package, or one from another machine or coil, is refused, never run. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fileio.h"
#include "base/json.h"
#include "base/sha256.h"
#include "base/version.h"
#include "codegen/cuda/cuda.h"
#include "io/package.h"
#include "passes/passes.h"
#include "runtime/device.h"

#define MANIFEST "manifest.json"
/* The manifest's own checksum: the last member, over every byte of the lines before it. */
#define MANIFEST_DIGEST "manifest_sha256"
#define MAX_FILES 16   /* a package holds at most 8 today */
#define FILE_NAME 64

/* One file of a package as the manifest lists it. */
typedef struct PackageFile {
    char name[FILE_NAME];
    int64_t bytes;
    char sha256[SHA256_HEX];
} PackageFile;

typedef struct FileList {
    PackageFile file[MAX_FILES];
    int n;
} FileList;

static void path_in(char *buf, size_t n, const char *dir, const char *file)
{
    snprintf(buf, n, "%s/%s", dir, file);
}

/* Any directory: one named as a model is meant as a package, and loading it says what is
 * missing (no manifest) instead of the file system's "Is a directory". */
bool package_is(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* ---------------------------------------------------------------- writing */

/* The checksum of dir/file as written, for the manifest. */
static bool record(const char *dir, const char *file, FileList *out, Err *e)
{
    char path[4096];
    path_in(path, sizeof path, dir, file);
    if (out->n == MAX_FILES) {
        err_set(e, ERR_INPUT, "%s: more than %d files in a package", path, MAX_FILES);
        return false;
    }
    PackageFile *f = &out->file[out->n];
    snprintf(f->name, sizeof f->name, "%s", file);
    if (!sha256_file(path, f->sha256, &f->bytes, e))
        return false;
    out->n++;
    return true;
}

/* bytes as dir/file, whole or not at all, and listed for the manifest. */
static bool put_bytes(const char *dir, const char *file, const void *data, size_t n,
                      FileList *out, Err *e)
{
    char path[4096];
    path_in(path, sizeof path, dir, file);
    return file_write_atomic(path, data, n, e) && record(dir, file, out, e);
}

/* text (allocated by the caller, freed here; NULL: out of memory) as dir/file. */
static bool put_text(const char *dir, const char *file, char *text, FileList *out, Err *e)
{
    if (!text) {
        if (err_ok(e))
            err_set(e, ERR_MEMORY, "out of memory writing %s/%s", dir, file);
        return false;
    }
    bool ok = put_bytes(dir, file, text, strlen(text), out, e);
    free(text);
    return ok;
}

/* The kernels' files of a package, per kind of device, in the manifest's order: what the
 * device's emit writes for each (runtime/device.h), under which name ("%s": the GPU's
 * architecture), and the --emit item that asks for an optional one. */
typedef struct KernelFile {
    const char *form, *name, *optional;
} KernelFile;

static const KernelFile cpu_files[] = {
    {"obj", "kernels.o", NULL}, {"llvm-ir", "kernels.ll", "llvm-ir"}, {"asm", "kernels.s", "asm"}};
static const KernelFile gpu_files[] = {
    {"cu", "kernels.cu", NULL}, {"cubin", "kernels.%s.cubin", NULL}, {"ptx", "kernels.%s.ptx", "ptx"}};

static const KernelFile *kernel_files(const Device *dev, int *n)
{
    *n = dev->gpu ? (int)(sizeof gpu_files / sizeof *gpu_files)
                  : (int)(sizeof cpu_files / sizeof *cpu_files);
    return dev->gpu ? gpu_files : cpu_files;
}

static void kernel_file_name(const KernelFile *k, const char *target, char *out, size_t n)
{
    snprintf(out, n, k->name, target);
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
        err_set(e, ERR_MEMORY, "out of memory writing the plan");
    return json;
}

/* The manifest: what the package is for, every file's size and SHA-256, then its own
 * checksum over the lines before it, so no byte of it can change unnoticed. device: "cpu"
 * (target: the CPU LLVM compiled for) or "cuda" (target: the arch). */
static char *manifest_json(const Graph *g, const char *device, const char *target,
                           bool no_fusion, const FileList *files)
{
    char *text = NULL, digest[SHA256_HEX];
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return NULL;
    fprintf(f, "{\n  \"format\": %d,\n  \"coil\": \"%s\",\n  \"model\": ", PACKAGE_FORMAT,
            COIL_VERSION_TEXT);
    json_write_string(f, g->name);
    fprintf(f, ",\n  \"device\": \"%s\",\n  \"target\": ", device);
    json_write_string(f, target);
    fprintf(f, ",\n  \"no_fusion\": %s,\n  \"files\": {\n", no_fusion ? "true" : "false");
    for (int i = 0; i < files->n; i++)
        fprintf(f, "    \"%s\": {\"bytes\": %lld, \"sha256\": \"%s\"}%s\n", files->file[i].name,
                (long long)files->file[i].bytes, files->file[i].sha256,
                i + 1 < files->n ? "," : "");
    fputs("  },\n", f);
    fflush(f); /* text and len now hold what is above the checksum's line */
    sha256_of(text, len, digest);
    fprintf(f, "  \"%s\": \"%s\"\n}\n", MANIFEST_DIGEST, digest);
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

static bool put_manifest(const char *dir, char *text, Err *e)
{
    char path[4096];
    path_in(path, sizeof path, dir, MANIFEST);
    bool ok = text ? file_write_atomic(path, text, strlen(text), e)
                   : (err_set(e, ERR_MEMORY, "out of memory writing %s", path), false);
    free(text);
    return ok;
}

/* The directory, without its old manifest: until the new one is written last, readers
 * find no package rather than an old manifest over new files. */
static bool start_package(const char *dir, Err *e)
{
    char path[4096];
    path_in(path, sizeof path, dir, MANIFEST);
    if (!make_dir(dir, "package", e))
        return false;
    if (unlink(path) != 0 && errno != ENOENT) {
        err_set(e, ERR_INPUT, "%s: cannot replace the old manifest: %s", path, strerror(errno));
        return false;
    }
    return true;
}

/* An architecture names files of the package (kernels.ARCH.cubin): letters, digits, '_'. */
static bool target_ok(const char *target, Err *e)
{
    size_t n = strspn(target, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_");
    if (n > 0 && target[n] == 0 && n < 32)
        return true;
    err_set(e, ERR_USAGE, "--arch %s: expected an architecture such as sm_90a", target);
    return false;
}

/* The device's kernels files, each written by its emit (atomically) and listed. */
static bool put_kernels(const char *dir, const Device *dev, const Program *p,
                        const EmitRequest *er, const char *target, const PackageOptions *po,
                        double *codegen_s, FileList *files, Err *e)
{
    int n;
    const KernelFile *k = kernel_files(dev, &n);
    for (int i = 0; i < n; i++) {
        if (k[i].optional && !list_has(po->emit, k[i].optional))
            continue;
        char file[FILE_NAME], path[4096];
        double seconds = 0;
        kernel_file_name(&k[i], target, file, sizeof file);
        path_in(path, sizeof path, dir, file);
        if (!dev->ops->emit(p, er, k[i].form, path, &seconds, e) || !record(dir, file, files, e))
            return false;
        *codegen_s += seconds;
    }
    return true;
}

bool package_write_program(const char *dir, const Device *dev, const Graph *g,
                           const Program *p, const EmitRequest *er, bool no_fusion,
                           const PackageOptions *po, double *codegen_s, Err *e)
{
    static const PackageOptions none = {0};
    po = po ? po : &none;
    *codegen_s = 0;
    FileList files = {.n = 0};
    if (!dev->ops) { /* not in this build; a GPU itself is not needed */
        err_set(e, ERR_INPUT, "cannot compile for %s: %s", dev->name, dev->absent);
        return false;
    }
    const char *target = dev->gpu ? er->arch : er->cpu.cpu ? er->cpu.cpu : "host";
    return (!dev->gpu || target_ok(target, e)) && start_package(dir, e) &&
           put_text(dir, "model.cir", ir_print(g), &files, e) &&
           put_text(dir, "program.loop", loop_print(p), &files, e) &&
           put_text(dir, "plan.json", plan_json(p, po->sb, e), &files, e) &&
           put_kernels(dir, dev, p, er, target, po, codegen_s, &files, e) &&
           put_manifest(dir, manifest_json(g, dev->name, target, no_fusion, &files), e);
}

bool package_write(const char *dir, const Compiled *c, const CompileOptions *o,
                   const PackageOptions *po, Err *e)
{
    EmitRequest er = {.cpu = o->cpu, .full_opt = po && po->full_opt};
    double ignore;
    return package_write_program(dir, c->device, c->g, c->p, &er, o->no_fusion, po, &ignore, e);
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
        err_set(e, ERR_FILE, "%s: cannot read: %s", path, f ? "read error" : strerror(errno));
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    *len = n;
    return buf;
}

typedef struct Manifest {
    char model[256];
    char device[16], target[64]; /* "cpu" and the CPU, or "cuda" and the arch */
    bool no_fusion;
    FileList files;
} Manifest;

/* Format and version first: a package of another coil says so before anything else. */
static bool check_origin(const Json *m, const char *path, Err *e)
{
    const Json *fmt = json_get(m, "format"), *v = json_get(m, "coil");
    if (m->kind != JSON_OBJECT || !fmt || !fmt->is_int) {
        err_set(e, ERR_INPUT, "%s: not a coil package's manifest (no \"format\")", path);
        return false;
    }
    if (fmt->i != PACKAGE_FORMAT) {
        err_set(e, ERR_INPUT, "%s: a package of format %lld, this coil reads format %d%s: "
                "compile the model again", path, (long long)fmt->i, PACKAGE_FORMAT,
                fmt->i == 1 ? " (format 1 carried no checksums)" : "");
        return false;
    }
    if (!v || v->kind != JSON_STRING) {
        err_set(e, ERR_INPUT, "%s: \"coil\" is missing or not a string", path);
        return false;
    }
    if (strcmp(v->s, COIL_VERSION_TEXT) != 0) {
        err_set(e, ERR_INPUT, "%s: written by coil %s, this is coil %s: compile the model again",
                path, v->s, COIL_VERSION_TEXT);
        return false;
    }
    return true;
}

/* The manifest's checksum against the bytes of the lines above its own. */
static bool check_self_digest(const char *text, const Json *m, const char *path, Err *e)
{
    const Json *d = json_get(m, MANIFEST_DIGEST);
    if (!d || d->kind != JSON_STRING) {
        err_set(e, ERR_INPUT, "%s: has no \"%s\": not written by `coil compile`; compile the "
                "model again", path, MANIFEST_DIGEST);
        return false;
    }
    size_t line = d->at;
    while (line > 0 && text[line - 1] != '\n')
        line--;
    char hex[SHA256_HEX];
    sha256_of(text, line, hex);
    if (strcmp(hex, d->s) != 0) {
        err_set(e, ERR_INPUT, "%s: changed or damaged after `coil compile` wrote it (its \"%s\" "
                "does not match its contents): compile the model again", path, MANIFEST_DIGEST);
        return false;
    }
    return true;
}

static const char *const manifest_keys[] = {"format", "coil", "model", "device", "target",
                                            "no_fusion", "files", MANIFEST_DIGEST};

static bool check_keys(const Json *m, const char *path, Err *e)
{
    for (int i = 0; i < m->n; i++) {
        bool known = false;
        for (size_t k = 0; k < sizeof manifest_keys / sizeof *manifest_keys; k++)
            known |= strcmp(m->key[i], manifest_keys[k]) == 0;
        if (!known) {
            err_set(e, ERR_INPUT, "%s: unknown field \"%s\": compile the model again", path,
                    m->key[i]);
            return false;
        }
    }
    return true;
}

static bool get_string(const Json *m, const char *key, const char *path, char *out, size_t n,
                       Err *e)
{
    const Json *v = json_get(m, key);
    if (!v || v->kind != JSON_STRING || v->slen >= n) {
        err_set(e, ERR_INPUT, "%s: \"%s\" is missing or not a string (of at most %zu bytes)",
                path, key, n - 1);
        return false;
    }
    memcpy(out, v->s, v->slen + 1);
    return true;
}

/* A file name of the package's own: no directories, no dot files, no manifest. */
static bool plain_name(const char *s)
{
    size_t n = strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-");
    return n > 0 && s[n] == 0 && n < FILE_NAME && s[0] != '.' && strcmp(s, MANIFEST) != 0;
}

static bool read_entry(const char *name, const Json *v, const char *path, PackageFile *f, Err *e)
{
    const Json *bytes = v->kind == JSON_OBJECT ? json_get(v, "bytes") : NULL;
    const Json *sha = v->kind == JSON_OBJECT ? json_get(v, "sha256") : NULL;
    if (!plain_name(name) || v->kind != JSON_OBJECT || v->n != 2 || !bytes || !bytes->is_int ||
        bytes->i < 0 || !sha || sha->kind != JSON_STRING || !sha256_is_hex(sha->s)) {
        err_set(e, ERR_INPUT, "%s: \"files\": entry \"%.64s\" is not a file name with "
                "{\"bytes\": N, \"sha256\": HEX}: compile the model again", path, name);
        return false;
    }
    snprintf(f->name, sizeof f->name, "%s", name);
    f->bytes = bytes->i;
    memcpy(f->sha256, sha->s, SHA256_HEX);
    return true;
}

static const PackageFile *listed(const Manifest *m, const char *name)
{
    for (int i = 0; i < m->files.n; i++)
        if (strcmp(m->files.file[i].name, name) == 0)
            return &m->files.file[i];
    return NULL;
}

static bool require(const Manifest *m, const char *name, const char *path, Err *e)
{
    if (listed(m, name))
        return true;
    err_set(e, ERR_INPUT, "%s: \"files\" lacks %s: compile the model again", path, name);
    return false;
}

/* Every file a package of this device loads must be listed. */
static bool check_required(const Manifest *m, const char *path, Err *e)
{
    static const char *const common[] = {"model.cir", "program.loop", "plan.json"};
    for (size_t i = 0; i < sizeof common / sizeof *common; i++)
        if (!require(m, common[i], path, e))
            return false;
    int n;
    const KernelFile *k = kernel_files(device_find(m->device), &n); /* check_manifest found it */
    for (int i = 0; i < n; i++) {
        char file[FILE_NAME + 64];
        kernel_file_name(&k[i], m->target, file, sizeof file);
        if (!k[i].optional && !require(m, file, path, e))
            return false;
    }
    return true;
}

static bool check_manifest(const Json *m, const char *path, Manifest *out, Err *e)
{
    const Json *nf = json_get(m, "no_fusion"), *files = json_get(m, "files");
    if (!check_keys(m, path, e) || !get_string(m, "model", path, out->model, sizeof out->model, e) ||
        !get_string(m, "device", path, out->device, sizeof out->device, e) ||
        !get_string(m, "target", path, out->target, sizeof out->target, e))
        return false;
    if (!device_find(out->device)) {
        err_set(e, ERR_INPUT, "%s: \"device\" is \"%s\": expected %s", path, out->device,
                device_names());
        return false;
    }
    if (!plain_name(out->target)) {
        err_set(e, ERR_INPUT, "%s: \"target\" \"%s\" is not a CPU or GPU architecture", path,
                out->target);
        return false;
    }
    if (!nf || nf->kind != JSON_BOOL || !files || files->kind != JSON_OBJECT ||
        files->n > MAX_FILES) {
        err_set(e, ERR_INPUT, "%s: \"no_fusion\" must be true or false and \"files\" an object "
                "of at most %d files", path, MAX_FILES);
        return false;
    }
    out->no_fusion = nf->b;
    out->files.n = 0;
    for (int i = 0; i < files->n; i++)
        if (!read_entry(files->key[i], &files->item[i], path, &out->files.file[out->files.n++], e))
            return false;
    return check_required(out, path, e);
}

/* dir/file read whole and held against the manifest's size and SHA-256; *data (when asked
 * for) keeps the bytes that were checked, so what is parsed is what was verified. */
static bool verify_file(const char *dir, const PackageFile *pf, char **data, size_t *len, Err *e)
{
    char path[4096], hex[SHA256_HEX], why[160];
    size_t n = 0;
    struct stat st;
    path_in(path, sizeof path, dir, pf->name);
    if (stat(path, &st) != 0) {
        err_set(e, ERR_INPUT, "%s: missing, though the package's manifest lists it: compile the "
                "model again", path);
        return false;
    }
    char *bytes = read_file(path, &n, e);
    if (!bytes)
        return false;
    if ((int64_t)n != pf->bytes)
        snprintf(why, sizeof why, "%zu bytes, the manifest says %lld", n, (long long)pf->bytes);
    else if (sha256_of(bytes, n, hex), strcmp(hex, pf->sha256) != 0)
        snprintf(why, sizeof why, "SHA-256 %.16s..., the manifest says %.16s...", hex, pf->sha256);
    else
        why[0] = 0;
    if (why[0]) {
        const char *ext = strrchr(pf->name, '.') ? strrchr(pf->name, '.') : "";
        const char *kind = strcmp(ext, ".o") == 0 ? "not a loadable object: "
                           : strcmp(ext, ".cubin") == 0 ? "not a loadable cubin: " : "";
        err_set(e, ERR_INPUT, "%s: error: %sit differs from what `coil compile` wrote (%s): the "
                "package was changed or damaged; compile the model again", path, kind, why);
        free(bytes);
        return false;
    }
    if (data)
        *data = bytes, *len = n;
    else
        free(bytes);
    return true;
}

static bool verify_files(const char *dir, const Manifest *m, Err *e)
{
    for (int i = 0; i < m->files.n; i++)
        if (!verify_file(dir, &m->files.file[i], NULL, NULL, e))
            return false;
    return true;
}

/* The manifest, checked whole, and every file it lists checked against it: nothing of a
 * package is parsed, mapped or loaded before this. */
static bool read_manifest(const char *dir, Manifest *out, Err *e)
{
    char path[4096];
    size_t len;
    struct stat st;
    path_in(path, sizeof path, dir, MANIFEST);
    if (stat(path, &st) != 0) {
        err_set(e, ERR_INPUT, "%s: a directory, but not a coil package: it has no %s (`coil "
                "compile MODEL -o %s` writes one)", dir, MANIFEST, dir);
        return false;
    }
    char *text = read_file(path, &len, e);
    Arena *a = text ? arena_new() : NULL;
    const Json *m = a ? json_parse(a, text, len, path, e) : NULL;
    bool ok = m && check_origin(m, path, e) && check_self_digest(text, m, path, e) &&
              check_manifest(m, path, out, e) && verify_files(dir, out, e);
    arena_free(a);
    free(text);
    return ok;
}

Graph *package_graph(const char *dir, Err *e)
{
    Manifest m;
    char path[4096], *text = NULL;
    size_t len = 0;
    path_in(path, sizeof path, dir, "model.cir");
    if (!read_manifest(dir, &m, e) || !verify_file(dir, listed(&m, "model.cir"), &text, &len, e))
        return NULL;
    Graph *g = ir_parse(text, len, path, e);
    free(text);
    if (g && strcmp(g->name, m.model) != 0) {
        err_set(e, ERR_INPUT, "%s: holds @%s, the manifest says @%s: compile the model again",
                path, g->name, m.model);
        graph_free(g);
        return NULL;
    }
    return g;
}

/* The loop program this coil lowers the package's graph to must be the one its kernels
 * were compiled from (program.loop, as the manifest's checksum records it). */
static bool same_program(const char *dir, const Manifest *m, const Program *p, Err *e)
{
    char *text = loop_print(p), hex[SHA256_HEX];
    if (!text) {
        err_set(e, ERR_MEMORY, "out of memory");
        return false;
    }
    sha256_of(text, strlen(text), hex);
    free(text);
    const char *want = listed(m, "program.loop")->sha256;
    if (strcmp(hex, want) == 0)
        return true;
    err_set(e, ERR_INPUT, "%s: the kernels were compiled from another loop program (SHA-256 "
            "%.16s..., this model lowers to %.16s...): compile the model again", dir, want, hex);
    return false;
}

Compiled *package_load(const char *dir, const Graph *g, const CompileOptions *o, Err *e)
{
    Manifest m;
    char object[4096], cubin_name[FILE_NAME + 64];
    /* checked again here, just before the code is mapped or the cubin loaded */
    if (!read_manifest(dir, &m, e))
        return NULL;
    const Device *want = o->device ? o->device : device_cpu(), *made = device_find(m.device);
    if (made != want) {
        err_set(e, ERR_INPUT, "%s: compiled for %s (%s), not for %s: run it with --device %s, "
                "or compile the model again", dir, m.device, m.target, want->name, m.device);
        return NULL;
    }
    CompileOptions lo = *o;
    lo.no_fusion = m.no_fusion;
    lo.no_llvm = false;
    if (made->gpu) {
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
    if (c && !same_program(dir, &m, c->p, e)) {
        compiled_free(c);
        return NULL;
    }
    return c;
}
