"""The Python package at parity with the command line: mode, cache and dims; prepare; save
(a package coil.load and `coil run` load); outputs by name into caller-owned arrays; IR
dumps (the same text as `coil dump --after`); the profile. Held against NumPy, the
source model's outputs and the command line."""
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
X = np.cos(0.17 * np.arange(4 * 16, dtype=np.float32)).reshape(4, 16)


def coil_bin():
    return os.environ.get("COIL_BIN")


class ParityTest(unittest.TestCase):
    def test_mode_cache_dims(self):
        with tempfile.TemporaryDirectory() as d:
            cache = os.path.join(d, "autotune.json")
            tuned = coil.load(TINY, mode="max-autotune", cache=cache, dims={"B": 4}, threads=2)
            tuned.init_params(seed=9).prepare()
            self.assertGreater(os.path.getsize(cache), 0)
            plain = coil.load(TINY).init_params(seed=9)
            for a, b in zip(tuned(X), plain(X)):
                np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
        with self.assertRaises(coil.Error) as e:
            coil.load(TINY, mode="fast")
        self.assertEqual(e.exception.code, 2)
        self.assertIn("default, reduce-overhead or max-autotune", str(e.exception))
        self.assertEqual(coil.MODES, ("default", "reduce-overhead", "max-autotune"))

    def test_prepare(self):
        # without the object cache, so that the cold call compiles whole
        os.environ["COIL_CODE_CACHE"] = "0"
        self.addCleanup(os.environ.pop, "COIL_CODE_CACHE")
        cold = coil.load(TINY).init_params(seed=1)
        warm = coil.load(TINY).init_params(seed=1).prepare(dims={"B": 4})
        t0 = time.perf_counter()
        got = warm(X)
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        want = cold(X)
        cold_first = time.perf_counter() - t0
        print(f"\nfirst call: {cold_first * 1e3:.1f} ms cold, {first * 1e3:.3f} ms after prepare")
        self.assertLess(first, cold_first / 4)
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, b)

    def test_save(self):
        with tempfile.TemporaryDirectory() as d:
            pkg = os.path.join(d, "tiny.pkg")
            src = coil.load(TINY).init_params(seed=5).save(pkg)
            loaded = coil.load(pkg).init_params(seed=5)
            for a, b in zip(src(X), loaded(X)):
                np.testing.assert_array_equal(a, b)
            if coil_bin():
                run = subprocess.run([coil_bin(), "run", pkg, "--dim", "B=2"], check=True,
                                     capture_output=True, text=True)
                self.assertIn("logits f32[2,10] sum=", run.stdout)

    def test_named_outputs_into_arrays(self):
        m = coil.compile(AFFINE, name="affine.cir")
        x = np.arange(12, dtype=np.float32).reshape(4, 3)
        b = np.array([1, -1, 0.5], np.float32)
        (s,) = m.run({"b": b, "x": x}, outputs=["s"])
        np.testing.assert_array_equal(s, (2 * x + b).sum(axis=1))
        y_buf = np.empty((4, 3), np.float32)
        y, s = m.run([x, b], outputs=["y", "s"], out={"y": y_buf})
        self.assertIs(y, y_buf)
        np.testing.assert_array_equal(y_buf, 2 * x + b)
        np.testing.assert_array_equal(s, (2 * x + b).sum(axis=1))
        with self.assertRaises(coil.Error) as e:
            m.run({"x": x, "b": b}, outputs=["y"], out=[np.empty((3, 3), np.float32)])
        self.assertEqual(e.exception.code, 5)
        self.assertIn("output 'y'", str(e.exception))
        with self.assertRaises(coil.Error) as e:
            m.run({"x": x, "b": b}, outputs=["y"], out=[np.empty((3, 4), np.float32).T])
        self.assertIn("C-contiguous", str(e.exception))
        with self.assertRaises(coil.Error) as e:
            m.run({"x": x, "c": b})
        self.assertIn("no input 'c'", str(e.exception))

    def test_dump(self):
        m = coil.load(TINY)
        self.assertIn("graph @Tiny(", m.dump())
        lower = m.dump("lower")
        self.assertTrue(lower.startswith("program @Tiny"))
        if coil_bin():
            want = subprocess.run([coil_bin(), "dump", TINY, "--after=lower"], check=True,
                                  capture_output=True, text=True).stdout
            self.assertEqual(lower, want)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "fused.cir")
            m.dump("fuse", path=path)
            with open(path) as f:
                self.assertEqual(f.read(), m.dump("fuse"))
        with self.assertRaises(coil.Error) as e:
            m.dump("codegen")
        self.assertIn("fuse, lower, llvm-ir, asm", str(e.exception))

    def test_profile(self):
        m = coil.load(TINY, profile=True, threads=1).init_params(seed=2).prepare(dims={"B": 4})
        for _ in range(3):
            m(X)
        p = m.profile(reset=True)
        self.assertEqual(p["runs"], 3)
        ms = [s["ms"] for s in p["steps"]]
        self.assertEqual(ms, sorted(ms, reverse=True))
        self.assertAlmostEqual(sum(ms), p["ms"])
        self.assertEqual(sorted(s["kind"] for s in p["steps"]).count("gemm"), 2)
        with self.assertRaises(coil.Error):  # reset: nothing ran since
            m.profile()


if __name__ == "__main__":
    unittest.main()
