#!/usr/bin/python3
# gen_ops.py — writes tests/models/ops/: one tiny graph per case (<case>.cir), its inputs and
# the values it must produce, computed here with numpy/PyTorch in float64, independently of C.
"""Regenerate with Debian's python3 (numpy + torch): /usr/bin/python3 tests/models/gen_ops.py

Each case is a graph in IR text form plus .npy files:
  <case>.<input-or-param-name>.npy   a value fed to the graph (bf16 stored as uint16 bits)
  <case>.expect.<output-name>.npy    what the reference interpreter must produce
Expected values follow coil's evaluation rule: operands are read exactly, the op is computed
in float64, and the result is rounded to the node's dtype (floats: round to nearest even,
straight from f64; ints: truncate toward zero, then wrap; bool: v != 0). Graphs with several
nodes round every intermediate the same way. Nothing here calls or mirrors the C code: the
transcendental functions, reductions and composites come from numpy and torch, the
Philox generator is written from the Random123 paper and checked against its known answers.
"""
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
OUT_DIR = os.path.join(HERE, "ops")
RNG = np.random.default_rng(20240601)

# ---------------------------------------------------------------- dtypes

NUMPY_STORAGE = {"f32": np.float32, "f16": np.float16, "bf16": np.uint16, "i8": np.int8,
                 "i32": np.int32, "i64": np.int64, "bool": np.bool_}
INT_BITS = {"i8": 8, "i32": 32, "i64": 64}
FLOATS = ("f32", "f16", "bf16")


def round_bf16(v):
    """Round float64 values to bfloat16 (8 significant bits, f32's exponent range), ties to
    even, in one step from f64 (rounding through f32 first would round twice)."""
    v = np.asarray(v, np.float64)
    out = v.copy()
    sel = np.isfinite(v) & (v != 0)
    x = v[sel]
    _, e = np.frexp(x)                      # x = m * 2^e with 0.5 <= |m| < 1
    lead = np.maximum(e - 1, -126)          # exponent of the leading bit; subnormals clamp
    quantum = np.ldexp(1.0, lead - 7)
    r = np.rint(x / quantum) * quantum      # np.rint rounds half to even
    r[np.abs(r) >= 2.0 ** 128] = np.copysign(np.inf, x[np.abs(r) >= 2.0 ** 128])
    out[sel] = r
    return out


def wrap_int(v, bits):
    """Truncate toward zero, then wrap to `bits` two's complement bits (exact, Python ints)."""
    flat = [((int(x) + (1 << (bits - 1))) % (1 << bits)) - (1 << (bits - 1))
            for x in np.trunc(np.asarray(v, np.float64)).ravel()]
    return np.array(flat, np.float64).reshape(np.shape(v))


def round_to(dt, v):
    """The float64 value a tensor of dtype dt holds after storing v."""
    v = np.asarray(v, np.float64)
    if dt == "f32":
        return v.astype(np.float32).astype(np.float64)
    if dt == "f16":  # numpy converts f64 -> f16 directly, rounding to nearest even
        return v.astype(np.float16).astype(np.float64)
    if dt == "bf16":
        return round_bf16(v)
    if dt == "bool":
        return (v != 0).astype(np.float64)
    return wrap_int(v, INT_BITS[dt])


