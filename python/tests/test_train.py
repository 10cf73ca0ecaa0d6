"""coil.Trainer against closed forms: a linear regression (built with coil.Builder) trained
by SGD with momentum, weight decay and clipping matches the same steps computed in NumPy
to 1e-6; accumulation, inputs by name and cross_entropy's loss against NumPy; a resumed
checkpoint's steps bit-identical to an uninterrupted run's; mistakes as coil.Error."""
import os
import tempfile
import unittest

import numpy as np

import coil

W_TRUE = np.array([[1.5, -2], [0.5, 1], [-1, 0.25]])
B_TRUE = np.array([0.3, -0.7])
ROWS = 8


def linreg(seed=3):
    """loss = mean((x w + b - y)^2), built op by op, parameters drawn from seed."""
    b = coil.Builder("linreg")
    x, y = b.input("x", "f32[B,3]"), b.input("y", "f32[B,2]")
    w = b.param("w", "f32[3,2]", init="normal(0.3)")
    bias = b.param("b", "f32[2]", init="normal(0.3)")
    pred = x @ w + bias
    d = pred - y
    b.output("loss", b.op("mean", d * d))
    b.output("pred", pred)
    return b.build(threads=1).init_params(seed=seed)


def batch(step):
    r = np.arange(ROWS)[:, None]
    x = np.sin(0.9 * r + 1.7 * np.arange(3) + 0.37 * step).astype(np.float32)
    y = (x @ W_TRUE + B_TRUE + 0.05 * np.cos(r + 3.0 * np.arange(2) + step)).astype(np.float32)
    return x, y


def loss_and_grads(w, b, x, y):
    d = x.astype(np.float64) @ w + b - y
    g = 2 * d / d.size
    return (d * d).mean(), x.T.astype(np.float64) @ g, g.sum(axis=0)


class SGD:
    """coil's SGD (runtime/cpu/cpu_optim.c): the gradient clipped to a global norm, momentum,
    decoupled weight decay on parameters of rank >= 2, in float64."""

    def __init__(self, o, w, b):
        self.o, self.p = o, {"w": w.astype(np.float64), "b": b.astype(np.float64)}
        self.m = {k: np.zeros_like(v) for k, v in self.p.items()}

    def step(self, grads):
        o = self.o
        norm = np.sqrt(sum((g * g).sum() for g in grads.values()))
        scale = o["clip"] / norm if 0 < o["clip"] < norm else 1.0
        for k, g in grads.items():
            decay = o["lr"] * o["weight_decay"] if self.p[k].ndim >= 2 else 0.0
            self.m[k] = o["momentum"] * self.m[k] + g * scale
            self.p[k] = self.p[k] - decay * self.p[k] - o["lr"] * self.m[k]


def close(got, want):
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


