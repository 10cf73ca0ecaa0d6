"""Arrays to coil_tensors and back: inputs read in place (NumPy arrays, and through DLPack
PyTorch and JAX CPU tensors), converted once when their dtype or layout differs; outputs as
NumPy arrays over the buffers coil allocated."""
import ctypes
import struct

import numpy as np

from ._lib import MAX_RANK, Error, Tensor, lib

F32, F16, BF16, I8, I32, I64, BOOL = range(7)  # coil_dtype
NAMES = ("f32", "f16", "bf16", "i8", "i32", "i64", "bool")
# The NumPy dtype holding each coil dtype: bf16 as its 16 bits, since NumPy has no bf16.
NP_DTYPES = tuple(np.dtype(t) for t in (np.float32, np.float16, np.uint16, np.int8, np.int32,
                                          np.int64, np.bool_))

# DLPack (dlpack.h): the devices whose memory the CPU reads, and (type code, bits) to coil
# dtypes. Code 1 with 16 bits is uint16, bf16's bits as NumPy holds them.
_DL_HOST = {1: "cpu", 3: "cuda_host", 11: "rocm_host"}
_DL_DEVICES = {2: "cuda", 4: "opencl", 7: "vulkan", 8: "metal", 9: "vpi", 10: "rocm",
               13: "cuda_managed", 14: "oneapi"}
_DL_DTYPES = {(2, 32): F32, (2, 16): F16, (4, 16): BF16, (1, 16): BF16, (0, 8): I8,
              (0, 32): I32, (0, 64): I64, (6, 8): BOOL}


# The head of a DLPack capsule's DLManagedTensor (DLTensor): data; device type and id; ndim;
# dtype code, bits, lanes; shape and strides pointers; byte_offset. Read with one unpack, as
# ctypes field by field costs 4 us a tensor.
_DL_HEAD = struct.Struct("@PiiiBBHPPQ")
_INT64S = [struct.Struct(f"@{n}q") for n in range(MAX_RANK + 1)]


class _ArrayInterface(ctypes.Structure):  # NumPy's PyArrayInterface (__array_struct__)
    _fields_ = [("two", ctypes.c_int), ("nd", ctypes.c_int), ("typekind", ctypes.c_char),
                ("itemsize", ctypes.c_int), ("flags", ctypes.c_int),
                ("shape", ctypes.c_void_p), ("strides", ctypes.c_void_p),
                ("data", ctypes.c_void_p)]


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype, _capsule_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object,
                                                                       ctypes.c_char_p]


def data_pointer(a):
    """The address of a NumPy array's first element: through its interface capsule, as
    a.ctypes.data costs 2.5 us a call (the call overhead's largest part) and this 1 us."""
    return _ArrayInterface.from_address(_capsule_pointer(a.__array_struct__, None)).data


def coil_dtype(a, name):
    """The coil dtype of a NumPy array (uint16: bf16's bits)."""
    try:
        return NP_DTYPES.index(a.dtype)
    except ValueError:
        raise Error(5, f"'{name}': NumPy dtype {a.dtype} is none of coil's (float32, float16, "
                    "uint16 for bf16's bits, int8, int32, int64, bool)") from None


def describe(t, a, dt, name):
    """t describes the C-contiguous NumPy array a given for `name`, of coil dtype dt, in
    place."""
    if a.ndim > MAX_RANK:
        raise Error(5, f"'{name}': an array of rank {a.ndim}; coil's tensors have rank "
                    f"{MAX_RANK} at most")
    t.dtype, t.rank = dt, a.ndim
    t.shape[:a.ndim] = a.shape
    t.data = data_pointer(a)


def fill_input(t, a, dt, name):
    """t describes input `name` (coil dtype dt) given as a: read in place when a is a
    C-contiguous array or CPU DLPack tensor of that dtype, else converted once. Returns
    what must stay alive until coil has read it."""
    if not isinstance(a, np.ndarray):
        held = _dlpack_view(t, a, dt, name)
        if held is not None:
            return held
        a = _to_numpy(a, name)
    if a.dtype is not NP_DTYPES[dt] or not a.flags.c_contiguous:
        a = _convert(a, dt, name)
    describe(t, a, dt, name)
    return a


def fill_output(t, a, name):
    """t describes a, the caller's buffer for output `name`, which coil writes in place: a
    C-contiguous, writable NumPy array (a CPU PyTorch tensor's t.numpy() is one). Returns a.
    (DLPack cannot say whether a tensor may be written, so other kinds are refused.)"""
    if not (isinstance(a, np.ndarray) and a.flags.c_contiguous and a.flags.writeable):
        raise Error(2, f"out for '{name}': give a C-contiguous, writable NumPy array (for a "
                    "CPU tensor, tensor.numpy()), or None: coil allocates")
    describe(t, a, coil_dtype(a, name), name)
    return a


