"""The Python package against its oracles: a graph whose result NumPy computes, the
reference interpreter (coil's f64 oracle), and a package coil compile wrote; errors as
exceptions with coil's message; outputs that outlive their model."""
import os
import subprocess
import tempfile
import time
import unittest

import numpy as np

import coil

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
TINY = os.path.join(ROOT, "examples", "tiny.coil")
AFFINE = """graph @affine(%x: f32[B,3], %b: f32[3]) -> (y: f32[B,3], s: f32[B]) {
  %two = full {value=2} : f32[]
  %m = mul %x, %two : f32[B,3]
  %y = add %m, %b : f32[B,3]
  %s = sum %y {axes=[1]} : f32[B]
  return %y, %s
}
"""


class CoilTest(unittest.TestCase):
    def test_against_numpy(self):
        m = coil.compile(AFFINE, name="affine.cir").init_params()
        x = np.arange(12, dtype=np.float32).reshape(4, 3)
        b = np.array([1, -1, 0.5], np.float32)
        y, s = m(x, b)
        np.testing.assert_array_equal(y, x * 2 + b)
        np.testing.assert_allclose(s, (x * 2 + b).sum(axis=1), rtol=1e-6)
        y2, _ = m(b=b, x=x)  # by name
        np.testing.assert_array_equal(y2, y)

    def test_compiled_against_interpreter(self):
        x = np.random.default_rng(0).standard_normal((8, 16)).astype(np.float32)
        got = coil.load(TINY).init_params(seed=3, dims={"B": 8})(x)
        want = coil.load(TINY, interpret=True).init_params(seed=3, dims={"B": 8})(x)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
        self.assertEqual(coil.load(TINY).outputs, ["logits", "probs"])

    def test_package(self):
        coil_bin = os.environ.get("COIL_BIN")
        if not coil_bin:
            self.skipTest("COIL_BIN not set")
        with tempfile.TemporaryDirectory() as d:
            subprocess.run([coil_bin, "compile", TINY, "-o", d], check=True, capture_output=True)
            x = np.ones((2, 16), np.float32)
            from_pkg = coil.load(d).init_params(seed=1, dims={"B": 2})(x)
            from_src = coil.load(TINY).init_params(seed=1, dims={"B": 2})(x)
            for a, b in zip(from_pkg, from_src):
                np.testing.assert_array_equal(a, b)

    def test_errors(self):
        m = coil.load(TINY).init_params(dims={"B": 2})
        with self.assertRaises(coil.Error) as e:
            m(np.ones((2, 3), np.float32))
        self.assertIn("input 'x': expected f32[B,16], got f32[2,3]", str(e.exception))
        with self.assertRaises(coil.Error) as e:
            coil.load("/no/such/model.coil")
        self.assertIn("/no/such/model.coil", str(e.exception))
        self.assertEqual(e.exception.code, 3)  # COIL_ERR_FILE
        with self.assertRaises(coil.Error) as e:
            coil.compile("model M(x: f32[B]) -> (y: f32[B]) {\n  return nosuch(x)\n}\n")
        self.assertRegex(str(e.exception), r"model\.coil:2:\d+")

    def test_constants_only_for_onnx(self):
        # an ONNX model's graph inputs may be fixed at load; the binding's struct carries
        # them to coil, which refuses them for any other format
        with self.assertRaises(coil.Error) as e:
            coil.load(TINY, constants={"x": np.array([2, 3], np.int64)})
        self.assertEqual(e.exception.code, 2)  # COIL_ERR_USAGE
        self.assertIn("input 'x' fixed at load: only an ONNX model's inputs can be", str(e.exception))

    def test_outputs_outlive_the_model(self):
        m = coil.compile(AFFINE, name="affine.cir")
        y, s = m(np.ones((2, 3), np.float32), np.zeros(3, np.float32))
        view = y[1:]
        del m, y
        np.testing.assert_array_equal(view, np.full((1, 3), 2, np.float32))

    def test_torch_tensors(self):
        try:
            import torch
        except ImportError:
            self.skipTest("no PyTorch")
        m = coil.load(TINY).init_params(seed=2, dims={"B": 3})
        x = torch.randn(3, 16)
        got = m(x)  # a CPU tensor is read in place through DLPack (test_dlpack.py)
        want = m(x.numpy())
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
        t = torch.from_numpy(got[0])  # and an output becomes a tensor without a copy
        self.assertTrue(np.shares_memory(t.numpy(), got[0]))

    def test_call_overhead(self):
        m = coil.compile("graph @one(%x: f32[1]) -> (y: f32[1]) {\n  %y = neg %x : f32[1]\n"
                         "  return %y\n}\n", name="one.cir")
        def per_call(x, n=5000):
            for _ in range(100):
                m(x)
            t0 = time.perf_counter()
            for _ in range(n):
                m(x)
            return (time.perf_counter() - t0) / n

        per = per_call(np.ones(1, np.float32))
        print(f"\ncall overhead on a 1-element model: {per * 1e6:.1f} us")
        self.assertLess(per, 1e-3)  # the 20 us target is measured, not asserted: machines vary
        try:
            import torch
        except ImportError:
            return
        print(f"from a PyTorch tensor (DLPack): {per_call(torch.ones(1)) * 1e6:.1f} us")


if __name__ == "__main__":
    unittest.main()
