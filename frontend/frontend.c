/* frontend.c — the frontend's driver: reads the model file and its includes (cycles are
 * errors), parses each with the prelude first, checks the program, lowers it to a Graph. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/frontend.h"
#include "frontend/prelude.h"
#include "frontend/to_graph.h"

enum { MAX_FILE_BYTES = 16 << 20, MAX_INCLUDE_DEPTH = 64 };

typedef struct Loader {
    Source *prog;
    NameMap loaded;                    /* real path -> itself, for files already read */
    const char *chain[MAX_INCLUDE_DEPTH]; /* the include chain being read (real paths) */
    const char *shown[MAX_INCLUDE_DEPTH]; /* the same, as the user wrote them */
    int depth;
    char **texts;                      /* file contents, kept for quoting in diagnostics */
    int ntexts;
    int cap_items;
} Loader;

static void load_file(Loader *ld, const char *path, Loc from);
static void parse_file_text(Loader *ld, const char *path, const char *real, const char *text, size_t len);

static void push_item(Loader *ld, Item *it)
{
    Source *p = ld->prog;
    if (p->nitems == ld->cap_items) {
        int cap = ld->cap_items ? ld->cap_items * 2 : 32;
        Item **items = realloc(p->items, sizeof *items * (size_t)cap);
        if (!items) {
            diag_error(p->diags, it->loc, "out of memory");
            return;
        }
        p->items = items;
        ld->cap_items = cap;
    }
    p->items[p->nitems++] = it;
}

/* An include's path relative to the including file's directory. */
static char *include_path(Loader *ld, const char *from, const char *rel)
{
    const char *slash = strrchr(from, '/');
    if (rel[0] == '/' || !slash)
        return arena_strdup(ld->prog->arena, rel);
    size_t dir = (size_t)(slash - from) + 1, n = dir + strlen(rel) + 1;
    char *s = arena_alloc(ld->prog->arena, n);
    memcpy(s, from, dir);
    memcpy(s + dir, rel, strlen(rel) + 1);
    return s;
}

static void parse_text(Loader *ld, const char *path, const char *text, size_t len, bool prelude)
{
    Source *p = ld->prog;
    ParseCtx ctx = {.arena = p->arena, .diags = p->diags, .file = arena_strdup(p->arena, path)};
    diags_source(p->diags, ctx.file, text, len);
    ast_parse(&ctx, text, len);
    for (Item *it = ctx.items.head, *next; it; it = next) {
        next = it->next;
        it->prelude = prelude;
        if (it->kind == I_INCLUDE)
            load_file(ld, include_path(ld, ctx.file, it->name), it->loc);
        else
            push_item(ld, it);
    }
}

