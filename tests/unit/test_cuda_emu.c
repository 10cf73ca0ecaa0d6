/* test_cuda_emu.c — the generated CUDA C++, run without a GPU: every op fixture lowered by
 * the CUDA pipeline (attention as one fused kernel) is written as CUDA C, all of them in
 * one translation unit compiled by the host's C++ compiler with cuda_emu.h (blocks of real
 * threads meeting at barriers: __syncthreads, shared memory and warp shuffles as on a
 * GPU), and run step by step as the CUDA engine runs them (GEMMs by a reference, then
 * their epilogue kernels; the fused attention kernels as they are), then held against the
 * interpreter on the same graph. This checks what the kernels compute; test_cuda_codegen
 * checks NVRTC compiles them, a GPU run checks the rest. Skips when there is no c++. */
#include <dirent.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "codegen/cuda/cuda.h"
#include "codegen/lower.h"
#include "passes/passes.h"
#include "runtime/gemm.h"
#include "runtime/npy.h"

#define FIXTURE_DIR "tests/models/ops"
#define MAX_CASES 256
#define EMU_BLOCK 64

typedef void (*KernelEntry)(void *const *, const long long *);
typedef void (*LaunchFn)(KernelEntry, unsigned, unsigned, unsigned, void *const *,
                         const long long *);

typedef struct Case {
    char name[256];
    Graph *g;
    Program *p;
    Tensor in[16], params[16], want[16];
    int nparam;
} Case;

/* ---------------------------------------------------------------- loading */

static bool load_npy(const char *kase, const char *what, Tensor *t)
{
    char path[1024];
    Err e = {0};
    snprintf(path, sizeof path, "%s/%s.%s.npy", FIXTURE_DIR, kase, what);
    return npy_read(path, t, &e);
}

/* The fixture through the CUDA passes and lowering, its inputs, and the interpreter's
 * outputs on the same graph. */
static bool load_leaves(Case *c)
{
    int ids[16];
    c->nparam = graph_params(c->g, NULL);
    if (c->g->ninput > 16 || c->nparam > 16 || c->g->noutput > 16)
        return false;
    graph_params(c->g, ids);
    for (int i = 0; i < c->g->ninput; i++)
        if (!load_npy(c->name, node_name(&c->g->node[c->g->input[i]]), &c->in[i]))
            return false;
    for (int i = 0; i < c->nparam; i++)
        if (!load_npy(c->name, node_name(&c->g->node[ids[i]]), &c->params[i]))
            return false;
    return true;
}

static bool case_load(Case *c, const char *file)
{
    Err e = {0};
    char path[1024];
    snprintf(c->name, sizeof c->name, "%.*s", (int)(strlen(file) - 4), file);
    snprintf(path, sizeof path, "%s/%s", FIXTURE_DIR, file);
    bool ok = (c->g = ir_parse_file(path, &e)) && run_passes(&c->g, pass_pipeline_cuda, &e) &&
              (c->p = loop_lower(c->g, NULL, &e)) && load_leaves(c) &&
              interp_run(c->g, c->in, c->params, c->want, NULL, &e);
    if (!ok) {
        fprintf(stderr, "%s: %s\n", c->name, e.msg[0] ? e.msg : "cannot load its fixtures");
        check_failures++;
    }
    return ok;
}

static void case_free(Case *c)
{
    for (int i = 0; c->g && i < c->g->ninput; i++)
        tensor_free(&c->in[i]);
    for (int i = 0; i < c->nparam; i++)
        tensor_free(&c->params[i]);
    for (int i = 0; c->g && i < c->g->noutput; i++)
        tensor_free(&c->want[i]);
    program_free(c->p);
    graph_free(c->g);
}

/* ---------------------------------------------------------------- compiling */

