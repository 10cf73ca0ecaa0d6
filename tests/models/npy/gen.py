#!/usr/bin/python3
# gen.py — writes the small .npy fixtures that tests/unit/test_npy.c and the lit CLI tests
# read, with NumPy itself as the independent writer. Run: /usr/bin/python3 tests/models/npy/gen.py
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def save(name, a, **kw):
    with open(os.path.join(HERE, name), 'wb') as f:
        np.lib.format.write_array(f, a, **kw)


save('f32_2x3.npy', np.arange(1, 7, dtype=np.float32).reshape(2, 3))
save('f32_v2.npy', np.array([[0.5, -1.25]], dtype=np.float32), version=(2, 0))
save('f32_scalar.npy', np.array(3.25, dtype=np.float32))
save('f16_3.npy', np.array([1.5, -2.0, 65504.0], dtype=np.float16))
save('bf16_2.npy', np.array([0x3f80, 0x4049], dtype=np.uint16))  # bf16 1.0, 3.140625
save('i8_2x2.npy', np.array([[-128, 127], [0, -1]], dtype=np.int8))
save('i32_2.npy', np.array([-7, 2**31 - 1], dtype=np.int32))
save('i64_3.npy', np.array([0, 2, -5], dtype=np.int64))
save('bool_4.npy', np.array([True, False, True, True]))
save('f32_empty.npy', np.zeros((0, 3), dtype=np.float32))
save('fortran.npy', np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3)))
save('f64_2.npy', np.array([1.0, 2.0]))
save('f32_bigendian.npy', np.array([1.0, 2.0], dtype='>f4'))
