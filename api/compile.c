/* compile.c — the API's compile settings and compiling ahead of the first run: the options
 * `coil run` and `coil compile` take (mode, cache, dims), coil_prepare (compile, or map a
 * package's kernels, then one warm-up run at given sizes) and coil_save (the package
 * `coil compile -o` writes, through io/package). */
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "io/package.h"
#include "passes/passes.h"
#include "pipeline/fuse_lower.h"

/* ---------------------------------------------------------------- options */

/* "default, reduce-overhead or max-autotune", from the pipeline's own names. */
static const char *mode_list(char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = 0;
    for (int m = 0; m <= MODE_MAX_AUTOTUNE && used < n; m++)
        used += (size_t)snprintf(buf + used, n - used, "%s%s",
                                 m == 0 ? "" : m == MODE_MAX_AUTOTUNE ? " or " : ", ",
                                 compile_mode_name((CompileMode)m));
    return buf;
}

bool api_options_check(const coil_options *opt, coil_error *err)
{
    CompileMode mode;
    char modes[128];
    if (!opt)
        return true;
    if (opt->mode && !compile_mode_parse(opt->mode, &mode))
        return api_fail(err, COIL_ERR_USAGE, "coil_options: mode '%s', expected %s", opt->mode,
                        mode_list(modes, sizeof modes));
    if (opt->ndims < 0 || (opt->ndims > 0 && !opt->dims))
        return api_fail(err, COIL_ERR_USAGE, "coil_options: %d dims but dims is %s", opt->ndims,
                        opt->dims ? "set" : "NULL");
    return true;
}

bool api_options_apply(coil_model *m, const coil_options *opt, coil_error *err)
{
    if (!opt)
        return true;
    if (!api_options_check(opt, err) ||
        !api_bind_sizes(m->g, "coil_options.dims", opt->dims, opt->ndims, NULL, &m->dims, err))
        return false;
    if (opt->mode)
        compile_mode_parse(opt->mode, &m->mode);
    m->profile = opt->profile;
    if (opt->cache && !(m->cache = strdup(opt->cache)))
        return api_fail(err, COIL_ERR_MEMORY, "out of memory keeping the cache's path");
    return true;
}

bool api_bind_sizes(const Graph *g, const char *fn, const coil_dim_size *sizes, int n,
                    const SymBind *base, SymBind *sb, coil_error *err)
{
    if (base)
        *sb = *base;
    else
        memset(sb, 0, sizeof *sb);
    if (n < 0 || (n > 0 && !sizes))
        return api_fail(err, COIL_ERR_USAGE, "%s: %d sizes but sizes is %s", fn, n,
                        sizes ? "set" : "NULL");
    for (int i = 0; i < n; i++) {
        const char *sym = sizes[i].symbol;
        int s = sym ? graph_sym_find(g, sym, strlen(sym)) : -1;
        if (!sym || sizes[i].size < 0)
            return api_fail(err, COIL_ERR_USAGE, "%s: size %d: %s", fn, i,
                            sym ? "the size is negative" : "the symbol is NULL");
        if (s < 0)
            return api_fail(err, COIL_ERR_USAGE, "%s: graph @%s has no symbolic dimension '%s'",
                            fn, g->name ? g->name : "?", sym);
        sb->val[s] = sizes[i].size;
        sb->known[s] = true;
    }
    return true;
}

/* The first input whose shape sb does not size, or -1 when every one is sized. */
static int unsized_input(const Graph *g, const SymBind *sb)
{
    int64_t dims[COIL_MAX_RANK];
    for (int i = 0; i < g->ninput; i++)
        if (!type_resolve(&g->node[g->input[i]].type, sb, dims))
            return i;
    return -1;
}

/* ---------------------------------------------------------------- compiling */

CompileOptions api_compile_options(const coil_model *m)
{
    return (CompileOptions){.threads = m->threads, .device = m->device, .mode = m->mode,
                            .tune_cache = m->cache, .profile = m->profile};
}

bool api_ensure_compiled(coil_model *m, const SymBind *sizes, Err *e)
{
    if (m->compiled)
        return true;
    sizes = sizes ? sizes : &m->dims;
    CompileOptions o = api_compile_options(m);
    o.tune_sizes = unsized_input(m->g, sizes) < 0 ? sizes : NULL;
    m->compiled = m->package ? package_load(m->package, m->g, &o, e) : compile_graph(m->g, &o, e);
    api_profile_restart(m);
    return m->compiled != NULL;
}

/* ---------------------------------------------------------------- coil_prepare */

/* Zeroed inputs at the sizes sb gives every input (an index of 0 is valid everywhere). */
static bool zero_inputs(const Graph *g, const SymBind *sb, Tensor *inputs, Err *e)
{
    for (int i = 0; i < g->ninput; i++) {
        const Type *t = &g->node[g->input[i]].type;
        int64_t dims[COIL_MAX_RANK];
        if (!type_resolve(t, sb, dims) || !tensor_alloc(&inputs[i], t->dt, t->rank, dims, e))
            return false;
        memset(inputs[i].data, 0, tensor_nbytes(&inputs[i]));
    }
    return true;
}

/* One run at sb on zeros: the memory planned and, with max-autotune, the kernels tuned
 * now. Its outputs become the spares the first coil_run_named at these sizes reuses. */
