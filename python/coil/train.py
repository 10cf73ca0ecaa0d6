"""coil.Trainer: a model trained one optimizer step per call on the caller's batches, with
`coil train`'s optimizers, schedule and checkpoints (coil_trainer_new, coil_train_step,
coil_trainer_param, _sync, _save, _resume)."""
import ctypes
import os

import numpy as np

from . import _tensors
from ._lib import PARAM, Err, Error, Tensor, TrainOptions, check, lib
from .model import Model

OPTIONS = tuple(f for f, _ in TrainOptions._fields_)  # coil_train_options' fields


def _as_dict(o):
    return {f: (v.decode() if isinstance(v, bytes) else v)
            for f, v in ((f, getattr(o, f)) for f in OPTIONS)}


def _defaults(name):
    """coil_train_defaults(name) as a TrainOptions, written at ctypes' size of it."""
    o = TrainOptions()
    lib.coil_train_defaults_into(name, ctypes.byref(o), ctypes.sizeof(o))
    return o


def train_defaults(optimizer="adamw"):
    """`coil train`'s hyper-parameters for that optimizer ("adamw", "sgd", "lion"), as a
    dict of coil_train_options' fields: the keywords Trainer takes."""
    name = optimizer.encode()  # the struct's optimizer points at it
    return _as_dict(_defaults(name))


