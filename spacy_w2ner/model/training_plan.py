"""What training will grid, said at initialization, before it happens (issue 48).

A training step's grid memory follows its largest grid batch (``GridTrainingStep``): at most
``max_grid_cells`` cells, or one segment's cells where a segment is larger (a sentence of 300
words, or a 256-token window of a document without sentence boundaries). ``TrainingPlan`` is
read from the training examples while the component initializes (one pass, nothing kept):
how many segments, the longest, how many documents were windowed for want of sentences, how
many sentence boundaries gold entities removed; ``bytes_per_cell`` measures the grid network's
saved activations per cell once (``nn.network.saved_bytes_per_cell``). ``check`` turns a plan
that cannot fit the memory there is into one line naming the setting to change, instead of an
out-of-memory kill minutes later.
"""
from dataclasses import dataclass
from typing import Optional

from spacy.training import Example
from spacy.util import logger
from thinc.api import Model

from ..entities import aligned_gold_entities
from ..grid.segments import segment_doc
from ..grid.targets import training_regions
from ..memory.available import available_memory_bytes
from .grid_scorer import grid_bytes_per_cell, grid_device

GIB = 1024**3
# A backward pass holds its gradients beside the saved activations: the peak measured on the
# CPU was 1.39-1.45 times the saved bytes (MiniLM and MPNet heads, grids of 64-256 words;
# bench/train_memory.py).
BACKWARD_FACTOR = 1.45


@dataclass
class TrainingPlan:
    """The training grids of a corpus, counted one example at a time (``add``)."""

    max_window: int
    window_overlap: int
    max_grid_cells: int
    documents: int = 0
    tokens: int = 0
    segments: int = 0
    longest_segment: int = 0
    longest_document: int = 0
    windowed_documents: int = 0  # longer than max_window with no sentence boundaries
    joined_boundaries: int = 0  # sentence boundaries removed because a gold entity crossed them
    bytes_per_cell: Optional[float] = None

    @classmethod
    def of(cls, model: Model) -> "TrainingPlan":
        """An empty plan for the model's windows and grid batches."""
        return cls(**{key: model.attrs[key] for key in ("max_window", "window_overlap", "max_grid_cells")})

    def said(self, model: Model, name: str) -> "TrainingPlan":
        """The plan with the built model's bytes per cell, logged (spaCy's logger, INFO; ``python -m
        spacy_w2ner train`` prints it); ValueError (one line, the setting to change) when its
        largest grid batch cannot fit the memory there is."""
        self.bytes_per_cell = grid_bytes_per_cell(model)
        logger.info(self.describe(name))
        self.check(name, available_memory_bytes(grid_device(model)))
        return self

    def add(self, example: Example, spans_key: str) -> None:
        doc = example.predicted
        entities, _ = aligned_gold_entities(example, spans_key)
        regions, joined = training_regions(example, entities)
        segments = segment_doc(doc, 0, self.max_window, self.window_overlap, regions)
        self.documents += 1
        self.tokens += len(doc)
        self.segments += len(segments)
        self.longest_segment = max([self.longest_segment] + [s.length for s in segments])
        self.longest_document = max(self.longest_document, len(doc))
        self.windowed_documents += len(regions) == 1 and len(doc) > self.max_window
        self.joined_boundaries += joined

    @property
    def largest_batch_cells(self) -> int:
        """The most cells a grid batch can hold: ``max_grid_cells``, or the longest segment's."""
        return max(min(self.max_grid_cells, self.segments * self.longest_segment**2), self.longest_segment**2)

    @property
    def step_bytes(self) -> Optional[float]:
        """The grid network's memory for the largest grid batch's forward and backward passes."""
        if self.bytes_per_cell is None:
            return None
        return self.largest_batch_cells * self.bytes_per_cell * BACKWARD_FACTOR

    def describe(self, name: str) -> str:
        """One line for the training log."""
        memory = "" if self.step_bytes is None else f", about {_size(self.step_bytes)} for their forward and backward passes"
        windowed = (
            f"; {self.windowed_documents} documents over {self.max_window} tokens without sentence "
            "boundaries are trained in windows (set sentence boundaries: convert's sentencizer)"
            if self.windowed_documents else ""
        )
        joined = f"; {self.joined_boundaries} sentence boundaries inside gold entities removed" if self.joined_boundaries else ""
        return (
            f"{name}: {self.documents} training documents ({self.tokens} tokens, the longest {self.longest_document}) "
            f"in {self.segments} grids, the longest {self.longest_segment} tokens; grid batches up to "
            f"{self.largest_batch_cells:,} cells{memory}{windowed}{joined}"
        )

    def check(self, name: str, available_bytes: Optional[float]) -> None:
        """ValueError in one line when the largest grid batch needs more memory than there is."""
        need = self.step_bytes
        if need is None or available_bytes is None or need <= available_bytes:
            return
        if self.longest_segment**2 >= self.max_grid_cells:
            setting = (
                f"[components.{name}.model.max_window] ({self.max_window}: the grid side of a long sentence or "
                "a window), or give the documents sentence boundaries"
            )
        else:
            setting = f"[components.{name}.model.max_grid_cells] ({self.max_grid_cells:,})"
        raise ValueError(
            f"{name}: training grid batches of up to {self.largest_batch_cells:,} cells need about "
            f"{_size(need)} for the grid network's forward and backward passes, more than the "
            f"{_size(available_bytes)} available: lower {setting}"
        )


def _size(n_bytes: float) -> str:
    return f"{n_bytes / GIB:.1f} GB" if n_bytes >= GIB / 10 else f"{n_bytes / 2**20:.0f} MB"
