/* version.h — coil's version for the code inside coil: packages, checkpoints and autotune
 * cache keys record it, `coil --version` prints it, coil_version() returns it. It is the
 * public header's COIL_VERSION, which the build writes from project(VERSION). */
#ifndef COIL_BASE_VERSION_H
#define COIL_BASE_VERSION_H

#include "coil/coil_version.h"

#define COIL_VERSION_TEXT COIL_VERSION

#endif