def storage(dt, v):
    """The array np.save writes for a (already rounded) float64 value of dtype dt: C order,
    as coil's reader requires (transposes would otherwise be saved in Fortran order)."""
    v = np.array(v, np.float64, order="C")  # not ascontiguousarray: it makes 0-d arrays 1-d
    if dt == "bf16":
        return (v.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    return v.astype(NUMPY_STORAGE[dt])


def check_bf16_rounding():
    """round_bf16 must agree with torch's f32 -> bf16 conversion on f32 values (where no
    double rounding can occur), including ties, subnormals and overflow."""
    xs = np.concatenate([RNG.standard_normal(2000) * 10.0 ** RNG.integers(-40, 38, 2000),
                         [1 + 2 ** -8, 1 + 3 * 2 ** -8, 2.0 ** -130, 3.3895e38, -3.4e38]])
    xs = xs.astype(np.float32)
    want = torch.from_numpy(xs).to(torch.bfloat16).to(torch.float64).numpy()
    got = round_bf16(xs.astype(np.float64))
    assert np.array_equal(got, want), "round_bf16 disagrees with torch"


# ---------------------------------------------------------------- Philox4x32-10

MASK32 = 0xFFFFFFFF


def philox4x32_10(ctr, key):
    """Philox4x32 with 10 rounds (Salmon et al., SC'11), written from the paper: the key
    is bumped by the Weyl constants before every round but the first."""
    m0, m1, w0, w1 = 0xD2511F53, 0xCD9E8D57, 0x9E3779B9, 0xBB67AE85
    c0, c1, c2, c3 = ctr
    k0, k1 = key
    for rnd in range(10):
        if rnd > 0:
            k0, k1 = (k0 + w0) & MASK32, (k1 + w1) & MASK32
        p0, p1 = m0 * c0, m1 * c2
        c0, c1, c2, c3 = (p1 >> 32) ^ c1 ^ k0, p1 & MASK32, (p0 >> 32) ^ c3 ^ k1, p0 & MASK32
    return [c0, c1, c2, c3]


# Random123's tests/kat_vectors, the three "philox4x32 10" lines: counter, key, result.
RANDOM123_KAT = [
    ([0, 0, 0, 0], [0, 0], [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8]),
    ([MASK32] * 4, [MASK32] * 2, [0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd]),
    ([0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344], [0xa4093822, 0x299f31d0],
     [0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1]),
]


def check_philox():
    for ctr, key, want in RANDOM123_KAT:
        assert philox4x32_10(ctr, key) == want, "philox4x32_10 fails a Random123 vector"


def philox_words(seed, counter):
    """Stream mapping (ir/rng.c): the 64-bit seed is the key and the 128-bit counter is
    the element's counter, both split into 32-bit words, low word first."""
    ctr = [(counter >> (32 * i)) & MASK32 for i in range(4)]
    return philox4x32_10(ctr, [seed & MASK32, (seed >> 32) & MASK32])


def philox_uniform(seed, offset, shape):
    """Element i (row-major) of stream (seed, offset): word 0 of counter offset + i,
    its top 24 bits scaled to [0, 1)."""
    n = int(np.prod(shape, dtype=np.int64))
    u = [(philox_words(seed, offset + i)[0] >> 8) * 2.0 ** -24 for i in range(n)]
    return np.array(u, np.float64).reshape(shape)


# ---------------------------------------------------------------- cases


def fmt_num(x):
    """A number as IR text: integers without a point, floats shortest round-trip."""
    x = float(x)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if x == int(x) and abs(x) < 2 ** 53:
        return str(int(x))
    return repr(x)


def ty(dt, shape):
    return "%s[%s]" % (dt, ",".join(str(d) for d in shape))


class Case:
    """One fixture: a graph written as IR text, with its input files and expectations."""

    def __init__(self, name):
        self.name = name
        self.header = []   # "%x: f32[2,3]"
        self.body = []     # statements
        self.outputs = []  # (name, type text, value id)
        self.files = {}    # file name -> array

    def input(self, name, dt, values, shape_text=None):
        """A graph input; returns its value as the graph sees it (rounded to dt)."""
        v = round_to(dt, values)
        self.header.append("%%%s: %s" % (name, shape_text or ty(dt, v.shape)))
        self.files["%s.%s.npy" % (self.name, name)] = storage(dt, v)
        return v

    def param(self, ident, name, dt, values):
        v = round_to(dt, values)
        self.body.append('%%%s = param {name="%s", init="normal(0.02)"} : %s'
                         % (ident, name, ty(dt, v.shape)))
        self.files["%s.%s.npy" % (self.name, name)] = storage(dt, v)
        return v

    def node(self, text):
        self.body.append(text)

    def output(self, name, ident, dt, expected, shape_text=None):
        v = round_to(dt, expected)
        self.outputs.append((name, shape_text or ty(dt, v.shape), ident))
        self.files["%s.expect.%s.npy" % (self.name, name)] = storage(dt, v)

    def text(self):
        outs = ", ".join("%s: %s" % (n, t) for n, t, _ in self.outputs)
        lines = ["// generated by tests/models/gen_ops.py; do not edit",
                 "graph @%s(%s) -> (%s) {" % (self.name, ", ".join(self.header), outs)]
        lines += ["  " + s for s in self.body]
        lines.append("  return " + ", ".join("%" + i for _, _, i in self.outputs))
        lines.append("}")
        return "\n".join(lines) + "\n"


CASES = []


def case(name):
    c = Case(name)
    CASES.append(c)
    return c


def attrs_text(attrs):
    return " {%s}" % attrs if attrs else ""


def single(name, op, operands, out_dt, fn, attrs=""):
    """A graph of one op: operands are (name, dtype, values); fn maps their rounded values
    (float64) to the expected float64 result, rounded to out_dt afterwards."""
    c = case(name)
    vals = [c.input(n, dt, v) for n, dt, v in operands]
    want = np.asarray(fn(*vals), np.float64)
    c.node("%%y = %s %s%s : %s" % (op, ", ".join("%" + n for n, _, _ in operands),
                                    attrs_text(attrs), ty(out_dt, want.shape)))
    c.output("y", "y", out_dt, want)


def randn(*shape, scale=1.0):
    return RNG.standard_normal(shape) * scale


def t64(a):
    return torch.from_numpy(np.ascontiguousarray(a, np.float64))


# ---- leaves


def leaf_cases():
    c = case("param_matmul")
    x = c.input("x", "f32", randn(2, 4))
    w = c.param("w", "layers.0.w", "f32", randn(4, 3))
    c.node("%y = matmul %x, %w : f32[2,3]")
    c.output("y", "y", "f32", x @ w)

    for name, dt, data in [("constant_f32", "f32", [[1, 2.5, -3], [0.1, -1e-3, 6e4]]),
                           ("constant_i64", "i64", [2 ** 40 + 3, -7, 0]),
                           ("constant_bool", "bool", [1, 0, 1, 1])]:
        c = case(name)
        arr = np.array(data, np.float64)
        flat = ", ".join(fmt_num(x) for x in arr.ravel())
        c.node("%%y = constant {value=[%s]} : %s" % (flat, ty(dt, arr.shape)))
        c.output("y", "y", dt, arr)

    for name, dt, value, shape in [("full_f32", "f32", 2.5, (2, 2)), ("full_i32", "i32", -7, (3,)),
                                   ("full_bf16", "bf16", 0.1, (2, 3)), ("full_scalar", "f16", 1 / 3, ())]:
        c = case(name)
        c.node("%%y = full {value=%s} : %s" % (fmt_num(value), ty(dt, shape)))
        c.output("y", "y", dt, np.full(shape, value))

    for name, dt, shape, axis in [("iota_i64_axis1", "i64", (2, 3), 1), ("iota_f32_axis0", "f32", (3, 2), 0),
                                  ("iota_i32_3d", "i32", (2, 3, 2), 2), ("iota_neg_axis", "i64", (2, 4), -1)]:
        c = case(name)
        c.node("%%y = iota%s : %s" % (attrs_text("axis=%d" % axis if axis else ""), ty(dt, shape)))
        idx = np.indices(shape)[axis]
        c.output("y", "y", dt, idx)

    # the second stream's counter crosses 2^32 and its seed uses both key words
    for name, dt, shape, seed, offset in [("rand_f32", "f32", (2, 5), 42, 0),
                                          ("rand_wide_counter", "f32", (3, 3), 0x123456789AB, 2 ** 32 - 4),
                                          ("rand_bf16", "bf16", (2, 4), 7, 100)]:
        c = case(name)
        c.node("%%y = rand {seed=%d, offset=%d} : %s" % (seed, offset, ty(dt, shape)))
        c.output("y", "y", dt, philox_uniform(seed, offset, shape))


# ---- pointwise


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


UNARY = {
    "neg": lambda x: -x,
    "abs": np.abs,
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: 1.0 / np.sqrt(x),
    "reciprocal": lambda x: 1.0 / x,
    "tanh": np.tanh,
    "sigmoid": sigmoid,
    "relu": lambda x: np.maximum(x, 0.0),
    "gelu": lambda x: F.gelu(t64(x)).numpy(),
    "gelu_tanh": lambda x: F.gelu(t64(x), approximate="tanh").numpy(),
    "silu": lambda x: F.silu(t64(x)).numpy(),
    "sin": np.sin,
    "cos": np.cos,
    "erf": lambda x: torch.special.erf(t64(x)).numpy(),
}
POSITIVE_ONLY = {"log", "sqrt", "rsqrt"}


def unary_cases():
    for op, fn in UNARY.items():
        x = RNG.uniform(0.05, 4.0, (2, 4)) if op in POSITIVE_ONLY else randn(2, 4, scale=2.0)
        single(op + "_f32", op, [("x", "f32", x)], "f32", fn)
    single("neg_i8_wrap", "neg", [("x", "i8", [-128, -1, 0, 127])], "i8", lambda x: -x)
    single("abs_i32", "abs", [("x", "i32", [-5, 0, 7, -2147483647])], "i32", np.abs)
    single("relu_i64", "relu", [("x", "i64", [[-3, 0], [4, -1]])], "i64", UNARY["relu"])
    single("exp_f16", "exp", [("x", "f16", [-3.0, 0.0, 1.0, 2.5, 12.0])], "f16", np.exp)  # 12: inf
    single("tanh_bf16", "tanh", [("x", "bf16", randn(2, 3))], "bf16", np.tanh)
    single("gelu_bf16", "gelu", [("x", "bf16", randn(5, scale=2.0))], "bf16", UNARY["gelu"])
    single("log_special", "log", [("x", "f32", [0.0, 1.0, math.e, -1.0])], "f32", np.log)
    single("sqrt_special", "sqrt", [("x", "f32", [0.0, 4.0, np.inf, -1.0])], "f32", np.sqrt)
    single("sigmoid_tails", "sigmoid", [("x", "f32", [-40.0, -15.0, 0.0, 15.0, 40.0])], "f32", sigmoid)


def trunc_div(a, b):
    return np.trunc(a / b)


def binary_cases():
    cmp = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
           "gt": np.greater, "ge": np.greater_equal}
    single("add_scalar_matrix", "add", [("a", "f32", randn()), ("b", "f32", randn(2, 3))], "f32", np.add)
    single("sub_col_row", "sub", [("a", "f32", randn(2, 1)), ("b", "f32", randn(1, 3))], "f32", np.subtract)
    single("mul_rank_extend", "mul", [("a", "f32", randn(3)), ("b", "f32", randn(2, 2, 3))], "f32", np.multiply)
    single("div_f32", "div", [("a", "f32", randn(2, 3)), ("b", "f32", RNG.uniform(0.5, 3, (2, 3)))],
           "f32", np.divide)
    single("pow_f32", "pow", [("a", "f32", [[0.5, 2.0, 9.0], [-2.0, -1.5, 3.0]]),
                              ("b", "f32", [[1.5, -0.5, 0.5], [3.0, 2.0, 0.0]])], "f32", np.power)
    single("maximum_bcast", "maximum", [("a", "f32", randn(4)), ("b", "f32", randn(2, 4))], "f32", np.maximum)
    single("minimum_f32", "minimum", [("a", "f32", randn(2, 3)), ("b", "f32", randn(2, 3))], "f32", np.minimum)
    a = np.array([[1.0, 2.0, 3.0], [-1.0, 0.5, 2.0]])
    b = np.array([1.0, 0.5, 4.0])  # equal elements in both rows exercise the boundaries
    for op, fn in cmp.items():
        single(op + "_f32", op, [("a", "f32", a), ("b", "f32", b)], "bool", fn)
    single("lt_i64", "lt", [("a", "i64", [3, -4, 5]), ("b", "i64", [[3], [4]])], "bool", np.less)
    single("eq_bool", "eq", [("a", "bool", [1, 0, 1, 0]), ("b", "bool", [1, 1, 0, 0])], "bool", np.equal)
    single("ne_bool", "ne", [("a", "bool", [1, 0, 1, 0]), ("b", "bool", [1, 1, 0, 0])], "bool", np.not_equal)
    single("ge_i8", "ge", [("a", "i8", [-128, 0, 127]), ("b", "i8", [0])], "bool", np.greater_equal)
    ints = [7, -7, 7, -7, 9, 0]
    dens = [2, 2, -2, -2, 3, 5]
    single("div_i32_trunc", "div", [("a", "i32", ints), ("b", "i32", dens)], "i32", trunc_div)
    single("div_i64_bcast", "div", [("a", "i64", [[-9], [10]]), ("b", "i64", [4, -3, 1])], "i64", trunc_div)
    single("add_i8_wrap", "add", [("a", "i8", [100, -100, 5]), ("b", "i8", [100, -100, -6])], "i8", np.add)
    single("mul_i32_wrap", "mul", [("a", "i32", [65536, 46341, -3]), ("b", "i32", [65536, 46341, 5])],
           "i32", np.multiply)
    single("sub_i64", "sub", [("a", "i64", [2 ** 40, 0, -5]), ("b", "i64", [1, 2 ** 33, -5])], "i64", np.subtract)
    single("pow_i32", "pow", [("a", "i32", [2, -2, 3, 2, 10, 0]), ("b", "i32", [10, 3, 0, -1, 2, 0])],
           "i32", np.power)
    single("maximum_i8", "maximum", [("a", "i8", [-128, 5, 3]), ("b", "i8", [127, -5, 3])], "i8", np.maximum)
    single("minimum_i64", "minimum", [("a", "i64", [[1, -2]]), ("b", "i64", [[0], [3]])], "i64", np.minimum)
    single("add_f16", "add", [("a", "f16", randn(2, 3)), ("b", "f16", randn(3))], "f16", np.add)
    single("mul_bf16", "mul", [("a", "bf16", randn(2, 3)), ("b", "bf16", randn(2, 1))], "bf16", np.multiply)
    single("sub_bf16_scalar", "sub", [("a", "bf16", [1.0, 256.0, -3.0]), ("b", "bf16", 1.0)], "bf16", np.subtract)
    single("div_f16", "div", [("a", "f16", [1.0, 2.0, -7.0]), ("b", "f16", [3.0, 7.0, 0.0])], "f16", np.divide)


