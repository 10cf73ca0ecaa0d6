"""coil.Builder: a graph made op by op from Python over the C builder (coil_builder_new,
coil_input, coil_param, coil_op, coil_output, coil_build); attributes as keywords, written
as the IR text writes them."""
import ctypes

import numpy as np

from ._lib import Err, Error, check, lib
from ._lib import options as _options
from ._tensors import NAMES, NP_DTYPES
from .model import Model


class Value:
    """A value of a Builder's graph (the C builder's handle, .id). + - * / @ and unary -
    between values of one builder make add, sub, mul, div, matmul and neg."""

    __slots__ = ("builder", "id")

    def __init__(self, builder, handle):
        self.builder, self.id = builder, handle

    def __repr__(self):
        return f"<coil.Value %{self.id} of builder '{self.builder.name}'>"

    def _binary(self, op, other, swap=False):
        if not isinstance(other, Value):  # a number's dtype is the other value's, unknown here
            raise Error(2, f"{op}: {other!r} is not a coil.Value; make numbers values first "
                        "(b.constant(np.float32(2)), b.op('full', value=2, type='f32[]'))")
        return self.builder.op(op, other, self) if swap else self.builder.op(op, self, other)

    def __add__(self, other):
        return self._binary("add", other)

    def __sub__(self, other):
        return self._binary("sub", other)

    def __mul__(self, other):
        return self._binary("mul", other)

    def __truediv__(self, other):
        return self._binary("div", other)

    def __matmul__(self, other):
        return self._binary("matmul", other)

    def __neg__(self):
        return self.builder.op("neg", self)

    # Reached when the left operand is not a Value (2 * x): the error says what to do.
    def __radd__(self, other):
        return self._binary("add", other, swap=True)

    def __rsub__(self, other):
        return self._binary("sub", other, swap=True)

    def __rmul__(self, other):
        return self._binary("mul", other, swap=True)

    def __rtruediv__(self, other):
        return self._binary("div", other, swap=True)


