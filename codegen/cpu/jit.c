/* jit.c — ORC's LLJIT holding one object, compiled (cpu_compile) or read from a file
 * (cpu_load_object): created for a target, code added, symbols looked up; every error,
 * including those ORC reports while linking, comes back as an Err. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <llvm-c/Error.h>
#include <llvm-c/Orc.h>

#include "codegen/cpu/gen.h"

/* ORC delivers linking failures here, on the thread that asked for the symbol. */
static void report(void *ctx, LLVMErrorRef err)
{
    Jit *j = ctx;
    char *msg = LLVMGetErrorMessage(err);
    err_set(&j->async, ERR_INPUT, "%s", msg);
    LLVMDisposeErrorMessage(msg);
}

/* Consume err; false with "what: LLVM's message" in e when it was an error. */
static bool ok_or(LLVMErrorRef err, Err *e, const char *what)
{
    if (!err)
        return true;
    char *msg = LLVMGetErrorMessage(err);
    err_set(e, ERR_INPUT, "%s: %s", what, msg);
    LLVMDisposeErrorMessage(msg);
    return false;
}

bool jit_new(Jit *j, const Target *t, Err *e)
{
    *j = (Jit){0};
    LLVMTargetMachineRef tm = target_clone_tm(t);
    if (!tm) {
        err_set(e, ERR_INPUT, "cpu: no target machine for '%s'", t->triple);
        return false;
    }
    LLVMOrcLLJITBuilderRef builder = LLVMOrcCreateLLJITBuilder();
    LLVMOrcLLJITBuilderSetJITTargetMachineBuilder(
        builder, LLVMOrcJITTargetMachineBuilderCreateFromTargetMachine(tm));
    if (!ok_or(LLVMOrcCreateLLJIT(&j->lljit, builder), e, "cpu: creating the JIT")) {
        j->lljit = NULL;
        return false;
    }
    LLVMOrcExecutionSessionSetErrorReporter(LLVMOrcLLJITGetExecutionSession(j->lljit), report, j);
    return true;
}

/* LLVM's buffer goes to the JIT whatever happens. */
static bool add_buffer(Jit *j, LLVMMemoryBufferRef buf, const char *where, Err *e)
{
    char what[1024];
    snprintf(what, sizeof what, "%s: error: not a loadable object", where);
    return ok_or(LLVMOrcLLJITAddObjectFile(j->lljit, LLVMOrcLLJITGetMainJITDylib(j->lljit), buf),
                 e, what);
}

bool jit_add_object(Jit *j, const void *obj, size_t n, const char *where, Err *e)
{
    return add_buffer(j, LLVMCreateMemoryBufferWithMemoryRangeCopy(obj, n, "coil-object"),
                      where, e);
}

bool jit_add_object_file(Jit *j, const char *path, Err *e)
{
    LLVMMemoryBufferRef buf;
    char *msg = NULL;
    if (LLVMCreateMemoryBufferWithContentsOfFile(path, &buf, &msg)) {
        err_set(e, ERR_INPUT, "%s: error: cannot read the object: %s", path, msg ? msg : "?");
        LLVMDisposeMessage(msg);
        return false;
    }
    return add_buffer(j, buf, path, e);
}

void *jit_lookup(Jit *j, const char *name, const char *where, Err *e)
{
    LLVMOrcExecutorAddress addr = 0;
    char what[1024];
    snprintf(what, sizeof what, "%s: cannot find '%s'", where, name);
    if (!ok_or(LLVMOrcLLJITLookup(j->lljit, &addr, name), e, what))
        goto fail;
    if (!addr) {
        err_set(e, ERR_INPUT, "%s: '%s' has address 0", where, name);
        goto fail;
    }
    return (void *)(uintptr_t)addr;
fail:
    if (!err_ok(&j->async) && strlen(e->msg) + strlen(j->async.msg) + 3 < sizeof e->msg) {
        strcat(e->msg, " (");
        strcat(e->msg, j->async.msg);
        strcat(e->msg, ")");
    }
    return NULL;
}

void jit_free(Jit *j)
{
    LLVMErrorRef err = j->lljit ? LLVMOrcDisposeLLJIT(j->lljit) : NULL;
    if (err)
        LLVMConsumeError(err);
    j->lljit = NULL;
}
