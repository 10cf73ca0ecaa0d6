"""coil.Model: a loaded, built or compiled model called with arrays, and coil.load and
coil.compile, which make one (coil_load, coil_load_text, coil_run, coil_run_named, ...)."""
import ctypes
import os

import numpy as np

from . import _tensors
from ._lib import INPUT, OUTPUT, PARAM, Err, Error, Profile, StepTime, Tensor, check, dim_sizes, lib
from ._lib import options as _options

MODES = ("default", "reduce-overhead", "max-autotune")  # coil_options.mode, as --mode


class Model:
    """A loaded model: .inputs, .outputs, .params (names), called with arrays."""

    def __init__(self, handle):
        self._m = handle
        self.inputs = self._names(INPUT)
        self.outputs = self._names(OUTPUT)
        self.params = self._names(PARAM)
        self._in_dtypes = [self._info(INPUT, i).dtype for i in range(len(self.inputs))]

    def _info(self, kind, index):
        return lib.coil_info_at(self._m, kind, index).contents

    def _names(self, kind):
        return [self._info(kind, i).name.decode() for i in range(lib.coil_count(self._m, kind))]

    def types(self, kind="inputs"):
        """{name: type text} of the "inputs", "outputs" or "params": {"x": "f32[B,16]"}."""
        k = {"inputs": INPUT, "outputs": OUTPUT, "params": PARAM}[kind]
        return {i.name.decode(): i.type.decode()
                for i in (self._info(k, n) for n in range(lib.coil_count(self._m, k)))}

    def __repr__(self):
        ins = ", ".join(f"{k}: {v}" for k, v in self.types("inputs").items())
        outs = ", ".join(f"{k}: {v}" for k, v in self.types("outputs").items())
        return f"<coil.Model ({ins}) -> ({outs}), {len(self.params)} parameters>"

    def __del__(self):
        if getattr(self, "_m", None):
            lib.coil_free(self._m)
            self._m = None

    def init_params(self, seed=0, dims=None):
        """Every parameter from its initializer, drawn from seed; dims size the symbols."""
        arr, n = dim_sizes(dims)
        err = Err()
        check(lib.coil_init_params(self._m, seed, arr, n, ctypes.byref(err)), err)
        return self

    def load_weights(self, path):
        """Parameters by name from a .safetensors file."""
        err = Err()
        check(lib.coil_load_weights(self._m, os.fsencode(path), ctypes.byref(err)), err)
        return self

    def set_param(self, name, value):
        """Parameter `name` set to a copy of value (an array or CPU tensor of its dtype and
        shape; converted once when its dtype differs)."""
        index = lib.coil_find(self._m, PARAM, name.encode())
        if index < 0:
            raise Error(2, f"no parameter '{name}'; the model's: "
                        f"{', '.join(self.params) or 'none'}")
        t, err = Tensor(), Err()
        t.held = _tensors.fill_input(t, value, self._info(PARAM, index).dtype, name)
        check(lib.coil_set_param(self._m, index, ctypes.byref(t), ctypes.byref(err)), err)
        return self

    def prepare(self, dims=None):
        """Compile now (or map a package's kernels) and, with every input sized (dims, the
        load's dims) and the parameters set, run once on zeros: the first call after it
        compiles nothing."""
        arr, n = dim_sizes(dims)
        err = Err()
        check(lib.coil_prepare(self._m, arr, n, ctypes.byref(err)), err)
        return self

    def save(self, path):
        """Write the package `coil compile -o path` writes; coil.load(path) maps it."""
        err = Err()
        check(lib.coil_save(self._m, os.fsencode(path), ctypes.byref(err)), err)
        return self

    def dump(self, stage="input", path=None):
        """The IR at a stage ("input", a pass such as "cse", "fuse", "lower", "llvm-ir",
        "asm"): its text, or written to path (then None)."""
        err = Err()
        if path is not None:
            check(lib.coil_dump_file(self._m, stage.encode(), os.fsencode(path),
                                     ctypes.byref(err)), err)
            return None
        text = lib.coil_dump(self._m, stage.encode(), ctypes.byref(err))
        check(text, err)
        try:
            return ctypes.string_at(text).decode()
        finally:
            lib.coil_string_free(text)

    def profile(self, reset=False):
        """Each compiled step's time per run since compiling, prepare or the last reset, as
        `coil bench --profile` lists them, slowest first (a model loaded with profile=True):
        {"runs", "ms", "steps": [{"step", "name", "layer", "kind", "ms", "share", "flops",
        "bytes"}, ...]}. reset=True counts from then on."""
        p, err = Profile(), Err()
        check(lib.coil_get_profile(self._m, ctypes.byref(p), ctypes.byref(err)), err)
        steps = [{k: getattr(p.steps[i], k) for k, _ in StepTime._fields_}
                 for i in range(p.nsteps)]
        for s in steps:
            for k in ("name", "layer", "kind"):
                s[k] = s[k].decode()
        if reset:
            check(lib.coil_reset_profile(self._m, ctypes.byref(err)), err)
        return {"runs": p.runs, "ms": p.ms, "steps": steps}

    def set_rng_step(self, step):
        """The rng step of the runs after this one (a training-mode model's dropout masks)."""
        err = Err()
        check(lib.coil_set_rng_step(self._m, step, ctypes.byref(err)), err)

    def run(self, inputs, outputs=None, out=None):
        """Inputs by name ({"x": array}, any order; or a sequence in the model's order),
        the outputs named in `outputs` (default all), in that order. out: arrays to write
        them into (a sequence parallel to outputs, or {name: array}; C-contiguous, writable,
        of the output's dtype and shape, which coil checks); None where coil should
        allocate. Returns a tuple (an out array itself where one was given)."""
        if not isinstance(inputs, dict):
            if len(inputs) != len(self.inputs):
                raise Error(2, f"{len(inputs)} inputs given; the model takes "
                            f"{len(self.inputs)}: {', '.join(self.inputs)}")
            inputs = dict(zip(self.inputs, inputs))
        names = list(self.outputs if outputs is None else outputs)
        if isinstance(out, dict):
            out = [out.get(n) for n in names]
        out = list(out) if out is not None else [None] * len(names)
        if len(out) != len(names):
            raise Error(2, f"out: {len(out)} arrays for {len(names)} outputs ({', '.join(names)})")
        ins = (Tensor * max(len(inputs), 1))()
        in_names = (ctypes.c_char_p * max(len(inputs), 1))()
        ins.held = []  # what they point at, alive as long
        for i, (name, a) in enumerate(inputs.items()):
            ins.held.append(self._fill_named(ins[i], name, a))
            in_names[i] = name.encode()
        outs = (Tensor * max(len(names), 1))()
        out_names = (ctypes.c_char_p * max(len(names), 1))(*[n.encode() for n in names])
        for i, a in enumerate(out):
            if a is not None:
                _tensors.fill_output(outs[i], a, names[i])
        err = Err()
        check(lib.coil_run_named(self._m, in_names, ins, len(inputs), out_names, outs,
                                 len(names), ctypes.byref(err)), err)
        return tuple(a if a is not None else _tensors.adopt(outs[i]) for i, a in enumerate(out))

    def _fill_named(self, t, name, a):
        """t describes input `name`: in the input's dtype, or, for a name the model lacks
        (coil_run_named reports it), in the array's own."""
        if name in self.inputs:
            return _tensors.fill_input(t, a, self._in_dtypes[self.inputs.index(name)], name)
        a = np.asarray(a)
        return _tensors.fill_input(t, a, _tensors.coil_dtype(a, name), name)

    def __call__(self, *args, **named):
        """The outputs at these inputs (in the model's order, or by name), each a NumPy
        array over coil's buffer; one output alone, else a tuple."""
        if named:
            missing = [n for n in self.inputs[len(args):] if n not in named]
            if missing or len(args) + len(named) != len(self.inputs):
                raise Error(2, f"inputs: expected {', '.join(self.inputs)}")
            args = list(args) + [named[n] for n in self.inputs[len(args):]]
        n, nout = len(args), len(self.outputs)
        if n != len(self.inputs):
            raise Error(2, f"{n} inputs given; the model takes {len(self.inputs)}: "
                        f"{', '.join(self.inputs)}")
        ins = (Tensor * max(n, 1))()
        ins.held = [_tensors.fill_input(ins[i], a, self._in_dtypes[i], self.inputs[i])
                    for i, a in enumerate(args)]  # what they point at, alive as long
        outs = (Tensor * max(nout, 1))()
        err = Err()
        check(lib.coil_run(self._m, ins, n, outs, nout, ctypes.byref(err)), err)
        if nout == 1:
            return _tensors.adopt(outs[0])
        return tuple(_tensors.adopt(outs[i]) for i in range(nout))


