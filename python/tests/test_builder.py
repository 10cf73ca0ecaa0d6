"""coil.Builder against its oracles: an MLP built op by op computes what NumPy computes from
the same weights, compiled and interpreted alike, and prints as the IR text it stands for;
attributes written as the IR writes them; every kind of mistake a coil.Error with coil's
message, after which the builder goes on."""
import unittest

import numpy as np

import coil
from coil.builder import attr_text

RNG = np.random.default_rng(7)
W1 = RNG.standard_normal((4, 8)).astype(np.float32)
B1 = RNG.standard_normal(8).astype(np.float32)
W2 = RNG.standard_normal((8, 3)).astype(np.float32)
X = RNG.standard_normal((5, 4)).astype(np.float32)


def mlp_builder():
    b = coil.Builder("mlp")
    x = b.input("x", "f32[B,4]")
    w1 = b.param("fc1.weight", "f32[4,8]", init="xavier")
    b1 = b.param("fc1.bias", "f32[8]", init="normal(0.5)")
    w2 = b.param("fc2.weight", "f32[8,3]", init="xavier")
    h = b.op("relu", x @ w1 + b1)
    logits = h @ w2
    b.output("logits", logits)
    b.output("probs", b.op("softmax", logits, axis=-1))
    return b


def mlp_numpy(x):
    h = np.maximum(x.astype(np.float64) @ W1 + B1, 0)
    logits = h @ W2
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return logits, e / e.sum(axis=1, keepdims=True)


def set_weights(m):
    return m.set_param("fc1.weight", W1).set_param("fc1.bias", B1).set_param("fc2.weight", W2)


