/* prelude.h — the built-in .coil source parsed before every program (Linear, LayerNorm,
 * Embedding); a program's own block of the same name replaces the prelude's. */
#ifndef COIL_FRONTEND_PRELUDE_H
#define COIL_FRONTEND_PRELUDE_H

extern const char coil_prelude[];

#endif