def where_cases():
    single("where_bcast3", "where", [("c", "bool", [[1], [0]]), ("a", "f32", randn(2, 3)),
                                     ("b", "f32", randn())], "f32", np.where)
    single("where_i32", "where", [("c", "bool", [1, 0, 0, 1]), ("a", "i32", [1, 2, 3, 4]),
                                  ("b", "i32", [-1, -2, -3, -4])], "i32", np.where)


# Values per source dtype, all exactly representable in it: rounding ties, values out of range
# for narrower targets, negative fractions (truncation toward zero), zero and negative zero.
CAST_SOURCES = {
    "f32": [0.0, -0.0, 2.7, -2.7, -0.5, 200.7, -129.5, 300.0, 1 + 2 ** -11, 1 + 3 * 2 ** -11,
            65520.0, 1e-8, 3e9, 1 + 2 ** -8 + 2 ** -20, 16777215.0],
    "f16": [0.0, -1.5, 2.5, 1 + 2 ** -10, 1 + 3 * 2 ** -9, 65504.0, -200.0, 6e-5, 2 ** -24, 1000.5],
    "bf16": [0.0, -2.75, 1.5e4, 1.0078125, 65536.0, -130.0, 1e-3, 2.0 ** -130],
    "i8": [-128, -1, 0, 1, 127],
    "i32": [-2147483648, -129, -1, 0, 2049, 2147483647],
    "i64": [16777217, -(2 ** 40) - 3, 300, -1, 0, 2 ** 31, 4097],
    "bool": [0, 1, 1, 0],
}


