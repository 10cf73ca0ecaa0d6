"""coil from Python: a thin layer over libcoil.so (include/coil/coil.h) through ctypes.

    import coil, numpy as np
    m = coil.load("examples/tiny.coil")          # or a package directory, or coil.compile(text)
    m.init_params(seed=0, dims={"B": 4})         # or m.load_weights("model.safetensors")
    logits, probs = m(np.ones((4, 16), np.float32))
    probs, = m.run({"x": x}, outputs=["probs"], out=[buf])   # by name, into buf
    m.prepare(dims={"B": 4}); m.save("tiny.pkg")              # compile ahead; a package

Outputs are NumPy arrays that own coil's buffers (no copy; torch.from_numpy makes them
tensors without one); inputs are read in place when they are C-contiguous arrays (or CPU
PyTorch tensors) of the input's dtype, else converted once. Failures raise
coil.Error with coil's located message and its code. The library is found at
$COIL_LIBRARY, next to this package, through pkg-config, or on the loader's path.
"""
import ctypes
import os
import shutil
import subprocess

import numpy as np

__all__ = ["Error", "Model", "load", "compile", "version", "MODES"]

MODES = ("default", "reduce-overhead", "max-autotune")  # coil_options.mode, as --mode

MAX_RANK = 8
_DTYPES = ["float32", "float16", None, "int8", "int32", "int64", "bool"]  # coil_dtype order
_BF16 = 2


class Error(Exception):
    """A coil failure: .code (coil.h's COIL_ERR_*: 1 bad input, 2 the API misused, 3 a
    file, 4 the model's text, 5 a shape, 6 unsupported, 7 the device, 8 memory, 9 a write,
    10 a bug in coil) and coil's located message."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


class _Tensor(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_int), ("rank", ctypes.c_int),
                ("shape", ctypes.c_int64 * MAX_RANK), ("data", ctypes.c_void_p)]


class _Err(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int), ("message", ctypes.c_char * 1024)]


class _DimSize(ctypes.Structure):
    _fields_ = [("symbol", ctypes.c_char_p), ("size", ctypes.c_int64)]


class _Options(ctypes.Structure):
    _fields_ = [("overrides", ctypes.POINTER(ctypes.c_char_p)), ("noverrides", ctypes.c_int),
                ("training", ctypes.c_bool), ("seed", ctypes.c_uint64),
                ("interpret", ctypes.c_bool), ("threads", ctypes.c_int),
                ("device", ctypes.c_char_p), ("mode", ctypes.c_char_p),
                ("cache", ctypes.c_char_p), ("dims", ctypes.POINTER(_DimSize)),
                ("ndims", ctypes.c_int), ("profile", ctypes.c_bool)]


class _Info(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("type", ctypes.c_char_p), ("dtype", ctypes.c_int),
                ("rank", ctypes.c_int), ("shape", ctypes.c_int64 * MAX_RANK),
                ("dim", ctypes.c_char_p * MAX_RANK), ("init", ctypes.c_char_p)]


class _StepTime(ctypes.Structure):
    _fields_ = [("step", ctypes.c_int), ("name", ctypes.c_char_p), ("layer", ctypes.c_char_p),
                ("kind", ctypes.c_char_p), ("ms", ctypes.c_double), ("share", ctypes.c_double),
                ("flops", ctypes.c_double), ("bytes", ctypes.c_int64)]


class _Profile(ctypes.Structure):
    _fields_ = [("runs", ctypes.c_int64), ("ms", ctypes.c_double), ("nsteps", ctypes.c_int),
                ("steps", ctypes.POINTER(_StepTime))]


def _candidates():
    here = os.path.dirname(os.path.abspath(__file__))
    if os.environ.get("COIL_LIBRARY"):
        yield os.environ["COIL_LIBRARY"]
    yield os.path.join(here, "libcoil.so")
    if shutil.which("pkg-config"):
        r = subprocess.run(["pkg-config", "--variable=libdir", "coil"], capture_output=True, text=True)
        if r.returncode == 0 and r.stdout.strip():
            yield os.path.join(r.stdout.strip(), "libcoil.so")
    yield "libcoil.so.0"


def _open():
    tried = []
    for path in _candidates():
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            tried.append(f"{path}: {e}")
    raise ImportError("coil: libcoil.so not found (set COIL_LIBRARY, or install coil with "
                      "cmake --install and make pkg-config find it); tried " + "; ".join(tried))


_lib = _open()
_P, _E = ctypes.c_void_p, ctypes.POINTER(_Err)
for name, res, args in [
        ("coil_version", ctypes.c_char_p, []),
        ("coil_load", _P, [ctypes.c_char_p, ctypes.POINTER(_Options), _E]),
        ("coil_load_text", _P, [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t,
                                ctypes.POINTER(_Options), _E]),
        ("coil_free", None, [_P]),
        ("coil_count", ctypes.c_int, [_P, ctypes.c_int]),
        ("coil_info_at", ctypes.POINTER(_Info), [_P, ctypes.c_int, ctypes.c_int]),
        ("coil_init_params", ctypes.c_bool, [_P, ctypes.c_uint64, ctypes.POINTER(_DimSize),
                                             ctypes.c_int, _E]),
        ("coil_load_weights", ctypes.c_bool, [_P, ctypes.c_char_p, _E]),
        ("coil_set_param", ctypes.c_bool, [_P, ctypes.c_int, ctypes.POINTER(_Tensor), _E]),
        ("coil_run", ctypes.c_bool, [_P, ctypes.POINTER(_Tensor), ctypes.c_int,
                                     ctypes.POINTER(_Tensor), ctypes.c_int, _E]),
        ("coil_set_rng_step", ctypes.c_bool, [_P, ctypes.c_uint64, _E]),
        ("coil_prepare", ctypes.c_bool, [_P, ctypes.POINTER(_DimSize), ctypes.c_int, _E]),
        ("coil_save", ctypes.c_bool, [_P, ctypes.c_char_p, _E]),
        ("coil_run_named", ctypes.c_bool, [_P, ctypes.POINTER(ctypes.c_char_p),
                                           ctypes.POINTER(_Tensor), ctypes.c_int,
                                           ctypes.POINTER(ctypes.c_char_p),
                                           ctypes.POINTER(_Tensor), ctypes.c_int, _E]),
        ("coil_dump", ctypes.c_void_p, [_P, ctypes.c_char_p, _E]),
        ("coil_dump_file", ctypes.c_bool, [_P, ctypes.c_char_p, ctypes.c_char_p, _E]),
        ("coil_string_free", None, [ctypes.c_void_p]),
        ("coil_get_profile", ctypes.c_bool, [_P, ctypes.POINTER(_Profile), _E]),
        ("coil_reset_profile", ctypes.c_bool, [_P, _E]),
        ("coil_tensor_free", None, [ctypes.POINTER(_Tensor)])]:
    fn = getattr(_lib, name)
    fn.restype, fn.argtypes = res, args


def version():
    """The linked libcoil's version ("0.1.0")."""
    return _lib.coil_version().decode()


