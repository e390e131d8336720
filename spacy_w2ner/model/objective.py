"""The w2ner component's training objective for one step's examples (``TrainingObjective``).

The gold entities, as label ids, and the regions the training grids cover (the gold sentences,
joined where an entity crosses them: ``grid.targets.training_regions``); the loss's denominator,
the real cells of the step's grids (``denominator``; in data-parallel training the whole
batch's, each process given it); each grid batch's cross-entropy and triplet loss with their
gradient (``loss.py``), summed over the step. What it meets that the component warns about once
(``diagnostics.CAUSES``) is counted in ``counts``.
"""
from collections import Counter
from dataclasses import dataclass, field
from typing import List, Sequence

from spacy.tokens import Doc
from spacy.training import Example
from thinc.api import Model
from thinc.types import Floats4d

from ..grid.codec import thw_conflicts
from ..grid.segments import IndexedEntities, Region, Segment, segment_docs
from ..grid.targets import count_unlearnable, gold_entities, gold_grids, training_regions
from .loss import grid_cross_entropy, grid_triplet_loss
from .types import CellWeights


@dataclass
class TrainingObjective:
    model: Model
    gold: List[IndexedEntities]
    regions: List[List[Region]]
    counts: Counter = field(default_factory=Counter)
    cross_entropy: float = 0.0  # the grid batches' summed cross-entropy so far
    triplet: float = 0.0  # their triplet losses so far (each already divided by the step's cells)

    @classmethod
    def of(cls, model: Model, examples: Sequence[Example], labels: Sequence[str], spans_key: str, regions: bool = True) -> "TrainingObjective":
        """The examples' aligned gold entities (label ids; ValueError naming a doc whose label is
        not one of ``labels``) and, with ``regions``, the regions their training grids cover."""
        found_gold, misaligned = gold_entities(examples, labels, spans_key)
        gold = [IndexedEntities(entities, model.attrs["max_window"]) for entities in found_gold]  # once a step, for every grid batch
        found = [training_regions(example, entities) for example, entities in zip(examples, gold)] if regions else []
        counts = Counter(
            misaligned=misaligned,
            joined_sentences=sum(joined for _, joined in found),
            thw_conflict=sum(thw_conflicts(entities) for entities in gold),  # once a doc, not once a window that holds them
        )
        return cls(model, gold, [regions for regions, _ in found], counts)

    def denominator(self, docs: Sequence[Doc]) -> int:
        """The grid cells of the docs' training segments: what ``update`` averages over."""
        attrs = self.model.attrs
        return grid_cells(segment_docs(docs, attrs["max_window"], attrs["window_overlap"], self.regions))

    def count_unlearnable(self, segments: Sequence[Segment]) -> None:
        self.counts["unlearnable"] += count_unlearnable(self.gold, segments)

    def batch_gradient(self, segments: Sequence[Segment], logits: Floats4d, n_cells: int) -> Floats4d:
        """A grid batch's loss added to the step's, and its gradient with respect to the logits
        (the cross-entropy's and, where the config turns it on, the triplet loss's), divided by
        the step's ``n_cells``."""
        attrs = self.model.attrs
        gap_link = attrs.get("cell_weights", CellWeights()).gap_link
        targets, weights = gold_grids(segments, logits.shape[1], self.gold, gap_link)
        loss, gradient = grid_cross_entropy(self.model.ops, logits, targets, weights, n_cells)
        triplet, triplet_gradient = grid_triplet_loss(logits, segments, self.gold, attrs.get("triplet"), n_cells)
        if triplet_gradient is not None:
            gradient += triplet_gradient
        self.cross_entropy += loss
        self.triplet += triplet
        return gradient

    def loss(self, n_cells: int) -> float:
        """The step's loss: the mean cross-entropy over its ``n_cells``, plus the triplet loss."""
        return self.cross_entropy / n_cells + self.triplet


def grid_cells(segments: Sequence[Segment]) -> int:
    """The grid cells of the segments (at least 1: the loss's denominator)."""
    return max(sum(segment.length * segment.length for segment in segments), 1)