static bool warm_up(coil_model *m, const SymBind *sb, coil_error *err)
{
    int nin = m->g->ninput, nout = m->g->noutput;
    Tensor *inputs = calloc((size_t)nin + 1, sizeof *inputs);
    Tensor *outputs = calloc((size_t)nout + 1, sizeof *outputs);
    Err e = {0};
    bool ok = inputs && outputs && zero_inputs(m->g, sb, inputs, &e) &&
              api_evaluate(m, inputs, outputs, &e);
    if (!ok && err_ok(&e))
        err_set(&e, ERR_MEMORY, "coil_prepare: out of memory for the warm-up's inputs");
    for (int i = 0; inputs && i < nin; i++)
        tensor_free(&inputs[i]);
    free(inputs);
    if (ok) {
        api_spare_free(m);
        m->spare = outputs;
        api_profile_restart(m); /* the warm-up is not the caller's: not in the profile */
        return true;
    }
    free(outputs);
    return api_fail_err(err, &e);
}

/* Whether to warm up: 1 yes, 0 no (sizes or parameters missing, none asked for), -1 an
 * error (sizes were given, so a warm-up was asked for, and cannot be had). */
static int warm_up_wanted(const coil_model *m, const SymBind *sb, bool asked, coil_error *err)
{
    int i = unsized_input(m->g, sb);
    char ty[256];
    if (i >= 0 && asked) {
        const Node *n = &m->g->node[m->g->input[i]];
        api_fail(err, COIL_ERR_USAGE, "coil_prepare: input '%s' has type %s: give the size of "
                 "each of its symbols (or no sizes, to compile only)", node_name(n),
                 type_fmt(m->g, &n->type, ty, sizeof ty));
        return -1;
    }
    if (i >= 0)
        return 0;
    for (int p = 0; p < m->count[COIL_PARAM]; p++)
        if (!m->params[p].data && !asked)
            return 0;
    return api_check_params(m, "coil_prepare (a warm-up run at the sizes given)", err) ? 1 : -1;
}

bool coil_prepare(coil_model *model, const coil_dim_size *sizes, int nsizes, coil_error *err)
{
    SymBind sb;
    Err e = {0};
    api_err_clear(err);
    if (!model)
        return api_fail(err, COIL_ERR_USAGE, "coil_prepare: the model is NULL");
    if (!api_bind_sizes(model->g, "coil_prepare", sizes, nsizes, &model->dims, &sb, err))
        return false;
    if (model->interpret)
        return true; /* the interpreter compiles nothing */
    if (!api_ensure_compiled(model, &sb, &e))
        return api_fail_err(err, &e);
    int warm = warm_up_wanted(model, &sb, nsizes > 0, err);
    return warm > 0 ? warm_up(model, &sb, err) : warm == 0;
}

/* ---------------------------------------------------------------- coil_save */

/* A GPU package without a GPU: the device's passes, fusion and lowering here, and NVRTC
 * for `coil compile`'s default architecture (no GPU needed), as `coil compile` does. */
static bool save_gpu_uncompiled(const coil_model *m, const char *dir, const PackageOptions *po,
                                Err *e)
{
    Graph *g = graph_copy(m->g, e);
    bool ok = g && (m->package || run_passes(&g, *m->device->passes, e));
    Program *p = ok ? fuse_and_lower(g, NULL, e) : NULL;
    EmitRequest er = {.arch = API_GPU_ARCH, .full_opt = po->full_opt};
    double codegen_s;
    ok = p && package_write_program(dir, m->device, g, p, &er, false, po, &codegen_s, e);
    program_free(p);
    graph_free(g);
    return ok;
}

/* The model's compiled code written out: what runs is what is saved. */
static bool save_compiled(const coil_model *m, const Compiled *c, const char *dir,
                          const PackageOptions *po, Err *e)
{
    CompileOptions o = api_compile_options(m);
    if (!c->device->gpu && !c->generated) {
        err_set(e, ERR_UNSUPPORTED, "coil_save: this build of coil has no CPU code generator "
                "(LLVM) to write a package's kernels with");
        return false;
    }
    if (!c->device->gpu)
        return package_write(dir, c, &o, po, e);
    EngineReport rep = compiled_report(c);
    EmitRequest er = {.arch = rep.arch[0] ? rep.arch : API_GPU_ARCH, .full_opt = po->full_opt};
    double codegen_s;
    return package_write_program(dir, c->device, c->g, c->p, &er, false, po, &codegen_s, e);
}

static bool save(coil_model *m, const char *dir, Err *e)
{
    bool sized = unsized_input(m->g, &m->dims) < 0;
    PackageOptions po = {.sb = sized ? &m->dims : NULL, .full_opt = m->mode == MODE_MAX_AUTOTUNE};
    if (m->device->gpu && !m->compiled)
        return save_gpu_uncompiled(m, dir, &po, e);
    if (!m->interpret) /* compiled now, and kept for the runs after */
        return api_ensure_compiled(m, NULL, e) && save_compiled(m, m->compiled, dir, &po, e);
    CompileOptions o = api_compile_options(m); /* interpreted: compiled for the package alone */
    Compiled *c = m->package ? package_load(m->package, m->g, &o, e) : compile_graph(m->g, &o, e);
    bool ok = c && save_compiled(m, c, dir, &po, e);
    compiled_free(c);
    return ok;
}

bool coil_save(coil_model *model, const char *dir, coil_error *err)
{
    Err e = {0};
    api_err_clear(err);
    if (!model || !dir || !*dir)
        return api_fail(err, COIL_ERR_USAGE, "coil_save: the %s", !model ? "model is NULL"
                        : !dir ? "directory is NULL" : "directory is \"\"");
    return save(model, dir, &e) || api_fail_err(err, &e);
}

void api_model_extras_free(coil_model *m)
{
    api_spare_free(m);
    api_profile_free(m);
    free(m->cache);
    m->cache = NULL;
}
