/* load.c — model files to IR graphs, dispatched on the file's extension, so tools need
 * not know which formats exist. A new format is one row in model_formats[]. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "frontend/frontend.h"
#include "frontend/onnx.h"

static Graph *load_cir(const char *path, const ModelOptions *opt, Err *e)
{
    if (opt && opt->nset > 0) {
        err_set(e, ERR_INPUT, "--set %s: %s is IR text, which has no config constants to set",
                opt->set[0], path);
        return NULL;
    }
    return ir_parse_file(path, e);
}

static const struct {
    const char *ext;
    Graph *(*load)(const char *path, const ModelOptions *opt, Err *e);
} model_formats[] = {
    {".cir", load_cir},
    {".onnx", onnx_load}, /* says so when this build has no ONNX import */
#ifdef COIL_HAVE_FRONTEND
    {".coil", coil_frontend_load},
#endif
};

const char *model_option(const ModelOptions *opt, const char *name)
{
    const char *value = NULL;
    size_t n = strlen(name);
    for (int i = 0; opt && i < opt->nset; i++)
        if (strncmp(opt->set[i], name, n) == 0 && opt->set[i][n] == '=')
            value = opt->set[i] + n + 1;
    return value;
}

Graph *model_text_fault(Graph *g, Err *e)
{
    if (!g && e->code == ERR_INPUT && strstr(e->msg, ": error: "))
        e->code = ERR_SYNTAX;
    return g;
}

Graph *model_load(const char *path, const ModelOptions *opt, Err *e)
{
    FILE *f = fopen(path, "rb");
    struct stat st;
    int why = !f ? errno : fstat(fileno(f), &st) != 0 ? errno : S_ISDIR(st.st_mode) ? EISDIR : 0;
    if (f)
        fclose(f);
    if (why) {
        err_set(e, ERR_FILE, "%s: cannot open: %s", path, strerror(why));
        return NULL;
    }
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    const char *ext = strrchr(base, '.') ? strrchr(base, '.') : "";
    if (opt && opt->nconstants > 0 && strcmp(ext, ".onnx") != 0) {
        err_set(e, ERR_USAGE, "%s: input '%s' fixed at load: only an ONNX model's inputs can "
                "be (give this model's inputs when it runs)", path, opt->constants[0].name);
        return NULL;
    }
    for (size_t i = 0; i < sizeof model_formats / sizeof model_formats[0]; i++)
        if (strcmp(ext, model_formats[i].ext) == 0)
            return model_text_fault(model_formats[i].load(path, opt, e), e);
#ifndef COIL_HAVE_FRONTEND
    if (strcmp(ext, ".coil") == 0) {
        err_set(e, ERR_UNSUPPORTED, "%s: this build of coil has no .coil frontend yet; give an IR "
                "file (.cir)", path);
        return NULL;
    }
#endif
    err_set(e, ERR_UNSUPPORTED, "%s: unknown model format '%s': expected a .cir (IR text), .coil "
            "(model) or .onnx file", path, ext);
    return NULL;
}
