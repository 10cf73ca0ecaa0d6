/* npy.h — NumPy .npy files to and from host tensors: graph inputs and outputs travel as
 * .npy. bf16 has no NumPy dtype, so it is stored as its 16 bits ("<u2") and read back so. */
#ifndef COIL_RUNTIME_NPY_H
#define COIL_RUNTIME_NPY_H

#include "ir/ir.h"

/* Read a C-order .npy (format 1.0, 2.0 or 3.0) of any dtype in dtype_info[].npy into t
 * (allocated here; "<u2" gives a bf16 tensor). Errors start with the path. */
bool npy_read(const char *path, Tensor *t, Err *e);
/* Write t as a format 1.0 .npy (2.0 when the header needs more than 64 KiB), whole or not
 * at all: through a temporary renamed over path, removed when a write fails. */
bool npy_write(const char *path, const Tensor *t, Err *e);

#endif