def cast_cases():
    """One graph per source dtype, casting it to every dtype (itself included)."""
    for src, values in CAST_SOURCES.items():
        c = case("cast_from_" + src)
        x = c.input("x", src, values)
        for dst in NUMPY_STORAGE:
            c.node("%%%s = cast %%x : %s" % (dst, ty(dst, x.shape)))
            c.output("to_" + dst, dst, dst, x)
    # index_check is the identity on values in range (out of range is an error: test_ops)
    single("index_check_i64", "index_check", [("x", "i64", [0, 4, 9, 3])], "i64", lambda x: x,
           "bound=10")
    single("index_check_i32", "index_check", [("x", "i32", [[1, 0], [2, 1]])], "i32",
           lambda x: x, "bound=3")
    # beyond every integer range: only float and bool targets have a defined value
    c = case("cast_float_specials")
    x = c.input("x", "f32", [np.nan, np.inf, -np.inf, 0.0, 3.0e38, -1e-40, 1e-45])
    for dst in ("bool", "f16", "bf16"):
        c.node("%%%s = cast %%x : %s" % (dst, ty(dst, x.shape)))
        c.output("to_" + dst, dst, dst, x)


# ---- reductions


def reduce_cases():
    np_fn = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min}
    x3 = randn(2, 3, 4)
    for op, dt, x, axes, keep in [("sum", "f32", x3, [0, 2], False), ("sum", "f32", x3, [0, 2], True),
                                  ("mean", "f32", x3, [], False), ("max", "f32", x3, [1], True),
                                  ("min", "f32", x3, [-1], False), ("mean", "f32", x3, [0, 1], True),
                                  ("sum", "i64", RNG.integers(-1000, 1000, (3, 4)), [1], False),
                                  ("max", "i8", RNG.integers(-128, 128, (2, 5)), [0], False),
                                  ("sum", "bf16", randn(3, 4), [], False), ("min", "f16", randn(2, 3), [0, 1], True),
                                  ("sum", "f32", x3, [2, 0, 1], False)]:
        attrs = ", ".join(filter(None, ["axes=[%s]" % ", ".join(map(str, axes)) if axes else "",
                                        "keepdim=true" if keep else ""]))
        name = "%s_%s_%s%s" % (op, dt, "_".join(str(a).replace("-", "m") for a in axes) or "all",
                               "_keep" if keep else "")
        ax = tuple(axes) if axes else None
        single(name, op, [("x", dt, x)], dt, lambda v, f=np_fn[op], a=ax, k=keep: f(v, axis=a, keepdims=k),
               attrs)
    ties = [[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 1.0, 2.0], [-1.0, -1.0, -1.0, -1.0]]
    single("argmax_ties", "argmax", [("x", "f32", ties)], "i64", lambda v: np.argmax(v, axis=-1))
    single("argmax_axis0_keep", "argmax", [("x", "f32", ties)], "i64",
           lambda v: np.argmax(v, axis=0)[None, :], "axis=0, keepdim=true")
    single("argmax_i32_3d", "argmax", [("x", "i32", [[[1, 5], [5, 1]], [[0, 0], [7, 7]]])], "i64",
           lambda v: np.argmax(v, axis=1), "axis=1")


# ---- contraction and data movement


def matmul_cases():
    single("matmul_2d", "matmul", [("a", "f32", randn(3, 4)), ("b", "f32", randn(4, 2))], "f32", np.matmul)
    single("matmul_batch_bcast", "matmul", [("a", "f32", randn(2, 1, 3, 4)), ("b", "f32", randn(3, 4, 2))],
           "f32", np.matmul)
    single("matmul_rank2_rhs", "matmul", [("a", "bf16", randn(2, 2, 3)), ("b", "bf16", randn(3, 2))],
           "bf16", np.matmul)
    single("matmul_f16", "matmul", [("a", "f16", randn(2, 3)), ("b", "f16", randn(3, 2))], "f16", np.matmul)
    single("matmul_i32", "matmul", [("a", "i32", [[1, -2, 3], [40000, 1, 0]]),
                                    ("b", "i32", [[2, 0], [1, 70000], [-1, 5]])], "i32", np.matmul)


def movement_cases():
    x3 = randn(2, 3, 4)
    single("transpose_2d", "transpose", [("x", "f32", randn(2, 3))], "f32", lambda v: v.T, "perm=[1, 0]")
    single("transpose_3d_201", "transpose", [("x", "f32", x3)], "f32",
           lambda v: np.transpose(v, (2, 0, 1)), "perm=[2, 0, 1]")
    single("transpose_3d_i64", "transpose", [("x", "i64", np.arange(24).reshape(2, 3, 4))], "i64",
           lambda v: np.transpose(v, (1, 2, 0)), "perm=[1, 2, 0]")

    for name, dt, x, shape in [("reshape_3d_2d", "f32", x3, (4, 6)), ("reshape_add_unit", "i8", [1, 2, 3, 4, 5, 6], (2, 1, 3)),
                               ("reshape_to_scalar", "f16", [2.5], ())]:
        c = case(name)
        v = c.input("x", dt, x)
        c.node("%%y = reshape %%x : %s" % ty(dt, shape))
        c.output("y", "y", dt, v.reshape(shape))
    for name, dt, x, shape in [("expand_row", "f32", randn(3), (2, 3)), ("expand_col_rank", "bool", [[1], [0]], (2, 2, 3)),
                               ("expand_scalar", "i32", 9, (2, 2))]:
        c = case(name)
        v = c.input("x", dt, x)
        c.node("%%y = expand %%x : %s" % ty(dt, shape))
        c.output("y", "y", dt, np.broadcast_to(v, shape))

    xs = randn(3, 7)
    for name, axis, start, end, step in [("slice_neg_step", 1, -6, 100, 2), ("slice_neg_end", 1, 1, -1, 1),
                                         ("slice_clamped", 0, -100, 2, 1), ("slice_step3", 1, 0, 7, 3),
                                         ("slice_neg_axis", -1, 2, 5, 1), ("slice_empty", 1, 5, 2, 1)]:
        ax = axis % 2
        sl = [slice(None)] * 2
        sl[ax] = slice(start, end, step)
        attrs = "axis=%d, start=%d, end=%d%s" % (axis, start, end, ", step=%d" % step if step != 1 else "")
        single(name, "slice", [("x", "f32", xs)], "f32", lambda v, s=tuple(sl): v[s], attrs)

    c = case("concat3_axis1")
    parts = [c.input(n, "f32", randn(2, k)) for n, k in (("a", 1), ("b", 3), ("c", 2))]
    c.node("%y = concat %a, %b, %c {axis=1} : f32[2,6]")
    c.output("y", "y", "f32", np.concatenate(parts, axis=1))
    c = case("concat3_axis0_i32")
    parts = [c.input(n, "i32", RNG.integers(-50, 50, (k, 2))) for n, k in (("a", 2), ("b", 1), ("c", 3))]
    c.node("%y = concat %a, %b, %c {axis=0} : i32[6,2]")
    c.output("y", "y", "i32", np.concatenate(parts, axis=0))
    c = case("concat_neg_axis")
    parts = [c.input(n, "bf16", randn(2, 2, k)) for n, k in (("a", 1), ("b", 2))]
    c.node("%y = concat %a, %b {axis=-1} : bf16[2,2,3]")
    c.output("y", "y", "bf16", np.concatenate(parts, axis=-1))

    table = randn(5, 3)
    single("gather_2d_idx", "gather", [("t", "f32", table), ("i", "i64", [[4, 0], [2, 2]])], "f32",
           lambda t, i: np.take(t, i.astype(np.int64), axis=0))
    single("gather_axis1_i32", "gather", [("t", "f32", randn(2, 5, 2)), ("i", "i32", [3, 0, 4, 3])], "f32",
           lambda t, i: np.take(t, i.astype(np.int64), axis=1), "axis=1")
    single("gather_axis1_2d_idx", "gather", [("t", "i64", np.arange(12).reshape(3, 4)),
                                             ("i", "i64", [[1, 3, 0], [2, 2, 1]])], "i64",
           lambda t, i: np.take(t, i.astype(np.int64), axis=1), "axis=1")


