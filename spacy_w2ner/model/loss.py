"""The training loss of a grid batch: the cross-entropy of its logits against its target
relations, and, where the model's config turns it on, a grid-level triplet loss on its cells.

Each is a function of one grid batch and the step's normaliser (``n_cells``, the real cells of
every batch of the step), so a step can score, take the loss of and back-propagate one grid
batch after another.
"""
from typing import Optional, Sequence, Tuple

import torch
from thinc.api import torch2xp, xp2torch
from thinc.types import Floats3d, Floats4d, Ints3d

from ..entities import Entity
from ..grid.segments import Segment
from ..grid.triplets import batch_triplets
from ..nn.triplet import mean_violated, triplet_hinges
from .types import TripletSettings


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


def grid_triplet_loss(
    logits: Floats4d, segments: Sequence[Segment], gold: Sequence[Sequence[Entity]],
    settings: Optional[TripletSettings], n_cells: int,
) -> Tuple[float, Optional[Floats4d]]:  # fmt: skip
    """The batch's triplet loss and its gradient with respect to the logits; (0.0, None) when
    ``settings`` is off or the batch has no triplet.

    The cells' representations are their logits, as in TriG-NER's released settings
    (``triplet_source = "output"``), so the network and prediction are unchanged. The loss is
    ``weight`` x the mean hinge of the batch's violated triplets (``nn.triplet``) x the batch's
    share of the step's cells: with one grid batch a step, TriG-NER's cross-entropy + weight x
    triplet loss. ``gold[doc_index]``: the doc's gold entities (label ids, doc token indices).
    """
    if settings is None or not settings.is_on:
        return 0.0, None
    triplets = batch_triplets(segments, gold, settings.window)
    if not triplets.segments:
        return 0.0, None
    scores = xp2torch(logits, requires_grad=True)
    device = scores.device

    def on_device(array) -> torch.Tensor:
        return torch.as_tensor(array, device=device)

    hinges = [
        triplet_hinges(scores[t.segment][on_device(t.rows), on_device(t.columns)], on_device(t.anchors),
                       on_device(t.positive), on_device(t.negative), settings.margin, settings.mining)  # fmt: skip
        for t in triplets.segments
    ]
    loss = mean_violated(torch.cat(hinges)) * (settings.weight * triplets.cells / n_cells)
    loss.backward()
    return loss.item(), torch2xp(scores.grad)
