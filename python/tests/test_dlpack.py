"""Inputs through DLPack, read in place: the pointer coil receives (seen by a spy on the C
call) is the tensor's own when it is contiguous and of the input's dtype, and a converted
copy's otherwise, with the same results; bf16 and bool tensors; outputs that become PyTorch
tensors without a copy and outlive their model; a GPU tensor refused with a coil.Error.
PyTorch's cases skip without it; the rest run on NumPy alone."""
import ctypes
import gc
import unittest

import numpy as np

import coil
from coil import _lib
from coil._tensors import bf16_bits

try:
    import torch
except ImportError:
    torch = None

AFFINE = """graph @affine(%x: f32[B,3], %b: f32[3]) -> (y: f32[B,3]) {
  %two = full {value=2} : f32[]
  %m = mul %x, %two : f32[B,3]
  %y = add %m, %b : f32[B,3]
  return %y
}
"""
KINDS = """graph @kinds(%h: bf16[4], %k: bool[4], %i: i64[4]) -> (h: f32[4], k: i32[4], i: i64[4]) {
  %0 = cast %h : f32[4]
  %1 = cast %k : i32[4]
  %2 = neg %i : i64[4]
  return %0, %1, %2
}
"""
X = np.arange(12, dtype=np.float32).reshape(4, 3) - 5.5
B = np.array([1, -1, 0.5], np.float32)


class Spy:
    """Records the data pointers of the inputs each call of a C function is given."""

    def __init__(self, name, ninputs_arg=2):
        self.name, self.n_arg, self.seen = name, ninputs_arg, []

    def __enter__(self):
        self.real = getattr(_lib.lib, self.name)

        def spy(*args):
            ins, n = args[self.n_arg - 1], args[self.n_arg]
            self.seen.append([ins[i].data for i in range(n)])
            return self.real(*args)
        setattr(_lib.lib, self.name, spy)
        return self

    def __exit__(self, *exc):
        setattr(_lib.lib, self.name, self.real)