class Trainer:
    """Trains model (its parameters set) one step per call:

        t = coil.Trainer(model, "sgd", lr=0.1, momentum=0.9, loss="cross_entropy")
        for x, labels in batches:
            loss = t.step(x, labels)          # or t.step(x=x, targets=labels)
        t.sync()                              # model(...) runs the trained parameters
        t.save("ckpt")                        # coil train's checkpoint; t.resume("ckpt")

    Options are coil_train_options' fields (train_defaults(optimizer) gives their
    defaults): lr, min_lr, warmup, cosine_steps, weight_decay, beta1, beta2, eps, momentum,
    clip, accum, loss (None: the model's output "loss"; "cross_entropy": of its first
    output against an input "targets"), precision, seed. The model must outlive the
    trainer (the trainer holds it)."""

    def __init__(self, model, optimizer="adamw", **options):
        if not isinstance(model, Model):
            raise Error(2, f"Trainer: a {type(model).__name__} given; it trains a coil.Model")
        unknown = [k for k in options if k not in OPTIONS or k == "optimizer"]
        if unknown:
            raise TypeError(f"Trainer: no option {', '.join(unknown)}; its options: "
                            f"{', '.join(OPTIONS[1:])}")
        o = _defaults(optimizer.encode())
        o.optimizer = optimizer.encode()  # now held by the struct, as every string set below
        for k, v in options.items():
            if k == "seed" and (not isinstance(v, int) or v < 0):
                raise Error(2, f"Trainer: seed {v!r}: give an integer >= 0")
            setattr(o, k, v.encode() if isinstance(v, str) else v)
        self.options = _as_dict(o)
        err = Err()
        self._t = lib.coil_trainer_new_sized(model._m, ctypes.byref(o), ctypes.byref(err),
                                             ctypes.sizeof(o))
        check(self._t, err)
        self.model = model
        self.inputs, self._dtypes = [], []
        for i in range(lib.coil_trainer_ninputs(self._t)):
            typ = ctypes.c_char_p()
            self.inputs.append(lib.coil_trainer_input(self._t, i, ctypes.byref(typ)).decode())
            self._dtypes.append(_tensors.NAMES.index(typ.value.decode().split("[")[0]))

    def __del__(self):
        if getattr(self, "_t", None):
            lib.coil_trainer_free(self._t)
            self._t = None

    def __repr__(self):
        return (f"<coil.Trainer {self.options['optimizer']} lr={self.options['lr']} "
                f"inputs ({', '.join(self.inputs)}), {self.steps} steps>")

    @property
    def steps(self):
        """Optimizer steps taken: by this trainer, and by the run a resume continued."""
        return lib.coil_trainer_steps(self._t)

    def step(self, *inputs, **named):
        """One optimizer step; its loss (the micro-batches' mean, before the update). The
        inputs are .inputs: by position or by name, arrays or CPU tensors (read in place).
        With accum > 1 each is split along its first axis into accum equal micro-batches;
        or, by position, give the micro-batches one after another (len(inputs) * accum)."""
        if inputs and named:
            raise Error(2, "step: give the inputs by position or by name, not both")
        names = list(named) if named else None
        values = list(named.values()) if named else list(inputs)
        n, accum = len(self.inputs), self.options["accum"]
        if names is None and len(values) == n * accum:
            batches = values
        elif len(values) == n:
            parts = [_split(v, accum, (names or self.inputs)[i]) for i, v in enumerate(values)]
            batches = [p[k] for k in range(accum) for p in parts]
        else:
            more = f", or {n * accum}: its {accum} micro-batches in turn" if accum > 1 else ""
            raise Error(2, f"step: {len(values)} inputs given; a step takes {n} "
                        f"({', '.join(self.inputs)}){more}")
        ts = (Tensor * max(len(batches), 1))()
        ts.held = [self._fill(ts[i], (names or self.inputs)[i % n], a)  # alive as long as ts
                   for i, a in enumerate(batches)]
        c_names = (ctypes.c_char_p * n)(*[s.encode() for s in names]) if names else None
        loss, err = ctypes.c_double(), Err()
        check(lib.coil_train_step(self._t, ts, len(batches), c_names, ctypes.byref(loss),
                                  ctypes.byref(err)), err)
        return loss.value

    def _fill(self, t, name, a):
        """t describes input `name` in its dtype (an unknown name, which coil reports, in
        the array's own)."""
        if name in self.inputs:
            return _tensors.fill_input(t, a, self._dtypes[self.inputs.index(name)], name)
        a = np.asarray(a)
        return _tensors.fill_input(t, a, _tensors.coil_dtype(a, name), name)

    def param(self, name):
        """The trainer's value of parameter `name`, a NumPy array of its own."""
        index = lib.coil_find(self.model._m, PARAM, name.encode())
        if index < 0:
            raise Error(2, f"no parameter '{name}'; the model's: "
                        f"{', '.join(self.model.params) or 'none'}")
        t, err = Tensor(), Err()
        check(lib.coil_trainer_param(self._t, index, ctypes.byref(t), ctypes.byref(err)), err)
        return _tensors.adopt(t)

    def params(self):
        """{name: array} of every parameter, in the model's order (a state dict)."""
        return {name: self.param(name) for name in self.model.params}

    def sync(self):
        """The model's parameters set to the trainer's: model(...) runs the trained model."""
        err = Err()
        check(lib.coil_trainer_sync(self._t, ctypes.byref(err)), err)
        return self

    def save(self, path):
        """Write `coil train --save path`'s checkpoint (parameters, optimizer state, step)."""
        err = Err()
        check(lib.coil_trainer_save(self._t, os.fsencode(path), ctypes.byref(err)), err)
        return self

    def resume(self, path):
        """Continue from the checkpoint in path (this package's, the C API's or `coil
        train`'s): the steps after it are bit-identical to a run that never stopped."""
        err = Err()
        check(lib.coil_trainer_resume(self._t, os.fsencode(path), ctypes.byref(err)), err)
        return self


def _split(v, accum, name):
    """v's accum equal micro-batches along its first axis (views: no copy)."""
    if accum == 1:
        return [v]
    shape = getattr(v, "shape", None)
    if shape is None:
        v = np.asarray(v)
        shape = v.shape
    if len(shape) == 0 or shape[0] % accum:
        rows = "a scalar" if len(shape) == 0 else f"{shape[0]} rows"
        raise Error(5, f"step: input '{name}': {rows} do not split into accum={accum} equal "
                    "micro-batches; give the micro-batches one after another instead")
    h = shape[0] // accum
    return [v[k * h:(k + 1) * h] for k in range(accum)]
