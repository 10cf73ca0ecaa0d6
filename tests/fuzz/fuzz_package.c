/* fuzz_package.c — libFuzzer harness for loading an ahead-of-time package (io/
 * package.c, `coil run DIR`): a package of examples/tiny.cir is written once, then each
 * input's first byte says what the rest replaces, the other files staying as written:
 *   0  manifest.json as it is (its JSON, its own checksum, refused when wrong);
 *   1  manifest.json above its checksum line, the line added with the right checksum, so
 *      the fields behind the checksum (format, version, device, the files' sizes and
 *      SHA-256s) are what is fuzzed;
 *   2  model.cir, the manifest rewritten with its size and SHA-256 and sealed again, so the
 *      IR a package carries goes through package_graph and package_load's lowering (it is
 *      not decomposed again: a package's IR is trusted to be coil's optimised output).
 * Loading gives a model or an error with a message, never a crash. kernels.o is not fuzzed:
 * it is machine code, which a package is trusted to hold once its checksum matches (loading
 * it runs LLVM's linker, not coil's code). */
#include <stdint.h>

#include "base/sha256.h"
#include "io/package.h"
#include "pipeline/pipeline.h"
#include "tests/fuzz/fuzz_common.h"
#include "tests/fuzz/fuzz_files.h"

#define CHECKSUM_LINE "  \"manifest_sha256\": \""
#define MODEL_LINE "    \"model.cir\": {\"bytes\": "

static char dir[512], manifest_path[640], model_path[640];
static uint8_t *manifest, *model;
static size_t manifest_size, model_size, body_size; /* body: the lines above the checksum */

/* manifest.json as `body` (a newline added when it lacks one) and its checksum line. */
static void write_sealed(const char *body, size_t n)
{
    size_t cap = n + 200;
    char *text = malloc(cap), hex[SHA256_HEX];
    if (!text)
        abort();
    memcpy(text, body, n);
    if (n == 0 || text[n - 1] != '\n')
        text[n++] = '\n';
    sha256_of(text, n, hex);
    n += (size_t)snprintf(text + n, cap - n, CHECKSUM_LINE "%s\"\n}\n", hex);
    fuzz_write(manifest_path, text, n);
    free(text);
}

/* The manifest as written, with model.cir's line saying `size` bytes of digest `hex`. */
static void write_manifest_for_model(size_t size, const char *hex)
{
    const char *text = (const char *)manifest;
    const char *line = strstr(text, MODEL_LINE);
    if (!line || (size_t)(line - text) >= body_size)
        abort(); /* package.c writes the manifest otherwise now: update this harness */
    const char *end = strchr(line, '\n');
    bool comma = end > line && end[-1] == ',';
    size_t cap = body_size + 200, n = (size_t)(line - text);
    char *body = malloc(cap);
    if (!body)
        abort();
    memcpy(body, text, n);
    n += (size_t)snprintf(body + n, cap - n, MODEL_LINE "%zu, \"sha256\": \"%s\"}%s", size, hex,
                          comma ? "," : "");
    size_t rest = body_size - (size_t)(end - text);
    memcpy(body + n, end, rest);
    write_sealed(body, n + rest);
    free(body);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    Err e = {0};
    snprintf(dir, sizeof dir, "%s", fuzz_path("package"));
    snprintf(manifest_path, sizeof manifest_path, "%s/manifest.json", dir);
    snprintf(model_path, sizeof model_path, "%s/model.cir", dir);
    Graph *g = ir_parse_file(COIL_SOURCE_DIR "/examples/tiny.cir", &e);
    CompileOptions o = {.threads = 1};
    Compiled *c = g ? compile_graph(g, &o, &e) : NULL;
    if (!c || !package_write(dir, c, &o, NULL, &e)) {
        fprintf(stderr, "fuzz_package: cannot write the package: %s\n", e.msg);
        abort();
    }
    compiled_free(c);
    graph_free(g);
    if (!(manifest = fuzz_read(manifest_path, &manifest_size)) ||
        !(model = fuzz_read(model_path, &model_size)))
        abort();
    const char *sum = strstr((const char *)manifest, CHECKSUM_LINE);
    if (!sum)
        abort(); /* package.c writes the manifest otherwise now: update this harness */
    body_size = (size_t)(sum - (const char *)manifest);
    fuzz_seed("manifest", "\0", 1, manifest, manifest_size);
    fuzz_seed("manifest-body", "\1", 1, manifest, body_size);
    fuzz_seed("model", "\2", 1, model, model_size);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const char *rest = (const char *)data + 1;
    size_t n = size - 1;
    char hex[SHA256_HEX];
    switch (data[0] % 3) {
    case 0:
        fuzz_write(manifest_path, rest, n);
        fuzz_write(model_path, model, model_size);
        break;
    case 1:
        write_sealed(rest, n);
        fuzz_write(model_path, model, model_size);
        break;
    default:
        fuzz_write(model_path, rest, n);
        sha256_of(rest, n, hex);
        write_manifest_for_model(n, hex);
        break;
    }
    Err e = {0};
    Graph *g = package_graph(dir, &e);
    if (!g) {
        if (e.msg[0] == 0)
            fuzz_bug("package_graph failed without a message", NULL);
        return 0;
    }
    CompileOptions o = {.threads = 1};
    Compiled *c = package_load(dir, g, &o, &e);
    if (!c && e.msg[0] == 0)
        fuzz_bug("package_load failed without a message", NULL);
    compiled_free(c);
    graph_free(g);
    return 0;
}