static char *read_all(Loader *ld, const char *path, Loc from, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        diag_error(ld->prog->diags, from, "cannot open '%s': %s", path, strerror(errno));
        return NULL;
    }
    char *buf = malloc(MAX_FILE_BYTES + 1);
    size_t n = buf ? fread(buf, 1, MAX_FILE_BYTES + 1, f) : 0;
    bool err = ferror(f);
    fclose(f);
    if (!buf || err || n > MAX_FILE_BYTES) {
        diag_error(ld->prog->diags, from, "cannot read '%s'%s", path,
                   n > MAX_FILE_BYTES ? ": larger than 16 MiB" : "");
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

static void include_cycle(Loader *ld, int start, const char *path, Loc from)
{
    char msg[900];
    size_t k = (size_t)snprintf(msg, sizeof msg, "include cycle: ");
    for (int i = start; i < ld->depth && k < sizeof msg; i++)
        k += (size_t)snprintf(msg + k, sizeof msg - k, "%s -> ", ld->shown[i]);
    if (k < sizeof msg)
        snprintf(msg + k, sizeof msg - k, "%s", path);
    diag_error(ld->prog->diags, from, "%s", msg);
}

static void load_file(Loader *ld, const char *path, Loc from)
{
    char real[PATH_MAX];
    if (!realpath(path, real)) {
        diag_error(ld->prog->diags, from, "cannot open '%s': %s", path, strerror(errno));
        return;
    }
    for (int i = 0; i < ld->depth; i++)
        if (strcmp(ld->chain[i], real) == 0) {
            include_cycle(ld, i, path, from);
            return;
        }
    if (namemap_get(&ld->loaded, real))
        return; /* already part of the program */
    if (ld->depth == MAX_INCLUDE_DEPTH) {
        diag_error(ld->prog->diags, from, "includes nested more than %d deep", MAX_INCLUDE_DEPTH);
        return;
    }
    size_t len;
    char *text = read_all(ld, path, from, &len);
    char **texts = text ? realloc(ld->texts, sizeof *texts * (size_t)(ld->ntexts + 1)) : NULL;
    if (!texts) {
        free(text);
        return;
    }
    ld->texts = texts;
    ld->texts[ld->ntexts++] = text;
    parse_file_text(ld, path, real, text, len);
}

/* Parse a file's text with its real path on the include chain. */
static void parse_file_text(Loader *ld, const char *path, const char *real, const char *text, size_t len)
{
    const char *key = arena_strdup(ld->prog->arena, real);
    namemap_put(&ld->loaded, key, (void *)key);
    ld->chain[ld->depth] = key;
    ld->shown[ld->depth++] = path;
    parse_text(ld, path, text, len, false);
    ld->depth--;
}

/* Node locations point at file names in the program's arena: move them into the graph's. */
static void relocate_locs(Graph *g)
{
    const char *from = NULL, *to = NULL;
    for (int i = 0; i < g->nnode; i++) {
        const char *f = g->node[i].loc.file;
        if (f && f != from) {
            from = f;
            to = arena_strdup(g->arena, f);
        }
        if (f)
            g->node[i].loc.file = to;
    }
}

/* Parse the prelude and the main file (from text when given), check, lower. */
static Graph *compile(const char *path, const char *text, size_t len, const FeOptions *o, Err *e)
{
    Source prog = {.arena = arena_new(), .diags = diags_new()};
    Loader ld = {.prog = &prog};
    Graph *g = NULL;
    if (!prog.arena || !prog.diags) {
        err_set(e, ERR_MEMORY, "out of memory starting the frontend");
        goto done;
    }
    parse_text(&ld, "<prelude>", coil_prelude, strlen(coil_prelude), true);
    if (text) {
        char real[PATH_MAX];
        parse_file_text(&ld, path, realpath(path, real) ? real : path, text, len);
    } else {
        load_file(&ld, path, (Loc){0});
    }
    if (diags_count(prog.diags) == 0 && sema_check(&prog))
        g = lower_program(&prog, o);
    if (g)
        relocate_locs(g);
    diags_to_err(prog.diags, e);
done:
    for (int i = 0; i < ld.ntexts; i++)
        free(ld.texts[i]);
    free(ld.texts);
    free(prog.items);
    namemap_free(&prog.blocks);
    namemap_free(&prog.config);
    namemap_free(&ld.loaded);
    diags_free(prog.diags);
    arena_free(prog.arena);
    return g;
}

Graph *coil_frontend_compile(const char *path, const char *text, size_t len, const FeOptions *o, Err *e)
{
    return compile(path ? path : "<input>", text ? text : "", text ? len : 0, o, e);
}

Graph *coil_frontend_compile_file(const char *path, const FeOptions *o, Err *e)
{
    return compile(path, NULL, 0, o, e);
}

Graph *coil_frontend_load(const char *path, const ModelOptions *opt, Err *e)
{
    FeOptions o = {0};
    if (opt)
        o = (FeOptions){opt->set, opt->nset, opt->training, opt->seed};
    return compile(path, NULL, 0, &o, e);
}