# ---- composites


def softmax_np(x, axis):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def layer_norm_ref(x, w=None, b=None, eps=1e-5):
    xt = t64(x)
    return F.layer_norm(xt, xt.shape[-1:], None if w is None else t64(w),
                        None if b is None else t64(b), eps).numpy()


def rms_norm_ref(x, w=None, eps=1e-6):
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return y if w is None else y * w


def cross_entropy_ref(logits, labels, reduction):
    c = logits.shape[-1]
    loss = F.cross_entropy(t64(logits.reshape(-1, c)), torch.from_numpy(labels.astype(np.int64).ravel()),
                           reduction=reduction).numpy()
    return loss.reshape(labels.shape) if reduction == "none" else loss


def attention_ref(q, k, v, causal=False, scale=0.0):
    """softmax(q k^T * scale + mask) v, written out; mask hides key j > query i."""
    scale = scale or 1.0 / math.sqrt(q.shape[-1])
    s = np.matmul(q, np.swapaxes(k, -1, -2)) * scale
    if causal:
        t, sk = q.shape[-2], k.shape[-2]
        s = np.where(np.arange(sk)[None, :] > np.arange(t)[:, None], -np.inf, s)
    return np.matmul(softmax_np(s, -1), v)


def dropout_ref(x, p, seed, offset):
    u = philox_uniform(seed, offset, x.shape)
    return np.where(u >= p, x / (1.0 - p), 0.0) if p > 0 else x


def composite_cases():
    single("softmax_last", "softmax", [("x", "f32", randn(2, 5))], "f32", lambda v: softmax_np(v, -1))
    single("softmax_axis0", "softmax", [("x", "f32", randn(3, 2))], "f32", lambda v: softmax_np(v, 0), "axis=0")
    single("softmax_large", "softmax", [("x", "f32", [[1000.0, 1001.0, 999.0], [-1e4, 0.0, 1e4]])], "f32",
           lambda v: softmax_np(v, -1))
    single("softmax_f16", "softmax", [("x", "f16", randn(2, 4))], "f16", lambda v: softmax_np(v, -1))
    single("log_softmax_last", "log_softmax", [("x", "f32", randn(2, 5))], "f32",
           lambda v: F.log_softmax(t64(v), -1).numpy())
    single("log_softmax_axis1_3d", "log_softmax", [("x", "f32", randn(2, 3, 4))], "f32",
           lambda v: F.log_softmax(t64(v), 1).numpy(), "axis=1")
    single("log_softmax_large", "log_softmax", [("x", "f32", [[1000.0, 1001.0, 999.0]])], "f32",
           lambda v: F.log_softmax(t64(v), -1).numpy())

    single("layer_norm_plain", "layer_norm", [("x", "f32", randn(3, 5, scale=3.0) + 2)], "f32", layer_norm_ref)
    single("layer_norm_w", "layer_norm", [("x", "f32", randn(2, 4)), ("w", "f32", randn(4))], "f32",
           layer_norm_ref)
    single("layer_norm_wb", "layer_norm", [("x", "f32", randn(2, 2, 6)), ("w", "f32", randn(6)),
                                           ("b", "f32", randn(6))], "f32", layer_norm_ref)
    single("layer_norm_eps", "layer_norm", [("x", "f32", randn(2, 3, scale=0.01))], "f32",
           lambda v: layer_norm_ref(v, eps=1e-3), "eps=0.001")
    single("layer_norm_bf16", "layer_norm", [("x", "bf16", randn(2, 4)), ("w", "bf16", randn(4)),
                                             ("b", "bf16", randn(4))], "bf16", layer_norm_ref)
    single("rms_norm_plain", "rms_norm", [("x", "f32", randn(3, 4))], "f32", rms_norm_ref)
    single("rms_norm_w", "rms_norm", [("x", "f32", randn(2, 2, 5)), ("w", "f32", randn(5))], "f32", rms_norm_ref)
    single("rms_norm_eps", "rms_norm", [("x", "f32", randn(2, 3, scale=0.01))], "f32",
           lambda v: rms_norm_ref(v, eps=1e-3), "eps=0.001")

    for name, dt, shape, p, seed, offset in [("dropout_p025", "f32", (4, 6), 0.25, 42, 7),
                                             ("dropout_p0", "f32", (2, 3), 0.0, 1, 0),
                                             ("dropout_wide", "f32", (3, 4), 0.5, 0xDEADBEEF01, 2 ** 32 - 5),
                                             ("dropout_bf16", "bf16", (2, 5), 0.3, 9, 0)]:
        attrs = ", ".join(filter(None, ["p=%s" % fmt_num(p), "seed=%d" % seed if seed else "",
                                        "offset=%d" % offset if offset else ""]))
        single(name, "dropout", [("x", dt, randn(*shape))], dt,
               lambda v, p=p, s=seed, o=offset: dropout_ref(v, p, s, o), attrs)

    logits = randn(4, 5, scale=2.0)
    labels = np.array([0, 4, 2, 2])
    for red in ("mean", "sum", "none", None):
        name = "cross_entropy_" + (red or "default")
        single(name, "cross_entropy", [("logits", "f32", logits), ("labels", "i64", labels)], "f32",
               lambda lg, lb, r=red or "mean": cross_entropy_ref(lg, lb, r),
               'reduction="%s"' % red if red else "")
    single("cross_entropy_3d_none", "cross_entropy", [("logits", "f32", randn(2, 3, 4)),
                                                      ("labels", "i32", [[3, 0, 1], [2, 2, 0]])], "f32",
           lambda lg, lb: cross_entropy_ref(lg, lb, "none"), 'reduction="none"')
    single("cross_entropy_3d_mean", "cross_entropy", [("logits", "f32", randn(2, 3, 4)),
                                                      ("labels", "i64", [[1, 1, 3], [0, 2, 3]])], "f32",
           lambda lg, lb: cross_entropy_ref(lg, lb, "mean"))

    for name, qs, ks, vs, causal, scale, dt in [
            ("attention_plain", (2, 3, 4), (2, 5, 4), (2, 5, 3), False, 0.0, "f32"),
            ("attention_causal_t_lt_s", (2, 3, 4), (2, 5, 4), (2, 5, 3), True, 0.0, "f32"),
            ("attention_causal_t_gt_s", (4, 2), (2, 2), (2, 3), True, 0.0, "f32"),
            ("attention_batch2_scale", (2, 2, 3, 4), (2, 2, 3, 4), (2, 2, 3, 2), False, 0.5, "f32"),
            ("attention_causal_bf16", (1, 3, 4), (1, 3, 4), (1, 3, 4), True, 0.0, "bf16")]:
        attrs = ", ".join(filter(None, ["causal=true" if causal else "", "scale=%s" % fmt_num(scale) if scale else ""]))
        single(name, "attention", [("q", dt, randn(*qs)), ("k", dt, randn(*ks)), ("v", dt, randn(*vs))], dt,
               lambda q, k, v, c=causal, s=scale: attention_ref(q, k, v, c, s), attrs)


