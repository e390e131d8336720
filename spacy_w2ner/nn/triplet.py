"""Triplet hinges over a grid's cell representations (torch): the grid-level triplet loss of
TriG-NER (Cabral et al., WWW 2025), written for this package.

Given a grid's cell representations (cells, width) and, for each anchor cell, which cells are
its positives and its negatives (``grid.triplets``), a mining scheme makes triplets (anchor,
positive, negative); each gives the hinge max(0, margin + d(anchor, positive) - d(anchor,
negative)), d the Euclidean distance. The schemes (TriG-NER's names in brackets):

* ``centroid`` (grid_centroid, its choice on CADEC and ShARe): one triplet per anchor, with
  the mean of its positives and the mean of its negatives;
* ``negative_centroid`` (grid_negcentroid): one per (anchor, positive), with the mean of the
  anchor's negatives;
* ``hard_negative`` (grid_hardneg): one per (anchor, positive), with the anchor's nearest
  negative.

``mean_violated`` averages the hinges over the triplets that violate the margin, as TriG-NER
does (it drops the others before its mean), so the loss does not fade as most triplets come
to be satisfied.
"""
import torch
from torch.nn import functional as F

MINING = ("centroid", "negative_centroid", "hard_negative")

# Inside the square root: the distance of a cell to itself (an anchor that is its own
# positive) has a zero gradient, not NaN.
EPS = 1e-12


def distance(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Euclidean distance along the last dimension, smooth at zero."""
    return torch.sqrt(((a - b) ** 2).sum(dim=-1) + EPS)


def triplet_hinges(
    cells: torch.Tensor, anchors: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor, margin: float, mining: str
) -> torch.Tensor:
    """The hinge of each triplet ``mining`` makes: ``cells`` (cells, width) representations,
    ``anchors`` (anchors,) indices into them, ``positive`` and ``negative`` (anchors, cells) bool,
    each row with at least one cell set."""
    if mining not in MINING:
        raise ValueError(f"triplet mining must be one of {', '.join(MINING)}, got {mining!r}")
    anchor = cells[anchors]
    if mining == "hard_negative":
        to_negative = distance(anchor, cells[nearest(anchor, cells, negative)])
    else:
        to_negative = distance(anchor, centroids(cells, negative))
    if mining == "centroid":
        return F.relu(margin + distance(anchor, centroids(cells, positive)) - to_negative)
    which_anchor, which_cell = positive.nonzero(as_tuple=True)
    return F.relu(margin + distance(anchor[which_anchor], cells[which_cell]) - to_negative[which_anchor])


def nearest(anchor: torch.Tensor, cells: torch.Tensor, chosen: torch.Tensor) -> torch.Tensor:
    """(anchors,): the index of each anchor's nearest cell among those its row of ``chosen``
    sets. Found without gradients from (anchors, cells) distances, never the (anchors, cells,
    width) differences (a 256-word window: 5 s and 1.7 GB more per grid batch): the caller
    takes the distance to it again, so that the gradient is min's, the nearest cell's alone."""
    with torch.no_grad():
        dtype = torch.promote_types(cells.dtype, torch.float32)  # cdist has no bfloat16
        to_every_cell = torch.cdist(anchor.to(dtype), cells.to(dtype))
        return to_every_cell.masked_fill(~chosen, float("inf")).argmin(dim=1)


def centroids(cells: torch.Tensor, chosen: torch.Tensor) -> torch.Tensor:
    """(rows, width): the mean of the cells each row of ``chosen`` (rows, cells) sets."""
    weights = chosen.to(cells.dtype)
    return (weights @ cells) / weights.sum(dim=1, keepdim=True)


def mean_violated(hinges: torch.Tensor) -> torch.Tensor:
    """The hinges' sum over the number of triplets that violate the margin (at least 1)."""
    return hinges.sum() / (hinges > 0).sum().clamp(min=1).to(hinges.dtype)