def _check(ok, err):
    if not ok:
        raise Error(err.code, err.message.decode(errors="replace"))


def _dims(dims):
    """{"B": 4} as a coil_dim_size array (kept alive by the caller) and its length."""
    dims = dims or {}
    arr = (_DimSize * max(len(dims), 1))(*[_DimSize(k.encode(), v) for k, v in dims.items()])
    return arr, len(dims)


def _options(device, threads, overrides, training, seed, interpret, mode=None, cache=None,
             dims=None, profile=False):
    o = _Options()
    items = [f"{k}={v}".encode() for k, v in (overrides or {}).items()]
    o._keep = (ctypes.c_char_p * max(len(items), 1))(*items)
    o.overrides, o.noverrides = o._keep, len(items)
    o.training, o.seed, o.interpret, o.threads = training, seed, interpret, threads
    o.device = device.encode() if device else None
    o.mode = mode.encode() if mode else None
    o.cache = os.fsencode(cache) if cache else None
    o._dims, o.ndims = _dims(dims)
    o.dims = o._dims
    o.profile = profile
    return o


class _Owned:
    """Holds an output tensor coil allocated until the last array viewing it is gone."""

    def __init__(self, t):
        self.t = t

    def __del__(self):
        _lib.coil_tensor_free(ctypes.byref(self.t))


def _np_dtype(dt):
    """The NumPy dtype holding coil_dtype dt (bf16: its bits, as NumPy has no bf16)."""
    return np.dtype(np.uint16) if dt == _BF16 else np.dtype(_DTYPES[dt])


