/* builder.c — the C API's builder (include/coil/coil.h): a graph made op by op from C, any op
 * by its name through the op table, types and attributes in the IR text's syntax (read by
 * ir/parse.c's pieces), then verified and made a model like a loaded one. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "passes/passes.h"
#include "runtime/init.h"

struct coil_builder {
    Graph *g;
    char failed[1024]; /* the first failed call's message, repeated when its -1 is used */
};

/* ---------------------------------------------------------------- errors */

/* A failed call: err filled (code, message), the first failure remembered. */
static void vfail(coil_builder *b, coil_error *err, int code, const char *fmt, va_list ap)
{
    char msg[sizeof err->message];
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (b && !b->failed[0])
        snprintf(b->failed, sizeof b->failed, "%s", msg);
    api_fail(err, code, "%s", msg);
}

/* vfail for the calls that return a value (-1) and for the checks (false). */
__attribute__((format(printf, 4, 5)))
static int refuse(coil_builder *b, coil_error *err, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(b, err, code, fmt, ap);
    va_end(ap);
    return -1;
}

__attribute__((format(printf, 4, 5)))
static bool reject(coil_builder *b, coil_error *err, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(b, err, code, fmt, ap);
    va_end(ap);
    return false;
}

/* An internal error's message without its "error: " (pieces of text have no position). */
static const char *bare(const Err *e)
{
    return strncmp(e->msg, "error: ", 7) == 0 ? e->msg + 7 : e->msg;
}

/* Whether v is a value of the graph; a -1 after a failed call is reported with the first
 * failure, the likely cause. */
static bool value_ok(coil_builder *b, int v, const char *fn, const char *what, int i,
                     coil_error *err)
{
    if (v >= 0 && v < b->g->nnode)
        return true;
    if (v == -1 && b->failed[0]) /* a consequence, not a failure to remember */
        return api_fail(err, COIL_ERR_USAGE, "%s: %s %d is -1, the result of a failed call (the "
                        "first failure: %s)", fn, what, i, b->failed);
    char range[48] = "it has none yet";
    if (b->g->nnode > 0)
        snprintf(range, sizeof range, "0 to %d", b->g->nnode - 1);
    return reject(b, err, COIL_ERR_USAGE, "%s: %s %d is %d, not a value of this builder (%s)",
                  fn, what, i, v, range);
}

/* ---------------------------------------------------------------- the builder */

coil_builder *coil_builder_new(const char *name, coil_error *err)
{
    api_err_clear(err);
    coil_builder *b = calloc(1, sizeof *b);
    if (b && !(b->g = graph_new(name ? name : "main"))) {
        free(b);
        b = NULL;
    }
    if (!b)
        api_fail(err, COIL_ERR_MEMORY, "coil_builder_new: out of memory");
    return b;
}

void coil_builder_free(coil_builder *b)
{
    if (!b)
        return;
    graph_free(b->g);
    free(b);
}

/* The id of the input or param node named name, or -1. */
static int leaf_named(const Graph *g, int op, const char *name)
{
    for (int id = 0; id < g->nnode; id++)
        if (g->node[id].op == op && strcmp(node_name(&g->node[id]), name) == 0)
            return id;
    return -1;
}

/* The builder, a fresh name for a leaf of that kind, and a type that parses. */
static bool leaf_args(coil_builder *b, const char *fn, int op, const char *name, const char *text,
                      Type *t, coil_error *err)
{
    Err e = {0};
    api_err_clear(err);
    if (!b)
        return api_fail(err, COIL_ERR_USAGE, "%s: the builder is NULL", fn);
    if (!name || !*name)
        return reject(b, err, COIL_ERR_USAGE, "%s: the name is %s", fn, name ? "empty" : "NULL");
    int twin = leaf_named(b->g, op, name);
    if (twin >= 0)
        return reject(b, err, COIL_ERR_USAGE, "%s '%s': %%%d is already the %s of that name; "
                      "names are unique", fn, name, twin, op_info[op].name);
    if (!text)
        return reject(b, err, COIL_ERR_USAGE, "%s '%s': the type is NULL; give one like "
                      "\"f32[B,16]\"", fn, name);
    if (!ir_parse_type(b->g, text, t, &e))
        return reject(b, err, COIL_ERR_SYNTAX, "%s '%s': type \"%s\": %s", fn, name, text,
                      bare(&e));
    return true;
}