def _dlpack_view(t, obj, dt, name):
    """t describes obj in place through DLPack when obj is a CPU tensor of coil dtype dt
    stored row-major; None when it is not (the caller converts it) or obj does not speak
    DLPack. A tensor on a GPU is an error, as the C API takes host memory only. The capsule
    returned keeps obj's memory alive while coil reads it; its destructor releases it.
    (The device is read from the capsule: __dlpack_device__ first would cost 3 us more.)"""
    export = getattr(obj, "__dlpack__", None)
    if export is None:
        return None
    try:
        capsule = export()
        head = ctypes.string_at(_capsule_pointer(capsule, b"dltensor"), _DL_HEAD.size)
    except (BufferError, RuntimeError, TypeError, ValueError) as e:
        if hasattr(obj, "__dlpack_device__"):
            _check_host(*obj.__dlpack_device__(), name)
        raise Error(2, f"input '{name}': its DLPack export failed: {e}") from None
    data, kind, index, ndim, code, bits, lanes, shape_p, strides_p, offset = \
        _DL_HEAD.unpack(head)
    _check_host(kind, index, name)
    found = _DL_DTYPES.get((code, bits)) if lanes == 1 else None
    if found != dt or ndim > MAX_RANK:
        return None
    shape = _int64s(shape_p, ndim)
    if strides_p and not _row_major(shape, _int64s(strides_p, ndim)):
        return None
    t.dtype, t.rank = dt, ndim
    t.shape[:ndim] = shape
    t.data = (data or 0) + offset
    return capsule


def _check_host(kind, index, name):
    """Refuse memory the CPU cannot read (a DLPack device type of a GPU)."""
    if kind not in _DL_HOST:
        where = f"{_DL_DEVICES.get(kind, f'DLPack device {kind}')}:{index}"
        raise Error(6, f"input '{name}': a tensor on {where}; coil's C API takes host memory "
                    "only (device tensors are not supported yet): copy it to the CPU first "
                    "(tensor.cpu(), jax.device_get)")


def _int64s(address, n):
    """The n int64s at address (a DLTensor's shape or strides)."""
    return _INT64S[n].unpack(ctypes.string_at(address, 8 * n)) if n else ()


def _row_major(shape, strides):
    """Whether strides (in elements) are those of a dense row-major tensor of that shape (a
    size-1 dimension's stride does not matter)."""
    step = 1
    for size, stride in zip(reversed(shape), reversed(strides)):
        if size != 1 and stride != step:
            return False
        step *= size
    return True


def _to_numpy(a, name):
    """a as a NumPy array: through DLPack (no copy) when NumPy can read it, else __array__."""
    if hasattr(a, "__dlpack__") and hasattr(np, "from_dlpack"):
        try:
            return np.from_dlpack(a)
        except (BufferError, RuntimeError, TypeError, ValueError):
            pass  # a dtype or layout NumPy's DLPack import refuses: try __array__
    try:
        return np.asarray(a)
    except (TypeError, ValueError, RuntimeError) as e:
        raise Error(5, f"input '{name}': a {type(a).__name__} NumPy cannot read ({e}); give it "
                    "as an array of the input's dtype") from None


def _convert(a, dt, name):
    """a as a C-contiguous array of coil dtype dt: floats to bf16 rounded to nearest even;
    otherwise NumPy's same-kind casts (f64 to f32, i64 to i32), never floats to integers."""
    if dt == BF16 and a.dtype != np.uint16:
        return bf16_bits(a)
    want = NP_DTYPES[dt]
    if not np.can_cast(a.dtype, want, casting="same_kind"):
        raise Error(5, f"input '{name}': {a.dtype} values for an input of dtype {NAMES[dt]}: "
                    f"convert them first (.astype(numpy.{want}))")
    return np.ascontiguousarray(a, dtype=want)


def bf16_bits(a):
    """The bf16 nearest each element of a (ties to even), as its 16 bits in a uint16."""
    f = np.ascontiguousarray(a, dtype=np.float32)
    u = f.view(np.uint32).astype(np.uint64)
    bits = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(f)
    bits[nan] = ((u[nan] >> 16) | 0x40).astype(np.uint16)  # NaN stays a (quiet) NaN
    return bits


class _Owned:
    """A buffer coil allocated, freed when the last NumPy array viewing it is gone (the
    arrays' base holds this)."""

    __slots__ = ("data",)

    def __init__(self, data):
        self.data = data

    def __del__(self):
        t = Tensor()
        t.data = self.data
        lib.coil_tensor_free(ctypes.byref(t))


def adopt(t):
    """The tensor coil allocated into t as a plain NumPy array over its buffer (no copy)."""
    shape = tuple(t.shape[:t.rank])
    dtype = NP_DTYPES[t.dtype]
    n = 1
    for s in shape:
        n *= s
    if not t.data or n == 0:
        lib.coil_tensor_free(ctypes.byref(t))
        return np.zeros(shape, dtype)
    buf = (ctypes.c_char * (n * dtype.itemsize)).from_address(t.data)
    buf.owner = _Owned(t.data)
    t.data = None
    return np.ndarray(shape, dtype, buffer=buf)
