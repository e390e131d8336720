"""The training loss: cross-entropy of a batch's grid logits against its target relations."""
from typing import Tuple

from thinc.types import Floats3d, Floats4d, Ints3d


def grid_cross_entropy(ops, logits: Floats4d, targets: Ints3d, weights: Floats3d, n_cells: int) -> Tuple[float, Floats4d]:
    """The weighted cells' summed cross-entropy (weight 0: padding, or a link a window cut), and
    its gradient with respect to the logits divided by ``n_cells`` (the caller divides the loss
    summed over all batches by ``n_cells`` once)."""
    targets = ops.asarray(targets, dtype="int64")
    weights = ops.asarray(weights, dtype="float32")
    probs = ops.softmax(logits, axis=-1)
    picked = ops.xp.take_along_axis(probs, targets[..., None], axis=-1)[..., 0]
    loss = float((-ops.xp.log(picked + 1e-12) * weights).sum())
    one_hot = ops.xp.eye(probs.shape[-1], dtype=probs.dtype)[targets]
    return loss, (probs - one_hot) * (weights[..., None] / n_cells)