# ---- attention's training ops (their own generator, so the cases above keep their draws)


def attention_lse_ref(q, k, causal=False, scale=0.0):
    """Each query's log-sum-exp of its scaled, masked scores (-inf when it sees no key)."""
    scale = scale or 1.0 / math.sqrt(q.shape[-1])
    s = np.matmul(q, np.swapaxes(k, -1, -2)) * scale
    if causal:
        t, sk = q.shape[-2], k.shape[-2]
        s = np.where(np.arange(sk)[None, :] > np.arange(t)[:, None], -np.inf, s)
    m = np.max(s, axis=-1, keepdims=True)
    return (m + np.log(np.sum(np.exp(s - m), axis=-1, keepdims=True)))[..., 0]


def attention_grad_ref(q, k, v, o, do, lse, causal=False, scale=0.0):
    """FlashAttention-2's backward from the given o and lse: (dQ, dK, dV) stacked."""
    scale = scale or 1.0 / math.sqrt(q.shape[-1])
    s = np.matmul(q, np.swapaxes(k, -1, -2)) * scale
    if causal:
        t = q.shape[-2]
        s = np.where(np.arange(t)[None, :] > np.arange(t)[:, None], -np.inf, s)
    p = np.exp(s - lse[..., None])
    dv = np.matmul(np.swapaxes(p, -1, -2), do)
    ds = p * (np.matmul(do, np.swapaxes(v, -1, -2)) - np.sum(do * o, axis=-1, keepdims=True))
    return np.stack([scale * np.matmul(ds, k), scale * np.matmul(np.swapaxes(ds, -1, -2), q), dv])


def attention_training_cases():
    rng = np.random.default_rng(20261126)
    for name, shape, causal, scale, dt in [("attention_lse_causal", (2, 3, 5, 4), True, 0.0, "f32"),
                                           ("attention_lse_plain_scale", (2, 4, 3), False, 0.5, "f32"),
                                           ("attention_lse_bf16", (1, 4, 8), True, 0.0, "bf16")]:
        q, k = rng.standard_normal(shape), rng.standard_normal(shape)
        attrs = ", ".join(filter(None, ["causal=true" if causal else "", "scale=%s" % fmt_num(scale) if scale else ""]))
        single(name, "attention_lse", [("q", dt, q), ("k", dt, k)], "f32",
               lambda a, b, c=causal, s=scale: attention_lse_ref(a, b, c, s), attrs)
    for name, shape, causal, scale in [("attention_grad_causal", (2, 2, 5, 4), True, 0.0),
                                       ("attention_grad_plain_scale", (3, 4, 3), False, 0.7)]:
        q, k, v, do = (rng.standard_normal(shape) for _ in range(4))
        o = attention_ref(q, k, v, causal, scale)
        lse = attention_lse_ref(q, k, causal, scale)
        # the formula against PyTorch's autograd of the plain attention
        tq, tk, tv = (t64(x).requires_grad_() for x in (q, k, v))
        sc = torch.matmul(tq, tk.transpose(-1, -2)) * (scale or 1.0 / math.sqrt(shape[-1]))
        if causal:
            sc = sc.masked_fill(torch.ones(shape[-2], shape[-2], dtype=torch.bool).triu(1), -math.inf)
        torch.matmul(torch.softmax(sc, -1), tv).backward(t64(do))
        want = np.stack([tq.grad.numpy(), tk.grad.numpy(), tv.grad.numpy()])
        assert np.allclose(attention_grad_ref(q, k, v, o, do, lse, causal, scale), want, rtol=1e-9, atol=1e-12)
        attrs = ", ".join(filter(None, ["causal=true" if causal else "", "scale=%s" % fmt_num(scale) if scale else ""]))
        single(name, "attention_grad", [("q", "f32", q), ("k", "f32", k), ("v", "f32", v), ("o", "f32", o),
                                        ("do", "f32", do), ("lse", "f32", lse)], "f32",
               lambda *a, c=causal, s=scale: attention_grad_ref(*a, c, s), attrs)


# ---- attention with an additive bias (its own generator too)