/* All cases' kernels in one unit (names prefixed f<i>_), compiled to a shared library. */
static void *compile_all(Case *cases, int n, const char *dir)
{
    char src[512], lib[512], cmd[4096];
    snprintf(src, sizeof src, "%s/kernels.cpp", dir);
    snprintf(lib, sizeof lib, "%s/kernels.so", dir);
    FILE *f = fopen(src, "w");
    if (!f)
        return NULL;
    fputs(cuda_prelude, f);
    for (int i = 0; i < n; i++) {
        char prefix[32];
        Err e = {0};
        snprintf(prefix, sizeof prefix, "f%d_", i);
        char *part = cuda_source_part(cases[i].p, prefix, false, &e);
        if (part)
            fputs(part, f);
        free(part);
    }
    fclose(f);
    char cwd[1024];
    if (!getcwd(cwd, sizeof cwd))
        return NULL;
    snprintf(cmd, sizeof cmd, "c++ -std=c++20 -O1 -shared -fPIC -pthread -w -include "
             "'%s/tests/unit/cuda_emu.h' '%s' -o '%s'", cwd, src, lib);
    if (system(cmd) != 0) {
        fprintf(stderr, "the host compiler rejected the generated source: %s\n", cmd);
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

/* ---------------------------------------------------------------- running */

typedef struct Run {
    void *lib;
    LaunchFn launch;
    int index;          /* the case's prefix number */
    const Program *p;
    void **bufs;
    SymBind sb;
} Run;

static KernelEntry entry(const Run *r, const char *name)
{
    char full[300];
    snprintf(full, sizeof full, "f%d_%s", r->index, name);
    KernelEntry fn = (KernelEntry)dlsym(r->lib, full);
    if (!fn) {
        fprintf(stderr, "kernel %s is missing\n", full);
        check_failures++;
    }
    return fn;
}

/* As the CUDA engine launches: a pointwise kernel over its points, a row kernel a row per
 * block (both grid-stride, so a small grid covers any size). */
static void launch_kernel(const Run *r, int k)
{
    const Kernel *kn = &r->p->kernel[k];
    int64_t outer = 1;
    for (int d = 0; d < kn->nouter; d++)
        outer *= dim_value(kn->size[d], &r->sb);
    KernelEntry fn = entry(r, kn->name);
    if (!fn || outer == 0)
        return;
    int64_t blocks = kn->ninner ? outer : (outer + EMU_BLOCK - 1) / EMU_BLOCK;
    r->launch(fn, (unsigned)(blocks < 8 ? blocks : 8), 1, EMU_BLOCK, r->bufs,
              (const long long *)r->sb.val);
}

static int attention_launches; /* so the check below sees the fused kernel really ran */

static void launch_attention(const Run *r, int s)
{
    const Attention *a = &r->p->step[s].attn;
    int64_t batch = 1, tq = dim_value(a->tq, &r->sb);
    for (int d = 0; d < a->nbatch; d++)
        batch *= dim_value(a->batch[d], &r->sb);
    char name[64];
    snprintf(name, sizeof name, "coil_attention_%d", s);
    KernelEntry fn = entry(r, name);
    attention_launches += fn && tq > 0 && batch > 0;
    if (fn && tq > 0 && batch > 0)
        r->launch(fn, (unsigned)((tq + CUDA_ATTN_QUERIES - 1) / CUDA_ATTN_QUERIES),
                  (unsigned)batch, CUDA_ATTN_QUERIES, r->bufs, (const long long *)r->sb.val);
}

static void run_steps(Run *r, const DType *dts)
{
    for (int s = 0; s < r->p->nstep; s++) {
        const Step *st = &r->p->step[s];
        Err e = {0};
        if (st->kind == STEP_KERNEL)
            launch_kernel(r, st->kernel);
        else if (st->kind == STEP_ATTENTION)
            launch_attention(r, s);
        else if (!dtype_info[dts[st->gemm.a.buf]].is_float) /* never: integer matmuls are kernels */
            check_failures++;
        else {
            gemm_reference(&st->gemm, r->bufs, dts, &r->sb, &e);
            if (st->gemm.epilogue >= 0)
                launch_kernel(r, st->gemm.epilogue);
        }
    }
}

/* Host memory for every buffer, as the engine's device memory would be laid out. */
static bool bind(Run *r, Case *c, Tensor *out, DType *dts, Err *e)
{
    const Program *p = c->p;
    if (!bind_inputs(c->g, c->in, &r->sb, e) || !alloc_output_tensors(c->g, &r->sb, out, e))
        return false;
    for (int b = 0; b < p->nbuf; b++) {
        const Buffer *buf = &p->buf[b];
        dts[b] = buf->dt;
        int64_t n = dim_value(buf->numel, &r->sb);
        switch (buf->kind) {
        case BUF_INPUT: r->bufs[b] = c->in[buf->index].data; break;
        case BUF_PARAM: r->bufs[b] = c->params[buf->index].data; break;
        case BUF_OUTPUT: r->bufs[b] = out[buf->index].data; break;
        default:
            r->bufs[b] = calloc((size_t)(n > 0 ? n : 1), (size_t)dtype_info[buf->dt].size);
            for (int64_t i = 0; buf->kind == BUF_CONST && i < n; i++)
                dtype_store(buf->dt, r->bufs[b], i, buf->data[i]);
        }
    }
    return true;
}

static bool close_enough(DType dt, double got, double want)
{
    if (isnan(want) || isnan(got))
        return isnan(want) && isnan(got);
    if (isinf(want) || isinf(got) || !dtype_info[dt].is_float)
        return got == want;
    double rtol = dt == DT_F32 ? 2e-4 : dt == DT_F16 ? 2e-3 : 1.6e-2;
    return fabs(got - want) <= 1e-5 + rtol * fabs(want);
}

static void run_case(void *lib, LaunchFn launch, int index, Case *c)
{
    Err e = {0};
    const Program *p = c->p;
    Tensor out[16] = {{0}};
    DType *dts = calloc((size_t)p->nbuf + 1, sizeof *dts);
    Run r = {.lib = lib, .launch = launch, .index = index, .p = p,
             .bufs = calloc((size_t)p->nbuf + 1, sizeof(void *))};
    if (dts && r.bufs && bind(&r, c, out, dts, &e))
        run_steps(&r, dts);
    else {
        fprintf(stderr, "%s: %s\n", c->name, e.msg);
        check_failures++;
    }
    for (int i = 0; i < c->g->noutput && out[i].data; i++) {
        int bad = 0;
        for (int64_t j = 0; j < tensor_numel(&c->want[i]); j++) {
            double g = dtype_load(out[i].dt, out[i].data, j), w = dtype_load(c->want[i].dt,
                                                                               c->want[i].data, j);
            if (!close_enough(c->want[i].dt, g, w) && bad++ < 3)
                fprintf(stderr, "%s [CUDA C, emulated]: %s[%lld] = %.9g, the interpreter gives "
                        "%.9g\n", c->name, c->g->output_name[i], (long long)j, g, w);
        }
        check_failures += bad > 0;
        tensor_free(&out[i]);
    }
    for (int b = 0; r.bufs && b < p->nbuf; b++)
        if (p->buf[b].kind == BUF_CONST || p->buf[b].kind == BUF_TEMP)
            free(r.bufs[b]);
    free(r.bufs);
    free(dts);
}

static int is_case(const struct dirent *d)
{
    size_t n = strlen(d->d_name);
    return n > 4 && strcmp(d->d_name + n - 4, ".cir") == 0;
}

int main(void)
{
    if (system("c++ --version > /dev/null 2>&1") != 0) {
        printf("skipped: no host C++ compiler (c++) to run the generated CUDA C with\n");
        return 0;
    }
    struct dirent **list;
    int n = scandir(FIXTURE_DIR, &list, is_case, alphasort), ncase = 0;
    static Case cases[MAX_CASES];
    for (int i = 0; i < n; i++) {
        if (ncase < MAX_CASES && case_load(&cases[ncase], list[i]->d_name))
            ncase++;
        free(list[i]);
    }
    free(list);
    char dir[] = "/tmp/coil-cuda-emu-XXXXXX";
    void *lib = mkdtemp(dir) ? compile_all(cases, ncase, dir) : NULL;
    LaunchFn launch = lib ? (LaunchFn)dlsym(lib, "coil_emu_launch") : NULL;
    for (int i = 0; launch && i < ncase; i++)
        run_case(lib, launch, i, &cases[i]);
    for (int i = 0; i < ncase; i++)
        case_free(&cases[i]);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    CHECK(launch != NULL && ncase > 100);
    CHECK(attention_launches >= 5);
    printf("%d op fixtures: their CUDA C run emulated and checked (%d fused attention "
           "launches)\n", ncase, attention_launches);
    return check_status();
}