class BuilderTest(unittest.TestCase):
    def test_mlp_against_numpy(self):
        b = mlp_builder()
        compiled = set_weights(b.build(threads=1))
        interpreted = set_weights(b.build(interpret=True))  # the builder builds again
        want = mlp_numpy(X)
        for m in (compiled, interpreted):
            self.assertEqual(m.outputs, ["logits", "probs"])
            self.assertEqual(m.params, ["fc1.weight", "fc1.bias", "fc2.weight"])
            for got, w in zip(m(X), want):
                np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-6)
        self.assertIn('%1 = param {name="fc1.bias", init="normal(0.5)"} : f32[8]',
                      compiled.dump())

    def test_same_as_ir_text(self):
        text = """graph @mlp(%x: f32[B,4]) -> (logits: f32[B,3], probs: f32[B,3]) {
  %0 = param {name="fc1.weight", init="xavier"} : f32[4,8]
  %1 = param {name="fc1.bias", init="normal(0.5)"} : f32[8]
  %2 = param {name="fc2.weight", init="xavier"} : f32[8,3]
  %3 = matmul %x, %0 : f32[B,8]
  %4 = add %3, %1 : f32[B,8]
  %5 = relu %4 : f32[B,8]
  %6 = matmul %5, %2 : f32[B,3]
  %7 = softmax %6 {axis=-1} : f32[B,3]
  return %6, %7
}
"""
        built = mlp_builder().build().init_params(seed=4)
        loaded = coil.compile(text, name="mlp.cir").init_params(seed=4)
        self.assertEqual(built.dump(), loaded.dump())
        for a, b in zip(built(X), loaded(X)):
            np.testing.assert_array_equal(a, b)

    def test_ops_and_attributes(self):
        b = coil.Builder("ops")
        x = b.input("x", "f32[2,3]")
        y = b.input("y", "f32[2,3]")
        two = b.op("full", value=2, type="f32[]")
        c = b.constant(np.arange(6, dtype=np.float32).reshape(2, 3))
        outs = {
            "arith": (x + y) * two - x / y,
            "neg": -x + c,
            "sum": b.op("sum", x, axes=[1], keepdim=True),
            "t": b.op("transpose", x, perm=(1, 0)),
            "flat": b.op("reshape", x, type="f32[6]"),
            "norm": b.op("layer_norm", x, eps=0.5),
            "slice": b.op("slice", x, axis=1, start=1, end=3),
            "mask": b.op("where", b.op("gt", x, y), x, y),
        }
        for name, v in outs.items():
            b.output(name, v)
        m = b.build()
        xa = np.array([[1, -2, 3], [0.5, 4, -1]], np.float32)
        ya = np.array([[2, 1, -3], [0.25, 8, 2]], np.float32)
        got = dict(zip(m.outputs, m(xa, ya)))
        mu = xa.mean(axis=1, keepdims=True)
        var = ((xa - mu) ** 2).mean(axis=1, keepdims=True)
        want = {
            "arith": (xa + ya) * 2 - xa / ya,
            "neg": -xa + np.arange(6).reshape(2, 3),
            "sum": xa.sum(axis=1, keepdims=True),
            "t": xa.T,
            "flat": xa.ravel(),
            "norm": (xa - mu) / np.sqrt(var + 0.5),
            "slice": xa[:, 1:3],
            "mask": np.where(xa > ya, xa, ya),
        }
        for name in want:
            np.testing.assert_allclose(got[name], want[name], rtol=1e-6, err_msg=name)

    def test_attribute_text(self):
        self.assertEqual(attr_text("op", dict(axes=[1, 0], keepdim=True, eps=1e-05, axis=-1)),
                         "axes=[1, 0], keepdim=true, eps=1e-05, axis=-1")
        self.assertEqual(attr_text("op", dict(value=float("-inf"), p=np.float32(0.5),
                                              seed=np.int64(3), perm=())),
                         "value=-inf, p=0.5, seed=3, perm=[]")
        self.assertEqual(attr_text("op", dict(value=np.array([[1.5, 2], [3, 4]]))),
                         "value=[1.5, 2.0, 3.0, 4.0]")
        self.assertEqual(attr_text("op", dict(init='a "b"\\\n\x01')),
                         'init="a \\"b\\"\\\\\\n\\x01"')
        with self.assertRaises(coil.Error) as e:
            attr_text("sum", dict(axes={1}))
        self.assertIn("sum: attribute 'axes' is a set", str(e.exception))

    def test_errors_leave_the_builder_usable(self):
        b = coil.Builder("e")
        x = b.input("x", "f32[B,3]")
        w = b.param("w", "f32[3,2]", init="xavier")
        cases = [
            (lambda: b.op("matmull", x, w), 2, "unknown op 'matmull'; did you mean 'matmul'?"),
            (lambda: b.op("matmul", w, w), 5, "inner dimensions 2 and 3 differ"),
            (lambda: b.op("sum", x, axs=[1]), 4, "did you mean 'axes'?"),
            (lambda: b.input("x", "f32[2]"), 2, "'x': %0 is already the input of that name"),
            (lambda: b.op("relu", x, type="f32[B,5]"), 5, "is not the inferred f32[B,3]"),
            (lambda: b.param("v", "f32[2]", init="gauss"), 2, "bad initializer \"gauss\""),
            (lambda: coil.Builder("o").op("relu", x), 2, "operand 0 is a value of builder 'e'"),
            (lambda: b.op("relu", X), 2, "operand 0 is a ndarray"),
            (lambda: x + 1, 2, "add: 1 is not a coil.Value"),
            (lambda: b.output("y", 3), 2, "operand 0 is a int"),
        ]
        for call, code, fragment in cases:
            with self.assertRaises(coil.Error) as e:
                call()
            self.assertEqual(e.exception.code, code, str(e.exception))
            self.assertIn(fragment, str(e.exception))
        b.output("y", x @ w)
        m = b.build().init_params(seed=1)
        self.assertEqual(m.types("outputs"), {"y": "f32[B,2]"})
        self.assertEqual(m(X[:, :3]).shape, (5, 2))
        with self.assertRaises(coil.Error) as e:
            m.set_param("v", np.zeros((3, 2), np.float32))
        self.assertIn("no parameter 'v'; the model's: w", str(e.exception))
        with self.assertRaises(coil.Error) as e:
            m.set_param("w", np.zeros((2, 3), np.float32))
        self.assertEqual(e.exception.code, 5)
        self.assertIn("'w'", str(e.exception))


if __name__ == "__main__":
    unittest.main()
