"""coil from Python: a thin layer over libcoil.so (include/coil/coil.h) through ctypes.

    import coil, numpy as np
    m = coil.load("examples/tiny.coil")          # or a package directory, or coil.compile(text)
    m.init_params(seed=0, dims={"B": 4})         # or m.load_weights("model.safetensors")
    logits, probs = m(np.ones((4, 16), np.float32))
    probs, = m.run({"x": x}, outputs=["probs"], out=[buf])   # by name, into buf
    m.prepare(dims={"B": 4}); m.save("tiny.pkg")              # compile ahead; a package

    b = coil.Builder("mlp")                      # a graph op by op
    x = b.input("x", "f32[B,16]")
    w = b.param("fc.weight", "f32[16,4]", init="xavier")
    b.output("probs", b.op("softmax", x @ w, axis=-1))
    m = b.build().init_params(seed=0)

    t = coil.Trainer(m, "sgd", lr=0.1, loss="cross_entropy")   # training
    loss = t.step(x, labels); t.sync(); t.save("ckpt")

Inputs are read in place when they are C-contiguous NumPy arrays or CPU tensors of the
input's dtype that speak DLPack (PyTorch, JAX), else converted once; a GPU tensor is a
coil.Error. Outputs are NumPy arrays that own coil's buffers (no copy; torch.from_dlpack
makes them tensors without one). Failures raise coil.Error with coil's located message and
its code. The library is found at $COIL_LIBRARY, next to this package, through pkg-config,
or on the loader's path.

Modules: _lib (ctypes over libcoil.so), _tensors (arrays to coil_tensors and back), model,
builder, train.
"""
from . import _lib
from ._lib import Error
from .builder import Builder, Value
from .model import MODES, Model, compile, load
from .train import Trainer, train_defaults

__all__ = ["Error", "Model", "load", "compile", "version", "MODES", "Builder", "Value",
           "Trainer", "train_defaults"]


def version():
    """The linked libcoil's version ("0.1.0")."""
    return _lib.lib.coil_version().decode()
