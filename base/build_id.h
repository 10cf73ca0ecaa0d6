/* build_id.h — the GNU build ID of the program or library that holds coil's code: a hash
 * the linker computes over the whole output, so it changes with any change to the code.
 * Caches of generated code key on it: what a differently built coil generated for the
 * same IR (another pass pipeline, another code generator option) is never taken. */
#ifndef COIL_BASE_BUILD_ID_H
#define COIL_BASE_BUILD_ID_H

/* Lowercase hex, or NULL when the file was linked without one (--build-id=none). */
const char *build_id(void);

#endif
