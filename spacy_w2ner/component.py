"""The ``w2ner`` pipeline component: a TrainablePipe over the W2NER grid model."""
import warnings
from itertools import islice
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np
import srsly
from spacy import util
from spacy.language import Language
from spacy.pipeline import TrainablePipe
from spacy.tokens import Doc, Span
from spacy.training import Example, validate_examples
from spacy.vocab import Vocab
from thinc.api import Config, Model, Optimizer, set_dropout_rate
from thinc.types import Floats4d

from .entities import (
    TokenIndices,
    aligned_gold_entities,
    flat_entities,
    get_entities,
    set_entities,
)
from .grid import decode_grid, encode_grid, n_relations
from .model import GridBatch, load_model_bytes, relations_and_confidences
from .scorer import score_entities
from .segments import Segment

Prediction = Tuple[str, TokenIndices, float]

DEFAULT_MODEL_CONFIG = """
[model]
@architectures = "spacy_w2ner.W2NER.v1"
lstm_size = 512
dist_emb_size = 20
region_emb_size = 20
conv_size = 96
dilations = [1, 2, 3]
biaffine_size = 512
ffnn_size = 288
input_dropout = 0.5
conv_dropout = 0.5
output_dropout = 0.33
max_window = 256
window_overlap = 64
max_grid_cells = 32768
mixed_precision = false

[model.tok2vec]
@architectures = "spacy.Tok2Vec.v2"

[model.tok2vec.embed]
@architectures = "spacy.MultiHashEmbed.v2"
width = 96
attrs = ["NORM", "PREFIX", "SUFFIX", "SHAPE"]
rows = [5000, 1000, 2500, 2500]
include_static_vectors = false

[model.tok2vec.encode]
@architectures = "spacy.MaxoutWindowEncoder.v2"
width = 96
depth = 4
window_size = 1
maxout_pieces = 3
"""
DEFAULT_MODEL = Config().from_str(DEFAULT_MODEL_CONFIG)["model"]


@Language.factory(
    "w2ner",
    assigns=["doc.spans", "doc.ents"],
    default_config={
        "model": DEFAULT_MODEL,
        "spans_key": "w2ner",
        "max_paths_per_edge": 64,
        "set_ents": False,
        "learn_rate_scale": 1.0,
        "threshold": 0.0,
        "scorer": {"@scorers": "spacy_w2ner.entity_scorer.v1"},
    },
    default_score_weights={
        "w2ner_f": 1.0,
        "w2ner_p": 0.0,
        "w2ner_r": 0.0,
        "w2ner_discontinuous_f": 0.0,
        "w2ner_overlapping_f": 0.0,
        "w2ner_per_type": None,
    },
)
def make_w2ner(
    nlp: Language,
    name: str,
    model: Model,
    spans_key: str,
    max_paths_per_edge: int,
    set_ents: bool,
    learn_rate_scale: float,
    threshold: float,
    scorer: Optional[Callable],
) -> "W2NER":
    """Flat, nested and discontinuous entities with W2NER, in ``doc.spans[spans_key]``.

    max_paths_per_edge: cap on entities read per THW (tail-to-head) grid cell.
    set_ents: also write the contiguous, non-overlapping entities to ``doc.ents``.
    learn_rate_scale: the grid network (everything after tok2vec) learns at the
        optimizer's rate times this. W2NER trains its head much faster than a
        pretrained encoder (the paper: 1e-3 vs 1e-5..5e-5); with a transformer,
        set the optimizer's rate for the encoder and scale the head up.
    threshold: entities scoring below it are not written (0.0 keeps every entity).
    """
    return W2NER(
        nlp.vocab,
        model,
        name,
        spans_key=spans_key,
        max_paths_per_edge=max_paths_per_edge,
        set_ents=set_ents,
        learn_rate_scale=learn_rate_scale,
        threshold=threshold,
        scorer=scorer,
    )


