/* device_helpers.h — the device helpers every generated CUDA source starts with (device_helpers.c). */
#ifndef COIL_CODEGEN_CUDA_PRELUDE_H
#define COIL_CODEGEN_CUDA_PRELUDE_H

extern const char cuda_prelude[];

#endif
