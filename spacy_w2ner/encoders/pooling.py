"""Word-piece pooling that also handles tokens without word pieces.

Thinc's ``reduce_max.v1`` raises on a zero-length sequence, and a spaCy token
gets no transformer word pieces when it is whitespace (``"\\n\\n"``, runs of
spaces). ``spacy_w2ner.reduce_max.v1`` is the same max pooling (the paper's way
of turning word pieces into word vectors) that gives such tokens a zero vector.
"""
from typing import Callable, Tuple, cast

from thinc.api import Model, registry
from thinc.types import Floats2d, Ragged


@registry.layers("spacy_w2ner.reduce_max.v1")
def reduce_max_with_empty() -> Model[Ragged, Floats2d]:
    return Model("w2ner_reduce_max", _forward)


def _forward(model: Model, Xr: Ragged, is_train: bool) -> Tuple[Floats2d, Callable]:
    ops = model.ops
    lengths = ops.to_numpy(Xr.lengths)
    width = Xr.dataXd.shape[1] if Xr.dataXd.ndim == 2 else 0  # .data of an empty Ragged is (0, 0)
    nonempty = lengths > 0
    if nonempty.all():
        Y, which = ops.reduce_max(cast(Floats2d, Xr.data), Xr.lengths)
    else:
        Y = ops.alloc2f(len(lengths), width)
        which = None
        if nonempty.any():
            kept = ops.asarray1i(lengths[nonempty])
            Y_kept, which = ops.reduce_max(cast(Floats2d, Xr.data), kept)
            Y[ops.asarray1i(nonempty.nonzero()[0])] = Y_kept

    def backprop(dY: Floats2d) -> Ragged:
        if which is None:
            return Ragged(ops.alloc2f(*Xr.data.shape), Xr.lengths)
        if nonempty.all():
            return Ragged(ops.backprop_reduce_max(dY, which, Xr.lengths), Xr.lengths)
        d_kept = dY[ops.asarray1i(nonempty.nonzero()[0])]
        dX = ops.backprop_reduce_max(d_kept, which, ops.asarray1i(lengths[nonempty]))
        return Ragged(dX, Xr.lengths)

    return Y, backprop