class W2NER(TrainablePipe):
    """Unified NER: every word pair of a sentence gets a relation (NONE, NNW, THW-label)."""

    def __init__(
        self,
        vocab: Vocab,
        model: Model,
        name: str = "w2ner",
        *,
        spans_key: str = "w2ner",
        max_paths_per_edge: int = 64,
        set_ents: bool = False,
        learn_rate_scale: float = 1.0,
        threshold: float = 0.0,
        scorer: Optional[Callable] = score_entities,
    ) -> None:
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"threshold must be between 0 and 1, got {threshold}")
        if learn_rate_scale <= 0:
            raise ValueError(f"learn_rate_scale must be positive, got {learn_rate_scale}")
        if max_paths_per_edge < 1:
            raise ValueError(f"max_paths_per_edge must be at least 1, got {max_paths_per_edge}")
        self.vocab = vocab
        self.model = model
        self.name = name
        self.spans_key = spans_key
        self.max_paths_per_edge = max_paths_per_edge
        self.set_ents = set_ents
        self.learn_rate_scale = learn_rate_scale
        self.threshold = threshold
        self.scorer = scorer
        self.cfg: Dict[str, list] = {"labels": []}

    # Labels -------------------------------------------------------------------

    @property
    def labels(self) -> Tuple[str, ...]:
        return tuple(self.cfg["labels"])

    @property
    def label_data(self) -> List[str]:
        return list(self.labels)

    def add_label(self, label: str) -> int:
        if not isinstance(label, str) or not label:
            raise ValueError(f"w2ner labels must be non-empty strings, got {label!r}")
        if label in self.labels:
            return 0
        if self._grid_scorer.layers:
            raise ValueError(
                f"Cannot add label '{label}' to '{self.name}': the model is already "
                "initialized with labels " + ", ".join(self.labels)
            )
        self.cfg["labels"].append(label)
        self.vocab.strings.add(label)
        return 1

    @property
    def _grid_scorer(self) -> Model:
        return self.model.get_ref("grid_scorer")

    # Initialization -----------------------------------------------------------

    def initialize(
        self,
        get_examples: Callable[[], Iterable[Example]],
        *,
        nlp: Optional[Language] = None,
        labels: Optional[Sequence[str]] = None,
    ) -> None:
        """Set the labels (given, or read from the examples) and build the model."""
        if not callable(get_examples):
            raise TypeError(f"'{self.name}'.initialize needs a callable get_examples")
        examples = list(get_examples())
        if labels is not None:
            for label in labels:
                self.add_label(label)
        else:
            for example in examples:
                for entity in get_entities(example.reference, self.spans_key):
                    self.add_label(entity.label)
        if not self.labels:
            raise ValueError(
                f"Cannot initialize '{self.name}': it has no labels. Provide training "
                f"examples with entities in doc.spans['{self.spans_key}'], or the labels "
                f"([initialize.components.{self.name}.labels], e.g. from `spacy init labels`)."
            )
        validate_examples(examples, f"{type(self).__name__}.initialize")
        self._grid_scorer.set_dim("nO", n_relations(len(self.labels)), force=True)
        sample = [example.predicted for example in islice(examples, 10)]
        self.model.initialize(X=sample or None)

    # Prediction ---------------------------------------------------------------

    def predict(self, docs: Iterable[Doc]) -> List[List[Prediction]]:
        docs = list(docs)
        if not any(len(doc) for doc in docs):
            return [[] for _ in docs]
        return self.decode(docs, self.model.predict(docs))

    def decode(self, docs: Sequence[Doc], outputs: List[GridBatch]) -> List[List[Prediction]]:
        """Read entities off the grids; keep each from the window that owns its head."""
        found: List[Dict[Tuple[str, TokenIndices], float]] = [{} for _ in docs]
        truncated = 0
        for batch in outputs:
            if batch.relations is None:
                relations, confidences = relations_and_confidences(self.model.ops, batch.logits)
            else:
                relations, confidences = batch.relations, batch.confidences
            for k, segment in enumerate(batch.segments):
                n = segment.length
                result = decode_grid(
                    relations[k, :n, :n],
                    confidences[k, :n, :n],
                    max_paths_per_edge=self.max_paths_per_edge,
                )
                truncated += result.truncated_edges
                self._collect(found[segment.doc_index], segment, result.entities)
        if truncated:
            warnings.warn(
                f"[{self.name}] {truncated} tail-head grid cells were not fully read: they had "
                f"more than max_paths_per_edge={self.max_paths_per_edge} entity paths, or their "
                "sentence more than 16 paths per word. Only the first paths were kept; "
                "a grid like this comes from an undertrained model."
            )
        return [[(label, tokens, score) for (label, tokens), score in doc_found.items()] for doc_found in found]

    def _collect(self, doc_found: Dict, segment: Segment, entities) -> None:
        for entity in entities:
            if not segment.owns(segment.start + entity.tokens[0]):
                continue
            key = (self.labels[entity.label_id], tuple(segment.start + i for i in entity.tokens))
            doc_found[key] = max(entity.score, doc_found.get(key, 0.0))

    def set_annotations(self, docs: Iterable[Doc], predictions: List[List[Prediction]]) -> None:
        for doc, entities in zip(docs, predictions):
            if self.threshold > 0.0:
                entities = [entity for entity in entities if entity[2] >= self.threshold]
            set_entities(doc, entities, self.spans_key)
            if self.set_ents:
                chosen = flat_entities(get_entities(doc, self.spans_key))
                spans = [Span(doc, e.tokens[0], e.tokens[-1] + 1, label=e.label) for e in chosen]
                doc.set_ents(spans, default="outside")

    # Training -----------------------------------------------------------------

    def update(
        self,
        examples: Iterable[Example],
        *,
        drop: float = 0.0,
        sgd: Optional[Optimizer] = None,
        losses: Optional[Dict[str, float]] = None,
    ) -> Dict[str, float]:
        if losses is None:
            losses = {}
        losses.setdefault(self.name, 0.0)
        examples = list(examples)
        validate_examples(examples, f"{type(self).__name__}.update")
        docs = [example.predicted for example in examples]
        if not any(len(doc) for doc in docs):
            return losses
        set_dropout_rate(self.model, drop)
        outputs, backprop = self.model.begin_update(docs)
        loss, gradients = self.get_loss(examples, outputs)
        backprop(gradients)
        if sgd is not None:
            self.finish_update(sgd)
        losses[self.name] += loss
        return losses

    def get_loss(
        self, examples: Sequence[Example], outputs: List[GridBatch]
    ) -> Tuple[float, List[Floats4d]]:
        """Cross-entropy over the valid grid cells, averaged over all of them."""
        gold = self._gold_entities(examples)
        self._warn_unlearnable(examples, gold, [s for b in outputs for s in b.segments])
        n_cells = sum(s.length * s.length for batch in outputs for s in batch.segments)
        ops = self.model.ops
        loss = 0.0
        gradients = []
        for batch in outputs:
            targets, weights = self._gold_grids(batch, gold)
            targets = ops.asarray(targets, dtype="int64")
            weights = ops.asarray(weights, dtype="float32")
            probs = ops.softmax(batch.logits, axis=-1)
            picked = ops.xp.take_along_axis(probs, targets[..., None], axis=-1)[..., 0]
            loss += float((-ops.xp.log(picked + 1e-12) * weights).sum())
            one_hot = ops.xp.eye(probs.shape[-1], dtype=probs.dtype)[targets]
            gradients.append((probs - one_hot) * (weights[..., None] / max(n_cells, 1)))
        return loss / max(n_cells, 1), gradients

    def _gold_entities(self, examples: Sequence[Example]) -> List[List[Tuple[int, TokenIndices]]]:
        label_ids = {label: i for i, label in enumerate(self.labels)}
        gold = []
        misaligned = 0
        for i, example in enumerate(examples):
            entities, unaligned = aligned_gold_entities(example, self.spans_key)
            misaligned += len(unaligned)
            for label, _ in entities:
                if label not in label_ids:
                    raise ValueError(
                        f"[{self.name}] Gold entity label '{label}' in doc {i} of the batch "
                        f"({example.reference.text[:60]!r}) is not one of the component's "
                        f"labels {list(self.labels)}. Initialize with all labels."
                    )
            gold.append([(label_ids[label], tokens) for label, tokens in entities])
        if misaligned:
            warnings.warn(
                f"[{self.name}] {misaligned} gold entities could not be aligned to the "
                "predicted tokenization and were left out of the loss"
            )
        return gold

    def _gold_grids(self, batch: GridBatch, gold) -> Tuple[np.ndarray, np.ndarray]:
        """Target relation ids and loss weights (1 on valid cells) for a batch."""
        longest = batch.logits.shape[1]
        targets = np.zeros((len(batch.segments), longest, longest), dtype="int64")
        weights = np.zeros((len(batch.segments), longest, longest), dtype="float32")
        for k, segment in enumerate(batch.segments):
            inside, partial = _split_by_segment(gold[segment.doc_index], segment)
            n = segment.length
            targets[k, :n, :n], _ = encode_grid(inside, n)
            weights[k, :n, :n] = 1.0
            for tokens in partial:
                # Links of an entity cut by the window edge are neither taught
                # as present nor as absent.
                kept = [t - segment.start for t in tokens if segment.start <= t < segment.end]
                weights[k, kept[:-1], kept[1:]] = 0.0
        return targets, weights

    def _warn_unlearnable(self, examples, gold, segments: Sequence[Segment]) -> None:
        by_doc: Dict[int, List[Segment]] = {}
        for segment in segments:
            by_doc.setdefault(segment.doc_index, []).append(segment)
        unlearnable = 0
        for i, entities in enumerate(gold):
            for _, tokens in entities:
                if not any(s.start <= tokens[0] and tokens[-1] < s.end for s in by_doc.get(i, [])):
                    unlearnable += 1
        if unlearnable:
            warnings.warn(
                f"[{self.name}] {unlearnable} gold entities cross a sentence boundary or "
                "are longer than max_window, so no grid holds them whole; they cannot be "
                "learned. Check the sentence boundaries, or raise max_window."
            )

    def finish_update(self, sgd: Optimizer) -> None:
        """Apply the gradients: tok2vec at the optimizer's rate, the grid network scaled."""
        # The w2ner root node holds no parameters of its own.
        self.model.get_ref("tok2vec").finish_update(sgd)
        self._grid_scorer.finish_update(_ScaledOptimizer(sgd, self.learn_rate_scale))

    # Scoring and serialization --------------------------------------------------

    def score(self, examples: Iterable[Example], **kwargs) -> Dict[str, object]:
        validate_examples(examples, f"{type(self).__name__}.score")
        if self.scorer is None:
            return {}
        kwargs.setdefault("spans_key", self.spans_key)
        return self.scorer(examples, **kwargs)

    def to_bytes(self, *, exclude=tuple()) -> bytes:
        self._validate_serialization_attrs()
        serialize = {
            "cfg": lambda: srsly.json_dumps(self.cfg),
            "model": self.model.to_bytes,
        }
        return util.to_bytes(serialize, exclude)

    def from_bytes(self, bytes_data: bytes, *, exclude=tuple()) -> "W2NER":
        self._validate_serialization_attrs()
        deserialize = {
            "cfg": lambda b: self.cfg.update(srsly.json_loads(b)),
            "model": lambda b: load_model_bytes(self.model, b),
        }
        util.from_bytes(bytes_data, deserialize, exclude)
        return self

    def to_disk(self, path, *, exclude=tuple()) -> None:
        path = util.ensure_path(path)
        serialize = {
            "cfg": lambda p: srsly.write_json(p, self.cfg),
            "model": lambda p: Path(p).write_bytes(self.model.to_bytes()),
        }
        util.to_disk(path, serialize, exclude)

    def from_disk(self, path, *, exclude=tuple()) -> "W2NER":
        path = util.ensure_path(path)
        deserialize = {
            "cfg": lambda p: self.cfg.update(srsly.read_json(p)),
            "model": lambda p: load_model_bytes(self.model, Path(p).read_bytes()),
        }
        util.from_disk(path, deserialize, exclude)
        return self


class _ScaledOptimizer:
    """An optimizer view whose learning rate is the wrapped one's times ``scale``."""

    def __init__(self, optimizer: Optimizer, scale: float) -> None:
        self._optimizer = optimizer
        self._scale = scale

    def __call__(self, key, weights, gradient, *, lr_scale: float = 1.0):
        return self._optimizer(key, weights, gradient, lr_scale=lr_scale * self._scale)

    def __getattr__(self, name):
        return getattr(self._optimizer, name)


def _split_by_segment(entities, segment: Segment):
    """Entities wholly inside the segment (relative indices), and those it cuts."""
    inside, partial = [], []
    for label_id, tokens in entities:
        if segment.start <= tokens[0] and tokens[-1] < segment.end:
            inside.append((label_id, [t - segment.start for t in tokens]))
        elif tokens[0] < segment.end and tokens[-1] >= segment.start:
            partial.append(tokens)
    return inside, partial
