#!/usr/bin/env python3
"""gen.py — writes fixture.safetensors with the reference `safetensors` package (its Rust
serializer, not coil's code), one tensor per dtype coil reads, for tests/unit/test_safetensors.c.

Run with any python that has `safetensors` and `numpy` (Debian's python3 lacks safetensors):
    python3 -m venv /tmp/st && /tmp/st/bin/pip install safetensors numpy
    /tmp/st/bin/python tests/models/safetensors/gen.py
The values are chosen exactly representable in their dtype; test_safetensors.c holds the
same numbers, so changing one side without the other fails the test.
"""
import os

import numpy as np
from safetensors import TensorSpec, serialize_file

HERE = os.path.dirname(os.path.abspath(__file__))


def bf16_bits(values):
    """bf16 is the upper half of an f32; the values below are exact, so no rounding."""
    f = np.asarray(values, dtype=np.float32)
    bits = (f.view(np.uint32) >> 16).astype(np.uint16)
    assert np.array_equal((bits.astype(np.uint32) << 16).view(np.float32), f)
    return bits


TENSORS = {
    # name: (safetensors dtype, numpy array holding the bytes)
    "layer.weight": ("float32", np.array([[1.5, -2.25, 3.0], [0.1, 1e-8, -0.0]], dtype=np.float32)),
    "layer.bias": ("float32", np.array([0.5, -1.0, 65504.0], dtype=np.float32)),
    "half": ("float16", np.array([1.0, -0.5, 65504.0, 2.0 ** -24], dtype=np.float16)),
    "brain": ("bfloat16", bf16_bits([[1.0, -2.5], [0.15625, 2.0 ** 127]])),
    "ids": ("int64", np.array([2 ** 40 + 7, -5, 0], dtype=np.int64)),
    "counts": ("int32", np.array([[7, -2147483648], [2147483647, 0]], dtype=np.int32)),
    "small": ("int8", np.array([-128, 0, 127], dtype=np.int8)),
    "mask": ("bool", np.array([True, False, False, True], dtype=np.bool_)),
    "scalar": ("float32", np.array([42.0], dtype=np.float32)),
    "empty": ("float32", np.zeros((0, 3), dtype=np.float32)),
}


def main():
    keep = []  # the arrays must outlive serialize_file, which reads them by pointer
    specs = {}
    for name, (dtype, arr) in TENSORS.items():
        arr = np.ascontiguousarray(arr)
        keep.append(arr)
        specs[name] = TensorSpec(dtype=dtype, shape=list(arr.shape), data_ptr=arr.ctypes.data,
                                 data_len=arr.nbytes)
    path = os.path.join(HERE, "fixture.safetensors")
    serialize_file(specs, path, metadata={"format": "pt", "producer": "tests/models/safetensors/gen.py"})
    print(f"wrote {path} ({os.path.getsize(path)} bytes)")


if __name__ == "__main__":
    main()
