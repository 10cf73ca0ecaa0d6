/* version.h — coil's version, written once: packages, checkpoints and autotune cache keys
 * record it, `coil --version` prints it, coil_version() returns it. include/coil/coil.h's
 * COIL_VERSION (the public header stands alone) is held equal to it by test_api. */
#ifndef COIL_BASE_VERSION_H
#define COIL_BASE_VERSION_H

#define COIL_VERSION_TEXT "0.1.0"

#endif