class Model:
    """A loaded model: .inputs, .outputs, .params (names), called with arrays."""

    def __init__(self, handle):
        self._m = handle
        self.inputs = self._names(0)
        self.outputs = self._names(1)
        self.params = self._names(2)
        coil_dts = [_lib.coil_info_at(handle, 0, i).contents.dtype for i in range(len(self.inputs))]
        self._in = [(dt, _np_dtype(dt)) for dt in coil_dts]  # each input's, read at every call

    def _names(self, kind):
        return [_lib.coil_info_at(self._m, kind, i).contents.name.decode()
                for i in range(_lib.coil_count(self._m, kind))]

    def __del__(self):
        if getattr(self, "_m", None):
            _lib.coil_free(self._m)
            self._m = None

    def init_params(self, seed=0, dims=None):
        """Every parameter from its initializer, drawn from seed; dims size the symbols."""
        arr, n = _dims(dims)
        err = _Err()
        _check(_lib.coil_init_params(self._m, seed, arr, n, ctypes.byref(err)), err)
        return self

    def prepare(self, dims=None):
        """Compile now (or map a package's kernels) and, with every input sized (dims, the
        load's dims) and the parameters set, run once on zeros: the first call after it
        compiles nothing."""
        arr, n = _dims(dims)
        err = _Err()
        _check(_lib.coil_prepare(self._m, arr, n, ctypes.byref(err)), err)
        return self

    def save(self, path):
        """Write the package `coil compile -o path` writes; coil.load(path) maps it."""
        err = _Err()
        _check(_lib.coil_save(self._m, os.fsencode(path), ctypes.byref(err)), err)
        return self

    def dump(self, stage="input", path=None):
        """The IR at a stage ("input", a pass such as "cse", "fuse", "lower", "llvm-ir",
        "asm"): its text, or written to path (then None)."""
        err = _Err()
        if path is not None:
            _check(_lib.coil_dump_file(self._m, stage.encode(), os.fsencode(path),
                                       ctypes.byref(err)), err)
            return None
        text = _lib.coil_dump(self._m, stage.encode(), ctypes.byref(err))
        _check(text, err)
        try:
            return ctypes.string_at(text).decode()
        finally:
            _lib.coil_string_free(text)

    def profile(self, reset=False):
        """Each compiled step's time per run since compiling, prepare or the last reset, as
        `coil bench --profile` lists them, slowest first (a model loaded with profile=True):
        {"runs", "ms", "steps": [{"step", "name", "layer", "kind", "ms", "share", "flops",
        "bytes"}, ...]}. reset=True counts from then on."""
        p, err = _Profile(), _Err()
        _check(_lib.coil_get_profile(self._m, ctypes.byref(p), ctypes.byref(err)), err)
        steps = [{k: getattr(p.steps[i], k) for k, _ in _StepTime._fields_}
                 for i in range(p.nsteps)]
        for s in steps:
            for k in ("name", "layer", "kind"):
                s[k] = s[k].decode()
        if reset:
            _check(_lib.coil_reset_profile(self._m, ctypes.byref(err)), err)
        return {"runs": p.runs, "ms": p.ms, "steps": steps}

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
        ins = (_Tensor * max(len(inputs), 1))()
        in_names = (ctypes.c_char_p * max(len(inputs), 1))()
        keep = []
        for i, (name, a) in enumerate(inputs.items()):
            if name in self.inputs:  # the input's dtype; an unknown name is coil's to report
                dt, np_dt = self._in[self.inputs.index(name)]
                a = np.ascontiguousarray(a, dtype=np_dt)
            else:
                a = np.ascontiguousarray(a)
                dt = _coil_dtype(a, name)
            keep.append(a)
            _fill(ins[i], a, dt)
            in_names[i] = name.encode()
        outs = (_Tensor * max(len(names), 1))()
        out_names = (ctypes.c_char_p * max(len(names), 1))(*[n.encode() for n in names])
        for i, a in enumerate(out):
            if a is not None:
                if not (isinstance(a, np.ndarray) and a.flags.c_contiguous and a.flags.writeable):
                    raise Error(2, f"out for '{names[i]}': give a C-contiguous, writable NumPy "
                                "array (or None: coil allocates)")
                _fill(outs[i], a, _coil_dtype(a, names[i]))
        err = _Err()
        _check(_lib.coil_run_named(self._m, in_names, ins, len(inputs), out_names, outs,
                                   len(names), ctypes.byref(err)), err)
        return tuple(a if a is not None else _adopt(outs[i]) for i, a in enumerate(out))

    def load_weights(self, path):
        """Parameters by name from a .safetensors file."""
        err = _Err()
        _check(_lib.coil_load_weights(self._m, os.fsencode(path), ctypes.byref(err)), err)
        return self

    def set_rng_step(self, step):
        err = _Err()
        _check(_lib.coil_set_rng_step(self._m, step, ctypes.byref(err)), err)

    def __call__(self, *args, **named):
        if named:
            missing = [n for n in self.inputs[len(args):] if n not in named]
            if missing or len(args) + len(named) != len(self.inputs):
                raise Error(2, f"inputs: expected {', '.join(self.inputs)}")
            args = list(args) + [named[n] for n in self.inputs[len(args):]]
        if len(args) != len(self.inputs):
            raise Error(2, f"{len(args)} inputs given; the model takes {len(self.inputs)}: "
                        f"{', '.join(self.inputs)}")
        ins = (_Tensor * max(len(args), 1))()
        keep = []
        for i, a in enumerate(args):
            dt, np_dt = self._in[i]
            a = np.ascontiguousarray(a, dtype=np_dt)
            keep.append(a)
            ins[i].dtype, ins[i].rank = dt, a.ndim
            for d, s in enumerate(a.shape):
                ins[i].shape[d] = s
            ins[i].data = a.ctypes.data
        outs = (_Tensor * max(len(self.outputs), 1))()
        err = _Err()
        _check(_lib.coil_run(self._m, ins, len(args), outs, len(self.outputs), ctypes.byref(err)), err)
        result = [_adopt(outs[i]) for i in range(len(self.outputs))]
        return result[0] if len(result) == 1 else tuple(result)