def attention_bias_ref(q, k, v, bias, causal=False, scale=0.0):
    """softmax(q k^T * scale + bias, masked when causal) v."""
    scale = scale or 1.0 / math.sqrt(q.shape[-1])
    s = np.matmul(q, np.swapaxes(k, -1, -2)) * scale + bias
    if causal:
        t, sk = q.shape[-2], k.shape[-2]
        s = np.where(np.arange(sk)[None, :] > np.arange(t)[:, None], -np.inf, s)
    return np.matmul(softmax_np(s, -1), v)


def attention_bias_cases():
    rng = np.random.default_rng(20261128)
    # a padding mask as BERT's ([B, 1, 1, S]: -10000 on hidden keys, the first always seen),
    # a [T, S] bias for every head (ALiBi's shape) with causal, one per query, and bf16
    for name, qs, ks, vs, bs, causal, dt in [
            ("attention_bias_mask", (2, 2, 3, 4), (2, 2, 5, 4), (2, 2, 5, 3), (2, 1, 1, 5), False, "f32"),
            ("attention_bias_causal", (2, 4, 4), (2, 4, 4), (2, 4, 2), (4, 4), True, "f32"),
            ("attention_bias_rows", (3, 5, 4), (3, 6, 4), (3, 6, 4), (3, 5, 1), False, "f32"),
            ("attention_bias_bf16", (1, 2, 3, 8), (1, 2, 4, 8), (1, 2, 4, 8), (1, 2, 3, 4), False, "bf16")]:
        q, k, v = rng.standard_normal(qs), rng.standard_normal(ks), rng.standard_normal(vs)
        if name == "attention_bias_mask":
            bias = np.where(rng.random(bs) < 0.4, -10000.0, 0.0)
            bias[..., 0] = 0.0
        else:
            bias = rng.standard_normal(bs)
        single(name, "attention", [("q", dt, q), ("k", dt, k), ("v", dt, v), ("b", dt, bias)], dt,
               lambda q, k, v, b, c=causal: attention_bias_ref(q, k, v, b, c), "causal=true" if causal else "")


# ---- convolution (its own generator too)


def conv_ref(x, w, stride, pads, dilation, groups):
    """PyTorch's conv1d/conv2d in float64, the padding (begins, then ends, per axis) by F.pad."""
    n = x.ndim - 2
    torch_pad = []
    for a in reversed(range(n)):
        torch_pad += [pads[a], pads[n + a]]
    conv = F.conv1d if n == 1 else F.conv2d
    return conv(F.pad(t64(x), torch_pad), t64(w), stride=stride, dilation=dilation, groups=groups).numpy()