class Exporter:
    """An object that speaks DLPack and nothing else (as a JAX array does)."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, stream=None):
        return self.a.__dlpack__()

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32),
                ("device_id", ctypes.c_int32), ("ndim", ctypes.c_int32),
                ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.c_void_p),
                ("byte_offset", ctypes.c_uint64), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


class FakeGPUTensor:
    """A DLPack capsule describing an f32[4,3] tensor on cuda:1 (no GPU needed)."""

    def __init__(self):
        self.shape = (ctypes.c_int64 * 2)(4, 3)
        self.dl = _DLManagedTensor(data=0x1000, device_type=2, device_id=1, ndim=2, code=2,
                                   bits=32, lanes=1, shape=self.shape)

    def __dlpack__(self, stream=None):
        new = ctypes.pythonapi.PyCapsule_New
        new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p,
                                                       ctypes.c_void_p]
        return new(ctypes.addressof(self.dl), b"dltensor", None)

    def __dlpack_device__(self):
        return (2, 1)


class DLPackTest(unittest.TestCase):
    def setUp(self):
        self.m = coil.compile(AFFINE, name="affine.cir")
        self.want = X * 2 + B

    def run_spied(self, *inputs):
        with Spy("coil_run") as spy:
            y = self.m(*inputs)
        return y, spy.seen[0]

    def test_numpy_in_place(self):
        y, seen = self.run_spied(X, B)
        self.assertEqual(seen, [X.ctypes.data, B.ctypes.data])
        np.testing.assert_array_equal(y, self.want)
        y, seen = self.run_spied(Exporter(X), B)  # the DLPack route of a NumPy array
        self.assertEqual(seen[0], X.ctypes.data)
        np.testing.assert_array_equal(y, self.want)

    def test_converted_once(self):
        for x in (X.T.copy().T, X.astype(np.float64), X.tolist(), Exporter(X.astype(np.float64))):
            y, seen = self.run_spied(x, B)
            self.assertNotEqual(seen[0], X.ctypes.data)
            np.testing.assert_array_equal(y, self.want)
        with self.assertRaises(coil.Error) as e:  # floats are not cut to integers silently
            coil.compile(KINDS, name="kinds.cir")(np.zeros(4, np.uint16), np.zeros(4, bool),
                                                  np.full(4, 1.5))
        self.assertIn("input 'i': float64 values for an input of dtype i64", str(e.exception))

    def test_gpu_tensor_refused(self):
        with self.assertRaises(coil.Error) as e:
            self.m(FakeGPUTensor(), B)
        self.assertEqual(e.exception.code, 6)
        self.assertIn("input 'x': a tensor on cuda:1", str(e.exception))
        self.assertIn("copy it to the CPU first", str(e.exception))
        if torch is not None and torch.cuda.is_available():
            with self.assertRaises(coil.Error) as e:
                self.m(torch.from_numpy(X).cuda(), B)
            self.assertIn("a tensor on cuda:0", str(e.exception))

    def test_bf16_rounding(self):
        f = np.array([1.0, 1.00390625, 1.01171875, -2.5, 3e38, np.inf, -np.inf, 1e-40],
                     np.float32)  # exact, a tie to even (down), a tie to even (up), ...
        self.assertEqual(bf16_bits(f).tolist(),
                         [0x3F80, 0x3F80, 0x3F82, 0xC020, 0x7F62, 0x7F80, 0xFF80, 0x0001])
        self.assertTrue(np.isnan((bf16_bits(np.float32([np.nan])).astype(np.uint32) << 16)
                                 .view(np.float32)[0]))
        if torch is not None:
            r = np.random.default_rng(0).standard_normal(1000).astype(np.float32) * 1e3
            want = torch.from_numpy(r).to(torch.bfloat16).view(torch.int16).numpy()
            np.testing.assert_array_equal(bf16_bits(r), want.view(np.uint16))

    def test_torch_in_place(self):
        if torch is None:
            self.skipTest("no PyTorch")
        x, b = torch.from_numpy(X.copy()), torch.from_numpy(B.copy())
        y, seen = self.run_spied(x, b)
        self.assertEqual(seen, [x.data_ptr(), b.data_ptr()])
        np.testing.assert_array_equal(y, self.want)
        rows = torch.from_numpy(np.vstack([X, X]))[4:]  # a view at an offset: still in place
        y, seen = self.run_spied(rows, b)
        self.assertEqual(seen[0], rows.data_ptr())
        np.testing.assert_array_equal(y, self.want)
        for other in (x.T.contiguous().T, x.double()):  # strided, f64: converted once
            y, seen = self.run_spied(other, b)
            self.assertNotEqual(seen[0], other.data_ptr())
            np.testing.assert_array_equal(y, self.want)
        with self.assertRaises(coil.Error) as e:
            self.m(x.requires_grad_(), b)
        self.assertIn("input 'x': its DLPack export failed", str(e.exception))

    def test_torch_dtypes(self):
        if torch is None:
            self.skipTest("no PyTorch")
        m = coil.compile(KINDS, name="kinds.cir")
        h = torch.tensor([1.5, -2.0, 3.25, 1e-3]).to(torch.bfloat16)
        k = torch.tensor([True, False, True, True])
        i = torch.tensor([1, -2, 3, 2**40])
        with Spy("coil_run") as spy:
            hf, ki, ni = m(h, k, i)
        self.assertEqual(spy.seen[0], [h.data_ptr(), k.data_ptr(), i.data_ptr()])
        np.testing.assert_array_equal(hf, h.float().numpy())
        np.testing.assert_array_equal(ki, [1, 0, 1, 1])
        np.testing.assert_array_equal(ni, -i.numpy())
        with self.assertRaises(coil.Error) as e:  # bf16 given for f32: NumPy cannot read it
            self.m(torch.from_numpy(X).to(torch.bfloat16), B)
        self.assertIn("input 'x'", str(e.exception))

    def test_outputs_to_torch_without_copy(self):
        if torch is None:
            self.skipTest("no PyTorch")
        y = self.m(X, B)
        t = torch.from_dlpack(y)
        self.assertEqual(t.data_ptr(), y.ctypes.data)
        del y, self.m
        gc.collect()  # the tensor holds coil's buffer alive
        np.testing.assert_array_equal(t.numpy(), self.want)

    def test_trainer_reads_tensors_in_place(self):
        if torch is None:
            self.skipTest("no PyTorch")
        text = """graph @lin(%x: f32[B,3]) -> (logits: f32[B,2]) {
  %w = param {name="w", init="xavier"} : f32[3,2]
  %0 = matmul %x, %w : f32[B,2]
  return %0
}
"""
        m = coil.compile(text, name="lin.cir").init_params(seed=2)
        a = coil.Trainer(m, "sgd", lr=0.1, loss="cross_entropy")
        b = coil.Trainer(m, "sgd", lr=0.1, loss="cross_entropy")
        x, targets = torch.from_numpy(X.copy()), torch.tensor([0, 1, 1, 0])
        with Spy("coil_train_step", ninputs_arg=2) as spy:
            la = a.step(x, targets)
        self.assertEqual(spy.seen[0], [x.data_ptr(), targets.data_ptr()])
        self.assertEqual(b.step(X, targets.numpy()), la)
        np.testing.assert_array_equal(a.param("w"), b.param("w"))


if __name__ == "__main__":
    unittest.main()