def _coil_dtype(a, name):
    """The coil_dtype of a NumPy array (uint16: bf16's bits)."""
    if a.dtype == np.uint16:
        return _BF16
    if a.dtype.name in _DTYPES:
        return _DTYPES.index(a.dtype.name)
    raise Error(5, f"'{name}': NumPy dtype {a.dtype} is none of coil's (float32, float16, "
                "uint16 for bf16's bits, int8, int32, int64, bool)")


def _fill(t, a, dt):
    """t describes the contiguous array a, read or written in place."""
    t.dtype, t.rank = dt, a.ndim
    for d, s in enumerate(a.shape):
        t.shape[d] = s
    t.data = a.ctypes.data


class _Array(np.ndarray):
    """An ndarray over a buffer coil allocated, freed with the last view of it."""


def _adopt(t):
    shape = tuple(t.shape[i] for i in range(t.rank))
    dtype = _np_dtype(t.dtype)
    n = 1
    for s in shape:
        n *= s
    if not t.data or n == 0:
        return np.zeros(shape, dtype)
    buf = (ctypes.c_char * (n * dtype.itemsize)).from_address(t.data)
    a = np.frombuffer(buf, dtype=dtype).reshape(shape).view(_Array)
    a._owner = _Owned(t)
    return a


def load(path, device=None, threads=0, overrides=None, training=False, seed=0, interpret=False,
         mode=None, cache=None, dims=None, profile=False):
    """A model file (.coil, .cir) or a package directory `coil compile` wrote. mode: one of
    MODES (as --mode); cache: max-autotune's cache file (--cache); dims: symbol sizes known
    ahead ({"B": 8}, as --dim); profile: time each step for Model.profile()."""
    o = _options(device, threads, overrides, training, seed, interpret, mode, cache, dims,
                 profile)
    err = _Err()
    m = _lib.coil_load(os.fsencode(path), ctypes.byref(o), ctypes.byref(err))
    _check(m, err)
    return Model(m)


def compile(source, name="model.coil", device=None, threads=0, overrides=None, training=False,
            seed=0, interpret=False, mode=None, cache=None, dims=None, profile=False):
    """A model from its text: the .coil language when name ends in .coil, else IR text.
    Options as for load."""
    o = _options(device, threads, overrides, training, seed, interpret, mode, cache, dims,
                 profile)
    err = _Err()
    text = source.encode()
    m = _lib.coil_load_text(name.encode(), text, len(text), ctypes.byref(o), ctypes.byref(err))
    _check(m, err)
    return Model(m)