/* A node the builder made from checked arguments; its own error otherwise (memory). */
static int made(coil_builder *b, int id, const char *fn, const Err *e, coil_error *err)
{
    return id >= 0 ? id : refuse(b, err, e->code == ERR_MEMORY ? COIL_ERR_MEMORY : COIL_ERR_USAGE,
                                 "%s: %s", fn, bare(e));
}

int coil_input(coil_builder *b, const char *name, const char *type, coil_error *err)
{
    Type t;
    Err e = {0};
    if (!leaf_args(b, "coil_input", OP_INPUT, name, type, &t, err))
        return -1;
    Builder bb = builder_make(b->g, &e);
    return made(b, b_input(&bb, name, &t), "coil_input", &e, err);
}

/* The initializer tried on a one-element stand-in of the parameter's rank: its text and
 * what the rank allows are checked now, not at coil_init_params. The message is init.c's
 * from "bad initializer" on (its shape would be the stand-in's). */
static bool init_ok(coil_builder *b, const char *name, const Type *t, const char *init,
                    coil_error *err)
{
    int64_t ones[COIL_MAX_RANK] = {1, 1, 1, 1, 1, 1, 1, 1};
    Tensor probe;
    Err e = {0};
    char ty[256];
    if (!tensor_alloc(&probe, t->dt, t->rank, ones, &e))
        return reject(b, err, COIL_ERR_MEMORY, "coil_param '%s': %s", name, bare(&e));
    bool ok = init_tensor(&probe, name, init, 0, &e);
    tensor_free(&probe);
    const char *why = strstr(e.msg, "bad initializer");
    return ok || reject(b, err, COIL_ERR_USAGE, "coil_param '%s' (%s): %s", name,
                        type_fmt(b->g, t, ty, sizeof ty), why ? why : e.msg);
}

int coil_param(coil_builder *b, const char *name, const char *type, const char *init,
               coil_error *err)
{
    Type t;
    Err e = {0};
    if (!leaf_args(b, "coil_param", OP_PARAM, name, type, &t, err))
        return -1;
    if (init && !init_ok(b, name, &t, init, err))
        return -1;
    Builder bb = builder_make(b->g, &e);
    return made(b, b_param(&bb, name, &t, init), "coil_param", &e, err);
}

/* ---------------------------------------------------------------- ops */

/* "%5 = matmul(%3: f32[B,16], %4: f32[8,4])": the value a call would make, for messages. */
static const char *call_text(const coil_builder *b, const char *op, const int *args, int nargs,
                             char *buf, size_t size)
{
    size_t used = (size_t)snprintf(buf, size, "%%%d = %s", b->g->nnode, op);
    for (int i = 0; i < nargs && used < size; i++) {
        char ty[128];
        const Type *t = &b->g->node[args[i]].type;
        used += (size_t)snprintf(buf + used, size - used, "%s%%%d: %s", i ? ", " : "(", args[i],
                                 type_fmt(b->g, t, ty, sizeof ty));
    }
    if (nargs > 0 && used < size)
        snprintf(buf + used, size - used, ")");
    return buf;
}

/* The op's code from its name: leaves with names of their own have calls of their own. */
static int op_of(coil_builder *b, const char *name, const char *at, coil_error *err)
{
    Err e = {0};
    if (!name)
        return refuse(b, err, COIL_ERR_USAGE, "coil_op %s: the op's name is NULL", at);
    int op = op_lookup(name, strlen(name));
    if (op == OP_INPUT || op == OP_PARAM)
        return refuse(b, err, COIL_ERR_USAGE, "coil_op %s: %ss are made with coil_%s", at,
                      op_info[op].name, op_info[op].name);
    op = ir_parse_op(name, &e);
    if (op < 0)
        return refuse(b, err, COIL_ERR_USAGE, "coil_op %s: %s", at, bare(&e));
    return op;
}