def _fix_inputs(o, constants):
    """o's inputs fixed at load (coil_options.constants) from {name: array}; the names and
    arrays ride on o."""
    items = list((constants or {}).items())
    o._const_names = (ctypes.c_char_p * max(len(items), 1))(*[k.encode() for k, _ in items])
    o._consts = (Tensor * max(len(items), 1))()
    o._const_held = [_tensors.fill_input(o._consts[i], np.asarray(a),
                                         _tensors.coil_dtype(np.asarray(a), k), k)
                     for i, (k, a) in enumerate(items)]
    o.constant_names, o.constants, o.nconstants = o._const_names, o._consts, len(items)


def load(path, device=None, threads=0, overrides=None, training=False, seed=0, interpret=False,
         mode=None, cache=None, dims=None, profile=False, constants=None):
    """A model file (.coil, .cir, .onnx) or a package directory `coil compile` wrote.
    constants: {name: array}, an ONNX model's graph inputs fixed at load (as --const), for
    ops that need them constant (a Reshape's shape); the model is specialised to them. MODES (as --mode); cache: max-autotune's cache file (--cache); dims: symbol sizes known
    ahead ({"B": 8}, as --dim); profile: time each step for Model.profile()."""
    o = _options(device, threads, overrides, training, seed, interpret, mode, cache, dims,
                 profile)
    _fix_inputs(o, constants)
    err = Err()
    m = lib.coil_load_sized(os.fsencode(path), ctypes.byref(o), ctypes.byref(err),
                            ctypes.sizeof(o))
    check(m, err)
    return Model(m)


def compile(source, name="model.coil", device=None, threads=0, overrides=None, training=False,
            seed=0, interpret=False, mode=None, cache=None, dims=None, profile=False):
    """A model from its text: the .coil language when name ends in .coil, else IR text.
    Options as for load."""
    o = _options(device, threads, overrides, training, seed, interpret, mode, cache, dims,
                 profile)
    err = Err()
    text = source.encode()
    m = lib.coil_load_text_sized(name.encode(), text, len(text), ctypes.byref(o),
                                 ctypes.byref(err), ctypes.sizeof(o))
    check(m, err)
    return Model(m)