def conv_cases():
    rng = np.random.default_rng(20261127)
    for name, xs, ws, stride, pads, dil, groups, dt in [
            ("conv2d_stride_pad", (2, 3, 6, 5), (4, 3, 3, 2), (2, 1), (1, 0, 1, 0), (1, 1), 1, "f32"),
            ("conv2d_groups_dilation", (1, 4, 7, 7), (6, 2, 3, 3), (1, 1), (2, 2, 2, 2), (2, 2), 2, "f32"),
            ("conv2d_depthwise_bf16", (1, 3, 5, 5), (3, 1, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 3, "bf16"),
            ("conv1d_asymmetric", (2, 2, 9), (3, 2, 3), (2,), (2, 1), (2,), 1, "f32")]:
        attrs = "stride=[%s], padding=[%s], dilation=[%s], groups=%d" % (
            ", ".join(map(str, stride)), ", ".join(map(str, pads)), ", ".join(map(str, dil)), groups)
        single(name, "conv", [("x", dt, rng.standard_normal(xs)), ("w", dt, rng.standard_normal(ws))], dt,
               lambda x, w, s=stride, p=pads, d=dil, g=groups: conv_ref(x, w, s, p, d, g), attrs)


# ---- symbolic batch dimension


def r32(v):
    return round_to("f32", v)


def symbolic_cases():
    """Graphs typed over a batch B (and T), evaluated at concrete sizes; every intermediate
    is rounded to f32 here as the interpreter does."""
    c = case("symbolic_batch")
    x = c.input("x", "f32", randn(3, 4), "f32[B,4]")
    ids = c.input("ids", "i64", [2, 0, 1], "i64[B]")
    w, row, table = randn(4, 3), randn(1, 4), randn(3, 2)
    bias = np.array([0.5, -1.0, 0.25])
    c.node("%%w = constant {value=[%s]} : f32[4,3]" % ", ".join(fmt_num(v) for v in r32(w).ravel()))
    c.node("%bias = constant {value=[0.5, -1, 0.25]} : f32[3]")
    c.node("%h = matmul %x, %w : f32[B,3]")
    c.node("%z = add %h, %bias : f32[B,3]")
    c.node("%s = sum %z {axes=[1], keepdim=true} : f32[B,1]")
    c.node("%flat = reshape %x : f32[4*B]")
    c.node("%loss = cross_entropy %z, %ids : f32[]")
    c.node("%p = softmax %z : f32[B,3]")
    c.node("%c = sub %z, %s : f32[B,3]")  # [B,3] with [B,1]
    c.node("%%row = constant {value=[%s]} : f32[1,4]" % ", ".join(fmt_num(v) for v in r32(row).ravel()))
    c.node("%xr = add %x, %row : f32[B,4]")  # B against a static 1
    c.node("%m = mean %x {axes=[0]} : f32[4]")
    c.node("%%table = constant {value=[%s]} : f32[3,2]" % ", ".join(fmt_num(v) for v in r32(table).ravel()))
    c.node("%e = gather %table, %ids : f32[B,2]")
    c.node("%pos = iota : i64[B,3]")
    c.node("%ex = expand %bias : f32[B,3]")
    z = r32(r32(x @ r32(w)) + bias)
    s = r32(z.sum(axis=1, keepdims=True))
    c.output("z", "z", "f32", z, "f32[B,3]")
    c.output("s", "s", "f32", s, "f32[B,1]")
    c.output("flat", "flat", "f32", x.reshape(-1), "f32[4*B]")
    c.output("loss", "loss", "f32", cross_entropy_ref(z, ids, "mean"))
    c.output("p", "p", "f32", softmax_np(z, -1), "f32[B,3]")
    c.output("c", "c", "f32", z - s, "f32[B,3]")
    c.output("xr", "xr", "f32", x + r32(row), "f32[B,4]")
    c.output("m", "m", "f32", x.mean(axis=0))
    c.output("e", "e", "f32", r32(table)[ids.astype(np.int64)], "f32[B,2]")
    c.output("pos", "pos", "i64", np.indices((3, 3))[0], "i64[B,3]")
    c.output("ex", "ex", "f32", np.broadcast_to(bias, (3, 3)), "f32[B,3]")

    c = case("symbolic_batch_seq")
    x = c.input("x", "f32", randn(2, 3, 4), "f32[B,T,4]")
    c.node("%m = reshape %x : f32[B*T,4]")
    c.node("%n = layer_norm %m : f32[B*T,4]")
    c.node("%back = reshape %n : f32[B,T,4]")
    c.node("%a = attention %x, %x, %x {causal=true} : f32[B,T,4]")
    c.node("%r = add %back, %a : f32[B,T,4]")
    n = r32(layer_norm_ref(x.reshape(6, 4)))
    c.output("n", "n", "f32", n, "f32[B*T,4]")
    c.output("r", "r", "f32", n.reshape(2, 3, 4) + r32(attention_ref(x, x, x, True)), "f32[B,T,4]")

    c = case("symbolic_batch_ops")  # one op of each kind over a B-sized axis
    x = c.input("x", "f32", randn(3, 4), "f32[B,4]")
    c.node("%sl = slice %x {axis=1, start=1, end=3} : f32[B,2]")
    c.node("%cat = concat %x, %sl {axis=1} : f32[B,6]")
    c.node("%tr = transpose %x {perm=[1, 0]} : f32[4,B]")
    c.node("%am = argmax %x : i64[B]")
    c.node("%zero = full {value=0} : f32[]")
    c.node("%isneg = lt %x, %zero : bool[B,4]")
    c.node("%wh = where %isneg, %zero, %x : f32[B,4]")
    c.node("%dr = dropout %x {p=0.5, seed=3} : f32[B,4]")
    c.node("%ra = rand {seed=5, offset=11} : f32[B,2]")
    c.node("%mx = max %x {axes=[0], keepdim=true} : f32[1,4]")
    c.output("sl", "sl", "f32", x[:, 1:3], "f32[B,2]")
    c.output("cat", "cat", "f32", np.concatenate([x, x[:, 1:3]], axis=1), "f32[B,6]")
    c.output("tr", "tr", "f32", x.T, "f32[4,B]")
    c.output("am", "am", "i64", np.argmax(x, axis=-1), "i64[B]")
    c.output("wh", "wh", "f32", np.where(x < 0, 0.0, x), "f32[B,4]")
    c.output("dr", "dr", "f32", dropout_ref(x, 0.5, 3, 0), "f32[B,4]")
    c.output("ra", "ra", "f32", philox_uniform(5, 11, (3, 2)), "f32[B,2]")
    c.output("mx", "mx", "f32", x.max(axis=0, keepdims=True))


# ---------------------------------------------------------------- main


def write_all():
    os.makedirs(OUT_DIR, exist_ok=True)
    for f in os.listdir(OUT_DIR):  # stale cases must not survive a regeneration
        if f.startswith("train_"):  # tests/models/train/gen.py's, not these
            continue
        if f.endswith(".cir") or f.endswith(".npy"):
            os.remove(os.path.join(OUT_DIR, f))
    names = set()
    for c in CASES:
        assert c.name not in names, "duplicate case " + c.name
        names.add(c.name)
        with open(os.path.join(OUT_DIR, c.name + ".cir"), "w") as f:
            f.write(c.text())
        for fname, arr in c.files.items():
            np.save(os.path.join(OUT_DIR, fname), arr, allow_pickle=False)


# ---- index_add (scatter): numpy's unbuffered np.add.at, in float64


def index_add_np(base, idx, src):
    out = np.array(base, np.float64)
    np.add.at(out, np.asarray(idx, np.int64), src)
    return out


def scatter_cases():
    single("index_add_rows", "index_add", [("b", "f32", randn(5, 3)), ("i", "i64", [[4, 0, 4], [2, 4, 0]]),
                                           ("s", "f32", randn(2, 3, 3))], "f32", index_add_np)
    single("index_add_i32_1d", "index_add", [("b", "f32", randn(6)), ("i", "i32", [5, 1, 5, 0]),
                                             ("s", "f32", randn(4))], "f32", index_add_np)
    # bf16 adds round at each add on a device, once here: two hits a row at most, positive
    # values (no cancellation), so they stay within an ulp or two
    single("index_add_bf16", "index_add", [("b", "bf16", abs(randn(4, 8)) + 0.5),
                                           ("i", "i64", [3, 1, 3, 0, 2]),
                                           ("s", "bf16", abs(randn(5, 8)) + 0.5)], "bf16", index_add_np)
    # i8 wraps (120 + 10), bool adds as or: the byte-wide adds
    single("index_add_i8", "index_add", [("b", "i8", [[120, -3], [5, 7]]), ("i", "i64", [0, 1, 0]),
                                         ("s", "i8", [[4, 1], [-2, 2], [6, 1]])], "i8", index_add_np)
    single("index_add_bool", "index_add", [("b", "bool", [[0, 1], [0, 0], [0, 0]]), ("i", "i32", [1, 1, 0]),
                                           ("s", "bool", [[1, 0], [1, 0], [0, 0]])], "bool", index_add_np)
    single("index_add_i64", "index_add", [("b", "i64", [[1, -2], [3, 4], [5, 6]]), ("i", "i8", [2, 0, 2]),
                                          ("s", "i64", [[10, 20], [-30, 40], [50, 60]])], "i64",
           index_add_np)


def main():
    np.seterr(all="ignore")  # log(0), sqrt(-1), 7/0 and f16 overflow are cases on purpose
    check_philox()
    check_bf16_rounding()
    for group in (leaf_cases, unary_cases, binary_cases, where_cases, cast_cases, reduce_cases,
                  matmul_cases, movement_cases, composite_cases, symbolic_cases,
                  attention_training_cases, conv_cases, attention_bias_cases, scatter_cases):
        group()
    write_all()
    total = sum(os.path.getsize(os.path.join(OUT_DIR, f)) for f in os.listdir(OUT_DIR))
    print("wrote %d cases, %d bytes, to %s" % (len(CASES), total, OUT_DIR))
    if "--philox-table" in sys.argv:  # the vectors test_oracle.c checks philox4x32 against
        for seed, counter in PHILOX_TABLE_INPUTS:
            w = philox_words(seed, counter)
            print("    {0x%xull, 0x%xull, {0x%08x, 0x%08x, 0x%08x, 0x%08x}}," % ((seed, counter) + tuple(w)))


# (seed, counter) pairs that use the high key word and the high counter word of philox4x32.
PHILOX_TABLE_INPUTS = [(0, 0), (42, 7), (0x123456789AB, 0xFFFFFFFF), (0x123456789AB, 0x100000000),
                       (0xFFFFFFFFFFFFFFFF, 0xFFFFFFFFFFFFFFFF)]

if __name__ == "__main__":
    main()