/* The operand count the op takes, and every operand a value. */
static bool operands_ok(coil_builder *b, int op, const int *args, int nargs, const char *at,
                        coil_error *err)
{
    const OpInfo *info = &op_info[op];
    char arity[48];
    if (nargs < 0 || (nargs > 0 && !args))
        return reject(b, err, COIL_ERR_USAGE, "coil_op %s = %s: %d operands but args is %s", at,
                      info->name, nargs, args ? "set" : "NULL");
    if (nargs < info->nin_min || (info->nin_max >= 0 && nargs > info->nin_max))
        return reject(b, err, COIL_ERR_USAGE, "coil_op %s = %s: takes %s operand%s, given %d", at,
                      info->name, op_arity(info, arity, sizeof arity),
                      info->nin_max == 1 ? "" : "s", nargs);
    for (int i = 0; i < nargs; i++)
        if (!value_ok(b, args[i], "coil_op", "operand", i, err))
            return false;
    return true;
}

/* "axis, keepdim": an op's attribute names, for messages. */
static const char *attr_names(const OpInfo *info, char *buf, size_t size)
{
    size_t used = (size_t)snprintf(buf, size, "%s", info->nattr ? "" : "none");
    for (int i = 0; i < info->nattr && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%s", i ? ", " : "", info->attrs[i].name);
    return buf;
}

/* The attributes' text parsed against the op's schema (into tmp), the required ones given. */
static bool attrs_ok(coil_builder *b, int op, const char *text, Arena *tmp, Attr *attrs,
                     int *nattrs, const char *call, coil_error *err)
{
    const OpInfo *info = &op_info[op];
    Err e = {0};
    char names[256];
    *nattrs = 0;
    if (text && !ir_parse_attrs(op, text, tmp, attrs, nattrs, &e))
        return reject(b, err, COIL_ERR_SYNTAX, "coil_op %s: attributes \"%s\": %s", call, text,
                      bare(&e));
    for (int i = 0; i < info->nattr; i++) {
        bool given = false;
        for (int j = 0; j < *nattrs; j++)
            given |= strcmp(attrs[j].name, info->attrs[i].name) == 0;
        if (info->attrs[i].required && !given)
            return reject(b, err, COIL_ERR_USAGE, "coil_op %s: %s needs attribute '%s' (its "
                          "attributes: %s)", call, info->name, info->attrs[i].name,
                          attr_names(info, names, sizeof names));
    }
    return true;
}

/* The result type: parsed when given; required when the op's type is declared. */
static bool type_ok(coil_builder *b, int op, const char *text, Type *t, const char *call,
                    coil_error *err)
{
    Err e = {0};
    if (!text && (op_info[op].flags & OPF_TYPED))
        return reject(b, err, COIL_ERR_USAGE, "coil_op %s: %s's result type is declared, not "
                      "inferred: give it, as in \"f32[B,16]\"", call, op_info[op].name);
    if (text && !ir_parse_type(b->g, text, t, &e))
        return reject(b, err, COIL_ERR_SYNTAX, "coil_op %s: type \"%s\": %s", call, text,
                      bare(&e));
    return true;
}

/* The node, its type inferred (or checked, when declared); a type given for an inferred
 * op must be the inferred one. */
static int add_node(coil_builder *b, int op, const int *args, int nargs, const Attr *attrs,
                    int nattrs, const Type *declared, const char *call, coil_error *err)
{
    Err e = {0};
    Builder bb = builder_make(b->g, &e);
    bool typed = op_info[op].flags & OPF_TYPED;
    int id = b_op(&bb, op, args, nargs, attrs, nattrs, typed ? declared : NULL);
    if (id < 0)
        return refuse(b, err, e.code == ERR_MEMORY ? COIL_ERR_MEMORY : COIL_ERR_SHAPE,
                      "coil_op %s: %s", call, bare(&e));
    if (typed || !declared || type_eq(&b->g->node[id].type, declared))
        return id;
    char want[256], got[256];
    type_fmt(b->g, declared, want, sizeof want);
    type_fmt(b->g, &b->g->node[id].type, got, sizeof got);
    b->g->nnode--; /* the node just added, used by nothing yet: the call adds nothing */
    return refuse(b, err, COIL_ERR_SHAPE, "coil_op %s: the type given, %s, is not the "
                  "inferred %s", call, want, got);
}

int coil_op(coil_builder *b, const char *op, const int *args, int nargs, const char *attrs,
            const char *type, coil_error *err)
{
    api_err_clear(err);
    if (!b) {
        api_fail(err, COIL_ERR_USAGE, "coil_op: the builder is NULL");
        return -1;
    }
    char at[16], call[768];
    snprintf(at, sizeof at, "%%%d", b->g->nnode);
    int code = op_of(b, op, at, err);
    if (code < 0 || !operands_ok(b, code, args, nargs, at, err))
        return -1;
    call_text(b, op_info[code].name, args, nargs, call, sizeof call);
    Attr parsed[32]; /* at most one per schema entry; schemas are short */
    int nparsed = 0, id = -1;
    Type t = {0};
    Arena *tmp = arena_new();
    if (!tmp)
        return refuse(b, err, COIL_ERR_MEMORY, "coil_op %s: out of memory", call);
    if (attrs_ok(b, code, attrs, tmp, parsed, &nparsed, call, err) &&
        type_ok(b, code, type, &t, call, err))
        id = add_node(b, code, args, nargs, parsed, nparsed, type ? &t : NULL, call, err);
    arena_free(tmp);
    return id;
}

bool coil_output(coil_builder *b, const char *name, int value, coil_error *err)
{
    api_err_clear(err);
    if (!b)
        return api_fail(err, COIL_ERR_USAGE, "coil_output: the builder is NULL");
    if (name && !*name)
        return reject(b, err, COIL_ERR_USAGE, "coil_output: the name is empty");
    if (!value_ok(b, value, "coil_output", "value of output", b->g->noutput, err))
        return false;
    char dflt[32];
    snprintf(dflt, sizeof dflt, "out%d", b->g->noutput);
    for (int i = 0; i < b->g->noutput; i++)
        if (strcmp(b->g->output_name[i], name ? name : dflt) == 0)
            return reject(b, err, COIL_ERR_USAGE, "coil_output: output %d is already named "
                          "'%s'; names are unique", i, name ? name : dflt);
    Err e = {0};
    Builder bb = builder_make(b->g, &e);
    return made(b, b_output(&bb, value, name), "coil_output", &e, err) >= 0;
}

/* ---------------------------------------------------------------- building */

/* The options of a graph already made: no overrides, a device coil knows. */
static bool build_options(const coil_options *opt, coil_error *err)
{
    if (!opt)
        return true;
    if (opt->noverrides != 0)
        return api_fail(err, COIL_ERR_USAGE, "coil_build: %d config overrides given: they are "
                        "for .coil models, and a built graph has no config", opt->noverrides);
    if (opt->device && !device_find(opt->device))
        return api_fail(err, COIL_ERR_USAGE, "coil_options: device '%s', expected %s",
                        opt->device, device_names());
    return api_options_check(opt, err);
}

coil_model *coil_build(coil_builder *b, const coil_options *opt, coil_error *err)
{
    return coil_build_sized(b, opt, err, sizeof *opt);
}

coil_model *coil_build_sized(coil_builder *b, const coil_options *given, coil_error *err,
                             size_t size)
{
    Err e = {0};
    coil_options o;
    api_err_clear(err);
    if (!api_sized(given, size, &o, sizeof o, "coil_build", "coil_options", err))
        return NULL;
    const coil_options *opt = given ? &o : NULL;
    if (!b) {
        api_fail(err, COIL_ERR_USAGE, "coil_build: the builder is NULL");
        return NULL;
    }
    if (!build_options(opt, err))
        return NULL;
    if (b->g->noutput == 0) {
        api_fail(err, COIL_ERR_USAGE, "coil_build: graph @%s has no outputs: name at least "
                 "one with coil_output", b->g->name);
        return NULL;
    }
    Graph *copy = graph_copy(b->g, &e); /* the builder stays the caller's */
    if (!copy) {
        api_fail_err(err, &e);
        return NULL;
    }
    return api_model_from_graph(copy, opt, &e, err);
}