class Builder:
    """A graph built op by op, then built into a coil.Model (verified and compiled like a
    loaded one):

        b = coil.Builder("mlp")
        x = b.input("x", "f32[B,16]")
        w = b.param("fc.weight", "f32[16,4]", init="xavier")
        p = b.op("softmax", x @ w, axis=-1)
        b.output("probs", p)
        m = b.build(threads=2).init_params(seed=0)

    Types are the IR text's ("f32[B,16]"); ops and their attributes are docs/IR.md's. A
    call coil refuses raises coil.Error with its message and adds nothing: the builder
    stays usable."""

    def __init__(self, name="main"):
        self.name = name
        err = Err()
        self._b = lib.coil_builder_new(name.encode(), ctypes.byref(err))
        check(self._b, err)

    def __del__(self):
        if getattr(self, "_b", None):
            lib.coil_builder_free(self._b)
            self._b = None

    def __repr__(self):
        return f"<coil.Builder '{self.name}'>"

    def _value(self, handle, err):
        check(handle >= 0, err)
        return Value(self, handle)

    def input(self, name, type):
        """The next input of the signature, of that type ("f32[B,16]")."""
        err = Err()
        return self._value(lib.coil_input(self._b, name.encode(), type.encode(),
                                          ctypes.byref(err)), err)

    def param(self, name, type, init=None):
        """A parameter named as a state dict names it ("fc.weight"), with its initializer
        for Model.init_params: None (zeros), "ones", "normal(std)", "normal(mean, std)",
        "uniform(a, b)", "xavier", "kaiming"."""
        err = Err()
        return self._value(lib.coil_param(self._b, name.encode(), type.encode(),
                                          init.encode() if init else None,
                                          ctypes.byref(err)), err)

    def op(self, op, *args, type=None, **attrs):
        """Op `op` (its IR name: "matmul", "softmax", ...) of the values args, attributes as
        keywords (axis=-1, axes=[1], keepdim=True, eps=1e-5, reduction="mean"); type: the
        result type, needed by the ops that declare theirs (constant, full, iota, rand,
        cast, reshape, expand), for the others a check of the inferred one."""
        ids = (ctypes.c_int * max(len(args), 1))(*[self._operand(op, i, a)
                                                    for i, a in enumerate(args)])
        text = attr_text(op, attrs)
        err = Err()
        return self._value(lib.coil_op(self._b, op.encode(), ids, len(args),
                                       text.encode() if text else None,
                                       type.encode() if type else None, ctypes.byref(err)), err)

    def _operand(self, op, index, a):
        if isinstance(a, Value) and a.builder is self:
            return a.id
        what = (f"a value of builder '{a.builder.name}'" if isinstance(a, Value)
                else f"a {a.__class__.__name__}")
        raise Error(2, f"{op}: operand {index} is {what}, not a value of builder "
                    f"'{self.name}' (numbers and arrays: Builder.constant)")

    def constant(self, values, type=None):
        """A constant holding values (an array or nested lists; row-major), of type (by
        default the array's dtype and shape, Python floats as f32 and ints as i64)."""
        a = np.asarray(values)
        if type is None:
            dt = np.dtype(np.float32) if a.dtype == np.float64 else a.dtype
            if dt not in NP_DTYPES or dt == np.uint16:
                raise Error(2, f"constant: NumPy dtype {a.dtype} is none of coil's; give type=")
            type = f"{NAMES[NP_DTYPES.index(dt)]}[{','.join(str(s) for s in a.shape)}]"
        return self.op("constant", value=a.ravel().astype(np.float64), type=type)

    def output(self, name, value):
        """value as the next output of the signature, named name."""
        err = Err()
        check(lib.coil_output(self._b, name.encode() if name else None,
                              self._operand("output", 0, value), ctypes.byref(err)), err)
        return self

    def build(self, device=None, threads=0, training=False, seed=0, interpret=False,
              mode=None, cache=None, dims=None, profile=False):
        """A coil.Model of the graph so far (options as coil.load's), its parameters without
        values until init_params, load_weights or set_param. The builder stays as it was:
        add more and build again."""
        o = _options(device, threads, None, training, seed, interpret, mode, cache, dims,
                     profile)
        err = Err()
        m = lib.coil_build_sized(self._b, ctypes.byref(o), ctypes.byref(err), ctypes.sizeof(o))
        check(m, err)
        return Model(m)


def attr_text(op, attrs):
    """Keyword attributes as the IR writes them between braces: "axes=[1], keepdim=true"."""
    return ", ".join(f"{k}={_attr_value(op, k, v)}" for k, v in attrs.items())


def _attr_value(op, key, v):
    if isinstance(v, (bool, np.bool_)):
        return "true" if v else "false"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        return repr(float(v))  # the shortest text that reads back as the same double
    if isinstance(v, str):
        return _quote(op, key, v)
    if isinstance(v, (list, tuple, np.ndarray)):
        try:
            items = np.asarray(v).ravel().tolist()
        except ValueError:  # ragged nesting
            items = [None]
        if all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in items):
            return "[" + ", ".join(_attr_value(op, key, x) for x in items) + "]"
    raise Error(2, f"{op}: attribute '{key}' is a {type(v).__name__} ({v!r}); attributes are "
                "ints, floats, bools, strings, or lists of numbers")


def _quote(op, key, s):
    """s as an IR string: quoted, with \\" \\\\ \\n \\t \\r and other control bytes escaped."""
    if "\0" in s:
        raise Error(2, f"{op}: attribute '{key}' holds a NUL character, which IR strings cannot")
    named = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r"}
    out = []
    for c in s:
        if c in named:
            out.append(named[c])
        elif ord(c) < 0x20 or ord(c) == 0x7F:
            out.append(f"\\x{ord(c):02x}")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'