class TrainTest(unittest.TestCase):
    def test_defaults(self):
        d = coil.train_defaults("sgd")
        self.assertEqual((d["optimizer"], d["momentum"], d["clip"], d["accum"], d["loss"]),
                         ("sgd", 0.9, 1.0, 1, None))
        self.assertEqual(coil.train_defaults()["optimizer"], "adamw")

    def test_sgd_closed_form(self):
        m = linreg()
        t = coil.Trainer(m, "sgd", lr=0.05, clip=2.0)  # momentum 0.9, weight decay 0.1
        self.assertEqual(t.inputs, ["x", "y"])
        self.assertEqual((t.options["lr"], t.options["weight_decay"]), (0.05, 0.1))
        oracle = SGD(t.options, t.param("w"), t.param("b"))
        clipped = 0
        for s in range(10):
            x, y = batch(s)
            want, gw, gb = loss_and_grads(oracle.p["w"], oracle.p["b"], x, y)
            close(t.step(x, y), want)
            clipped += np.sqrt((gw * gw).sum() + (gb * gb).sum()) > 2.0
            oracle.step({"w": gw, "b": gb})
        self.assertTrue(0 < clipped < 10)  # both branches of clipping taken
        self.assertEqual(t.steps, 10)
        close(t.param("w"), oracle.p["w"])
        close(t.params()["b"], oracle.p["b"])
        x, y = batch(100)
        before = m(x, y)[0]
        t.sync()  # the model runs the trained parameters from now on
        close(m(x, y)[0], loss_and_grads(oracle.p["w"], oracle.p["b"], x, y)[0])
        self.assertNotAlmostEqual(float(before), float(m(x, y)[0]), places=4)

    def test_accumulation_and_names(self):
        whole = coil.Trainer(linreg(), "sgd", lr=0.05)
        split = coil.Trainer(linreg(), "sgd", lr=0.05, accum=2)
        halves = coil.Trainer(linreg(), "sgd", lr=0.05, accum=2)
        named = coil.Trainer(linreg(), "sgd", lr=0.05)
        for s in range(3):
            x, y = batch(s)
            want = whole.step(x, y)
            close(split.step(x, y), want)  # each split in two micro-batches, in place
            close(halves.step(x[:4], y[:4], x[4:], y[4:]), want)
            self.assertEqual(named.step(y=y, x=x), want)
        for p in ("w", "b"):
            close(split.param(p), whole.param(p))
            np.testing.assert_array_equal(named.param(p), whole.param(p))

    def test_cross_entropy(self):
        b = coil.Builder("clf")
        x = b.input("x", "f32[B,4]")
        h = b.op("gelu", x @ b.param("fc1.weight", "f32[4,8]", init="xavier"))
        b.output("logits", h @ b.param("fc2.weight", "f32[8,3]", init="xavier"))
        m = b.build().init_params(seed=11)
        t = coil.Trainer(m, "adamw", lr=0.05, loss="cross_entropy", seed=11)
        self.assertEqual(t.inputs, ["x", "targets"])
        xs = np.random.default_rng(1).standard_normal((6, 4)).astype(np.float32)
        labels = np.array([0, 2, 1, 1, 0, 2], np.int64)
        logits = m(xs).astype(np.float64)
        logp = logits - logits.max(axis=1, keepdims=True)
        logp -= np.log(np.exp(logp).sum(axis=1, keepdims=True))
        close(t.step(xs, labels), -logp[np.arange(6), labels].mean())
        losses = [t.step(xs, labels) for _ in range(30)]
        self.assertLess(losses[-1], losses[0] / 2)

    def test_resume_bit_identical(self):
        opts = dict(lr=0.02, warmup=2, cosine_steps=8, min_lr=0.002, seed=5)
        whole = coil.Trainer(linreg(), "adamw", **opts)
        straight = [whole.step(*batch(s)) for s in range(8)]
        first = coil.Trainer(linreg(), "adamw", **opts)
        for s in range(3):
            first.step(*batch(s))
        rest = coil.Trainer(linreg(seed=99), "adamw", **opts)  # other initial values
        with tempfile.TemporaryDirectory() as d:
            self.assertIs(first.save(d), first)
            self.assertTrue(os.path.exists(os.path.join(d, "checkpoint.safetensors")))
            rest.resume(d)
        self.assertEqual(rest.steps, 3)
        self.assertEqual([rest.step(*batch(s)) for s in range(3, 8)], straight[3:])
        self.assertEqual(rest.steps, 8)
        for name, value in whole.params().items():
            np.testing.assert_array_equal(rest.param(name), value)

    def test_errors(self):
        m = linreg()
        with self.assertRaises(TypeError) as e:
            coil.Trainer(m, "sgd", learning_rate=0.1)
        self.assertIn("no option learning_rate", str(e.exception))
        cases = [
            (lambda: coil.Trainer(m, "adam"), "adam"),
            (lambda: coil.Trainer(m, "sgd", lr=0), "lr"),
            (lambda: coil.Trainer(m, "sgd", seed=-1), "seed -1"),
            (lambda: coil.Trainer("model.coil"), "it trains a coil.Model"),
        ]
        t = coil.Trainer(m, "sgd", accum=3)
        x, y = batch(0)
        cases += [
            (lambda: t.step(x), "1 inputs given; a step takes 2 (x, y), or 6"),
            (lambda: t.step(x, y), "8 rows do not split into accum=3"),
            (lambda: t.step(x[:3], y=y[:3]), "by position or by name, not both"),
            (lambda: t.step(x[:3], x[:3], x[:3], y[:3], y[:3], y[:3]), "input 'y'"),
            (lambda: t.param("v"), "no parameter 'v'; the model's: w, b"),
            (lambda: t.resume("/no/such/checkpoint"), "/no/such/checkpoint"),
        ]
        for call, fragment in cases:
            with self.assertRaises(coil.Error) as e:
                call()
            self.assertIn(fragment, str(e.exception))
        self.assertEqual(t.steps, 0)


if __name__ == "__main__":
    unittest.main()
