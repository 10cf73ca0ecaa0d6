/* gen.c — the module-wide helpers of code generation: the types every file uses,
 * intrinsic calls, and failing with a message that names the function being built. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "codegen/cpu/gen.h"

void gen_init(Gen *g, LLVMModuleRef mod, const Program *p, const Target *t, Err *e)
{
    LLVMContextRef c = LLVMGetModuleContext(mod);
    *g = (Gen){.ctx = c, .mod = mod, .p = p, .t = t, .e = e};
    g->b = LLVMCreateBuilderInContext(c);
    g->f32 = LLVMFloatTypeInContext(c);
    g->f64 = LLVMDoubleTypeInContext(c);
    g->i1 = LLVMInt1TypeInContext(c);
    g->i8 = LLVMInt8TypeInContext(c);
    g->i16 = LLVMInt16TypeInContext(c);
    g->i32 = LLVMInt32TypeInContext(c);
    g->i64 = LLVMInt64TypeInContext(c);
    g->ptr = LLVMPointerTypeInContext(c, 0);
    g->voidt = LLVMVoidTypeInContext(c);
    g->md_scope = LLVMGetMDKindIDInContext(c, "alias.scope", 11);
    g->md_noalias = LLVMGetMDKindIDInContext(c, "noalias", 7);
    g->md_loop = LLVMGetMDKindIDInContext(c, "llvm.loop", 9);
}

void gen_dispose(Gen *g)
{
    if (g->b)
        LLVMDisposeBuilder(g->b);
    g->b = NULL;
}

LLVMValueRef gen_intrinsic(Gen *g, LLVMBuilderRef b, const char *name, LLVMTypeRef *ov, int nov,
                           LLVMValueRef *args, int nargs)
{
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(g->mod, id, ov, (size_t)nov);
    LLVMTypeRef ty = LLVMIntrinsicGetType(g->ctx, id, ov, (size_t)nov);
    return LLVMBuildCall2(b, ty, fn, args, (unsigned)nargs, "");
}

void gen_attr(Gen *g, LLVMValueRef fn, unsigned idx, const char *name)
{
    unsigned kind = LLVMGetEnumAttributeKindForName(name, strlen(name));
    LLVMAddAttributeAtIndex(fn, idx, LLVMCreateEnumAttribute(g->ctx, kind, 0));
}

LLVMValueRef gen_fail(Gen *g, const char *fn, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    err_set(g->e, ERR_INPUT, "cpu: %s: %s", fn, msg);
    return NULL;
}
