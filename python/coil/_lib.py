"""libcoil.so through ctypes: finding the library, coil.h's structs and functions as ctypes
declares them, and coil.Error. The rest of the package calls coil through `lib` alone."""
import ctypes
import os
import shutil
import subprocess

MAX_RANK = 8
INPUT, OUTPUT, PARAM = 0, 1, 2  # coil_kind


class Error(Exception):
    """A coil failure: .code (coil.h's COIL_ERR_*: 1 bad input, 2 the API misused, 3 a
    file, 4 the model's text, 5 a shape, 6 unsupported, 7 the device, 8 memory, 9 a write,
    10 a bug in coil) and coil's located message."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


class Tensor(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_int), ("rank", ctypes.c_int),
                ("shape", ctypes.c_int64 * MAX_RANK), ("data", ctypes.c_void_p)]


class Err(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int), ("message", ctypes.c_char * 1024)]


class DimSize(ctypes.Structure):
    _fields_ = [("symbol", ctypes.c_char_p), ("size", ctypes.c_int64)]


class Options(ctypes.Structure):
    _fields_ = [("overrides", ctypes.POINTER(ctypes.c_char_p)), ("noverrides", ctypes.c_int),
                ("training", ctypes.c_bool), ("seed", ctypes.c_uint64),
                ("interpret", ctypes.c_bool), ("threads", ctypes.c_int),
                ("device", ctypes.c_char_p), ("mode", ctypes.c_char_p),
                ("cache", ctypes.c_char_p), ("dims", ctypes.POINTER(DimSize)),
                ("ndims", ctypes.c_int), ("profile", ctypes.c_bool),
                ("constant_names", ctypes.POINTER(ctypes.c_char_p)),
                ("constants", ctypes.POINTER(Tensor)), ("nconstants", ctypes.c_int)]


class Info(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("type", ctypes.c_char_p), ("dtype", ctypes.c_int),
                ("rank", ctypes.c_int), ("shape", ctypes.c_int64 * MAX_RANK),
                ("dim", ctypes.c_char_p * MAX_RANK), ("init", ctypes.c_char_p),
                ("buffer", ctypes.c_bool)]


class StepTime(ctypes.Structure):
    _fields_ = [("step", ctypes.c_int), ("name", ctypes.c_char_p), ("layer", ctypes.c_char_p),
                ("kind", ctypes.c_char_p), ("ms", ctypes.c_double), ("share", ctypes.c_double),
                ("flops", ctypes.c_double), ("bytes", ctypes.c_int64)]


class Profile(ctypes.Structure):
    _fields_ = [("runs", ctypes.c_int64), ("ms", ctypes.c_double), ("nsteps", ctypes.c_int),
                ("steps", ctypes.POINTER(StepTime))]


class TrainOptions(ctypes.Structure):
    _fields_ = [("optimizer", ctypes.c_char_p), ("lr", ctypes.c_double),
                ("min_lr", ctypes.c_double), ("warmup", ctypes.c_int64),
                ("cosine_steps", ctypes.c_int64), ("weight_decay", ctypes.c_double),
                ("beta1", ctypes.c_double), ("beta2", ctypes.c_double),
                ("eps", ctypes.c_double), ("momentum", ctypes.c_double),
                ("clip", ctypes.c_double), ("accum", ctypes.c_int),
                ("loss", ctypes.c_char_p), ("precision", ctypes.c_char_p),
                ("seed", ctypes.c_uint64)]


def _candidates():
    here = os.path.dirname(os.path.abspath(__file__))
    if os.environ.get("COIL_LIBRARY"):
        yield os.environ["COIL_LIBRARY"]
    yield os.path.join(here, "libcoil.so")
    if shutil.which("pkg-config"):
        r = subprocess.run(["pkg-config", "--variable=libdir", "coil"], capture_output=True,
                           text=True)
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


lib = _open()

_P, _E, _T = ctypes.c_void_p, ctypes.POINTER(Err), ctypes.POINTER(Tensor)
_S, _B, _I = ctypes.c_char_p, ctypes.c_bool, ctypes.c_int
_NAMES = ctypes.POINTER(ctypes.c_char_p)
_DIMS = ctypes.POINTER(DimSize)
_OPTS = ctypes.POINTER(Options)
for name, res, args in [
        ("coil_version", _S, []),
        ("coil_dtype_name", _S, [_I]),
        # the options' size is ctypes'; coil.h's macros pass the C program's own
        ("coil_load_sized", _P, [_S, _OPTS, _E, ctypes.c_size_t]),
        ("coil_load_text_sized", _P, [_S, _S, ctypes.c_size_t, _OPTS, _E, ctypes.c_size_t]),
        ("coil_free", None, [_P]),
        ("coil_count", _I, [_P, _I]),
        ("coil_info_at", ctypes.POINTER(Info), [_P, _I, _I]),
        ("coil_find", _I, [_P, _I, _S]),
        ("coil_init_params", _B, [_P, ctypes.c_uint64, _DIMS, _I, _E]),
        ("coil_load_weights", _B, [_P, _S, _E]),
        ("coil_set_param", _B, [_P, _I, _T, _E]),
        ("coil_run", _B, [_P, _T, _I, _T, _I, _E]),
        ("coil_set_rng_step", _B, [_P, ctypes.c_uint64, _E]),
        ("coil_prepare", _B, [_P, _DIMS, _I, _E]),
        ("coil_save", _B, [_P, _S, _E]),
        ("coil_run_named", _B, [_P, _NAMES, _T, _I, _NAMES, _T, _I, _E]),
        ("coil_dump", ctypes.c_void_p, [_P, _S, _E]),
        ("coil_dump_file", _B, [_P, _S, _S, _E]),
        ("coil_string_free", None, [ctypes.c_void_p]),
        ("coil_get_profile", _B, [_P, ctypes.POINTER(Profile), _E]),
        ("coil_reset_profile", _B, [_P, _E]),
        ("coil_tensor_free", None, [_T]),
        # the builder
        ("coil_builder_new", _P, [_S, _E]),
        ("coil_builder_free", None, [_P]),
        ("coil_input", _I, [_P, _S, _S, _E]),
        ("coil_param", _I, [_P, _S, _S, _S, _E]),
        ("coil_op", _I, [_P, _S, ctypes.POINTER(_I), _I, _S, _S, _E]),
        ("coil_output", _B, [_P, _S, _I, _E]),
        ("coil_build_sized", _P, [_P, _OPTS, _E, ctypes.c_size_t]),
        # training
        ("coil_train_defaults_into", None, [_S, ctypes.POINTER(TrainOptions), ctypes.c_size_t]),
        ("coil_trainer_new_sized", _P, [_P, ctypes.POINTER(TrainOptions), _E, ctypes.c_size_t]),
        ("coil_trainer_free", None, [_P]),
        ("coil_trainer_ninputs", _I, [_P]),
        ("coil_trainer_input", _S, [_P, _I, _NAMES]),
        ("coil_train_step", _B, [_P, _T, _I, _NAMES, ctypes.POINTER(ctypes.c_double), _E]),
        ("coil_trainer_steps", ctypes.c_int64, [_P]),
        ("coil_trainer_param", _B, [_P, _I, _T, _E]),
        ("coil_trainer_sync", _B, [_P, _E]),
        ("coil_trainer_save", _B, [_P, _S, _E]),
        ("coil_trainer_resume", _B, [_P, _S, _E])]:
    fn = getattr(lib, name)
    fn.restype, fn.argtypes = res, args


def check(ok, err):
    """Raise coil's error when a call reported failure (False or NULL)."""
    if not ok:
        raise Error(err.code, err.message.decode(errors="replace"))


def dim_sizes(sizes):
    """{"B": 4} as a coil_dim_size array (kept alive by the caller) and its length."""
    sizes = sizes or {}
    arr = (DimSize * max(len(sizes), 1))(*[DimSize(k.encode(), v) for k, v in sizes.items()])
    return arr, len(sizes)


def options(device=None, threads=0, overrides=None, training=False, seed=0, interpret=False,
            mode=None, cache=None, dims=None, profile=False):
    """coil_options from load's keywords; what its pointers point at rides on the struct."""
    o = Options()
    items = [f"{k}={v}".encode() for k, v in (overrides or {}).items()]
    o._keep = (ctypes.c_char_p * max(len(items), 1))(*items)
    o.overrides, o.noverrides = o._keep, len(items)
    o.training, o.seed, o.interpret, o.threads = training, seed, interpret, threads
    o.device = device.encode() if device else None
    o.mode = mode.encode() if mode else None
    o.cache = os.fsencode(cache) if cache else None
    o._dims, o.ndims = dim_sizes(dims)
    o.dims = o._dims
    o.profile = profile
    return o
