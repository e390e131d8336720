"""The ``w2ner`` pipeline component: a thin TrainablePipe over the W2NER grid model.

Wiring only: the model (``model/``) maps docs to grid scores per segment, the
segments' grids are decoded and merged per doc (``grid.segments.decode_segments``),
entities are written with the ``doc.spans`` contract (``entities.py``); in
training, gold entities become grid targets and the loss a mean over the step's grid cells
(``model.objective``), and what training will grid is said at initialization
(``model.training_plan``).
"""
import contextlib
import warnings
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import srsly
from spacy import util
from spacy.language import Language
from spacy.pipeline import TrainablePipe
from spacy.tokens import Doc
from spacy.training import Example, validate_examples, validate_get_examples
from spacy.vocab import Vocab
from thinc.api import Config, Model, NumpyOps, Optimizer, set_dropout_rate
from thinc.types import Floats4d

from .diagnostics import OnceWarnings
from .entities import Entity, check_threshold, get_entities, scoring_at_least, set_entities, set_flat_ents, without_edge_whitespace
from .grid.codec import n_relations
from .grid.segments import SegmentGrid, decode_segments
from .memory.batches import ReleasingPipe
from .memory.heap import ReleaseEvery, map_large_blocks
from .model.architecture import GridTrainingStep
from .model.grid_scorer import build_for_loading, drop_grid_network, grid_scorer_dims
from .model.objective import TrainingObjective, grid_cells
from .model.predictions import segment_grids
from .model.training_plan import TrainingPlan
from .model.types import GridBatch, LinkThresholds
from .nn.adam import ScaledOptimizer
from .scorer import score_entities, unweighted_scores

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
max_grid_padding = null
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
width = ${model.tok2vec.embed.width}
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
        "nnw_threshold": None,
        "thw_threshold": None,
        "best_path_only": False,
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
    nnw_threshold: Optional[float] = None,
    thw_threshold: Optional[float] = None,
    best_path_only: bool = False,
) -> "W2NER":
    """Flat, nested and discontinuous entities with W2NER, in ``doc.spans[spans_key]``.

    max_paths_per_edge: cap on entities read per THW (tail-to-head) grid cell.
    set_ents: also write the contiguous, non-overlapping entities to ``doc.ents``.
    learn_rate_scale: the grid network (everything after tok2vec) learns at the
        optimizer's rate times this. W2NER trains its head much faster than a
        pretrained encoder (the paper: 1e-3 vs 1e-5..5e-5); with a transformer,
        set the optimizer's rate for the encoder and scale the head up.
    threshold: entities scoring below it are not written (0.0 keeps every entity).
    nnw_threshold, thw_threshold: read a cell as NNW / THW when that link's probability is at least
        this (null: the arg-max relation; ``model.types.LinkThresholds``).
    best_path_only: one entity per THW cell, its best-scoring path (``grid.codec.decode_grid``).
    ``tune-decoding`` chooses these three on dev.
    """
    return W2NER(
        nlp.vocab, model, name, spans_key=spans_key, max_paths_per_edge=max_paths_per_edge, set_ents=set_ents,
        learn_rate_scale=learn_rate_scale, threshold=threshold, scorer=scorer, nnw_threshold=nnw_threshold,
        thw_threshold=thw_threshold, best_path_only=best_path_only,
    )


class W2NER(ReleasingPipe, TrainablePipe):
    """Unified NER: every word pair of a sentence gets a relation (NONE, NNW, THW-label).

    Its ``pipe`` predicts in batches bounded by words and gives the memory they freed back to the
    system; with ``overlap_batches`` on, it queues each batch's scoring before it decodes the
    batch before it (``memory.batches.ReleasingPipe``).
    """

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
        nnw_threshold: Optional[float] = None,
        thw_threshold: Optional[float] = None,
        best_path_only: bool = False,
    ) -> None:
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
        self.model.attrs["link_thresholds"] = LinkThresholds(nnw_threshold, thw_threshold)  # not saved with the model
        self.best_path_only = best_path_only
        self.scorer = scorer
        self.cfg: Dict[str, object] = {"labels": []}  # and, once initialized, the grid network's nI and nO
        self._warnings = OnceWarnings()
        self.training_plan: Optional[TrainingPlan] = None  # what initialize found training will grid

    @property
    def threshold(self) -> float:
        """Entities scoring below it are not written (0.0 keeps every entity)."""
        return self._threshold

    @threshold.setter
    def threshold(self, value: float) -> None:
        self._threshold = check_threshold(value)

    @property
    def link_thresholds(self) -> LinkThresholds:
        """The probabilities at which cells are read as NNW and THW links (``None``: the arg-max),
        where the model's forward reads them."""
        return self.model.attrs["link_thresholds"]

    @property
    def warning_counts(self):
        """Running totals of the causes in ``diagnostics.CAUSES`` (each warned about once)."""
        return self._warnings.counts

    # Labels -------------------------------------------------------------------

    @property
    def labels(self) -> Tuple[str, ...]:
        return tuple(self.cfg["labels"])

    label_data = property(lambda self: list(self.labels))

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

    def initialize(self, get_examples: Callable[[], Iterable[Example]], *, nlp: Optional[Language] = None,
                   labels: Optional[Sequence[str]] = None) -> None:  # fmt: skip
        """Set the labels (given, or read from the examples) and build the model.

        The examples are read as a stream, keeping nothing but their labels and the first
        ten as the model's sample (as spaCy's spancat does), so a large corpus is never held
        whole; spaCy then checks them (``validate_get_examples``, a second pass).
        """
        if not callable(get_examples):
            raise TypeError(f"'{self.name}'.initialize needs a callable get_examples")
        with _put_back_if_failing(self):  # initializing again starts over, new labels allowed
            if labels is not None:
                for label in labels:
                    self.add_label(label)
            plan = TrainingPlan.of(self.model)
            sample = _labels_and_sample(get_examples, self, read_labels=labels is None, plan=plan)
            if not self.labels:
                raise ValueError(
                    f"Cannot initialize '{self.name}': it has no labels. Provide training "
                    f"examples with entities in doc.spans['{self.spans_key}'], or the labels "
                    f"([initialize.components.{self.name}.labels], e.g. from `spacy init labels`)."
                )
            if sample:  # no examples (labels given): nothing to check, and spaCy would call that invalid
                validate_get_examples(get_examples, f"{type(self).__name__}.initialize")
            _warn_where_unweighted(nlp, self)
            self._grid_scorer.set_dim("nO", n_relations(len(self.labels)), force=True)
            self.model.initialize(X=[example.predicted for example in sample] or None)
        self.cfg.update(grid_scorer_dims(self.model))
        if plan.documents:  # kept, logged, and checked against the memory there is (``model.training_plan``)
            self.training_plan = plan.said(self.model, self.name)
        if isinstance(self.model.ops, NumpyOps):
            map_large_blocks()  # training on the CPU: a step's peak memory stays flat (memory.heap)

    # Prediction ---------------------------------------------------------------

    def predict(self, docs: Iterable[Doc]) -> List[List[Entity]]:
        """The entities of each doc (labels by name, with scores), none starting or ending on whitespace."""
        return self._start_predict(docs)()

    def _start_predict(self, docs: Iterable[Doc]) -> Callable[[], List[List[Entity]]]:
        """Queue the docs' scoring on the model's device (a GPU runs it behind the host), and
        return the call that waits for it and decodes ``predict``'s entities."""
        docs = list(docs)
        if not any(len(doc) for doc in docs):
            return lambda: [[] for _ in docs]
        max_window = self.model.attrs["max_window"]
        unsegmented = sum(len(doc) > max_window and not doc.has_annotation("SENT_START") for doc in docs)
        self._warnings.count(self.name, "no_sentences", unsegmented, max_window=max_window)
        batches = self.model.predict(docs)
        return lambda: self.entities_from_grids(docs, segment_grids(batches))

    def entities_from_grids(self, docs: Sequence[Doc], grids: Iterable[SegmentGrid]) -> List[List[Entity]]:
        """``predict``'s entities from the docs' segment grids (relation ids and confidences per
        cell): decoded, labelled by name, none starting or ending on whitespace."""
        found, truncated = decode_segments(grids, len(docs), self.max_paths_per_edge, self.best_path_only)
        self._warnings.count(self.name, "truncated", truncated)
        return [
            [entity.with_label(self.labels[entity.label]) for entity in without_edge_whitespace(entities, doc)]
            for doc, entities in zip(docs, found)
        ]

    def set_annotations(self, docs: Iterable[Doc], predictions: List[List[Entity]]) -> None:
        for doc, entities in zip(docs, predictions):
            set_entities(doc, scoring_at_least(entities, self.threshold), self.spans_key)
            if self.set_ents:
                set_flat_ents(doc, self.spans_key)

    # Training -----------------------------------------------------------------

    def update(self, examples: Iterable[Example], *, drop: float = 0.0, sgd: Optional[Optimizer] = None,
               losses: Optional[Dict[str, float]] = None, loss_denominator: Optional[int] = None) -> Dict[str, float]:  # fmt: skip
        """One training step, the grid network's forward and backward passes one grid batch at a
        time (``model.architecture.GridTrainingStep``): memory follows ``max_grid_cells``, not the
        documents' length. Grids follow the gold Doc's sentences, the loss is a mean over their
        cells (``model.objective``). ``loss_denominator``: what the loss is divided by when these
        examples are one process's share of a batch (data-parallel training gives each process
        the whole batch's ``loss_denominator(examples)``, so the processes' gradients add up to
        one process's)."""
        losses = {} if losses is None else losses
        losses.setdefault(self.name, 0.0)
        examples = list(examples)
        validate_examples(examples, f"{type(self).__name__}.update")
        docs = [example.predicted for example in examples]
        if not any(len(doc) for doc in docs):
            return losses
        set_dropout_rate(self.model, drop)
        objective = TrainingObjective.of(self.model, examples, self.labels, self.spans_key)
        step = GridTrainingStep(self.model, docs, objective.regions)
        objective.count_unlearnable(step.segments)
        n_cells = loss_denominator or grid_cells(step.segments)
        step.backprop_each(lambda batch: objective.batch_gradient(batch.segments, batch.logits, n_cells))
        del step  # the step's activations, freed: the heap goes back to the system (CPU)
        ReleaseEvery(self.model.ops, 0).add(1)
        self._warnings.count_all(self.name, objective.counts)
        if sgd is not None:
            self.finish_update(sgd)
        losses[self.name] += objective.loss(n_cells)
        return losses

    def get_loss(
        self, examples: Sequence[Example], outputs: List[GridBatch], loss_denominator: Optional[int] = None
    ) -> Tuple[float, List[Floats4d]]:
        """The loss of ``begin_update``'s outputs and its gradients, as ``update`` computes them a
        grid batch at a time (over all of the outputs' cells, or ``loss_denominator``)."""
        objective = TrainingObjective.of(self.model, examples, self.labels, self.spans_key, regions=False)
        segments = [segment for batch in outputs for segment in batch.segments]
        objective.count_unlearnable(segments)
        n_cells = loss_denominator or grid_cells(segments)
        gradients = [objective.batch_gradient(batch.segments, batch.logits, n_cells) for batch in outputs]
        self._warnings.count_all(self.name, objective.counts)
        return objective.loss(n_cells), gradients

    def loss_denominator(self, examples: Sequence[Example]) -> int:
        """The grid cells of these examples' training segments: what ``update`` averages over."""
        objective = TrainingObjective.of(self.model, examples, self.labels, self.spans_key)
        return objective.denominator([example.predicted for example in examples])

    def finish_update(self, sgd: Optimizer) -> None:
        """Apply the gradients: tok2vec at the optimizer's rate, the grid network scaled."""
        # The w2ner root node holds no parameters of its own.
        self.model.get_ref("tok2vec").finish_update(sgd)
        self._grid_scorer.finish_update(ScaledOptimizer(sgd, self.learn_rate_scale))

    # Scoring and serialization --------------------------------------------------

    def score(self, examples: Iterable[Example], **kwargs) -> Dict[str, object]:
        examples = list(examples)  # checked, then scored: a generator would be spent by the check
        validate_examples(examples, f"{type(self).__name__}.score")
        if self.scorer is None:
            return {}
        kwargs.setdefault("spans_key", self.spans_key)
        return self.scorer(examples, **kwargs)

    def from_bytes(self, bytes_data: bytes, *, exclude=tuple()) -> "W2NER":
        if "model" not in exclude:
            parts = srsly.msgpack_loads(bytes_data)
            self._initialize_before_deserializing(srsly.json_loads(parts["cfg"]), lambda: parts["model"])
        return super().from_bytes(bytes_data, exclude=exclude)

    def from_disk(self, path, *, exclude=tuple()) -> "W2NER":
        path = util.ensure_path(path)
        if "model" not in exclude:
            cfg = srsly.read_json(path / "cfg")
            self._initialize_before_deserializing(cfg, lambda: (path / "model").read_bytes())
        return super().from_disk(path, exclude=exclude)

    def _initialize_before_deserializing(self, cfg: dict, model_bytes: Callable[[], bytes]) -> None:
        """Build the torch module for the saved dims, so the inherited methods load its weights."""
        self.cfg.update(build_for_loading(self.model, cfg, model_bytes))


@contextlib.contextmanager
def _put_back_if_failing(pipe: W2NER):
    """Initializing again drops the trained grid network (so that new labels may come); where it
    fails before a new one is built, the labels and the network are put back: the pipe predicts as before."""
    grid_scorer = pipe._grid_scorer
    labels, layers = list(pipe.cfg["labels"]), list(grid_scorer.layers)
    n_relations_before = grid_scorer.get_dim("nO") if grid_scorer.has_dim("nO") is True else None
    drop_grid_network(grid_scorer)
    try:
        yield
    except BaseException:
        if layers and not grid_scorer.layers:
            pipe.cfg["labels"] = labels
            grid_scorer.layers.extend(layers)
            grid_scorer.set_dim("nO", n_relations_before, force=True)
        raise


def _warn_where_unweighted(nlp: Optional[Language], pipe: W2NER) -> None:
    """Warn where spacy train would weigh none of the component's scores (``scorer.unweighted_scores``)."""
    if nlp is None:
        return
    keys = [other.spans_key for _, other in w2ner_components(nlp)]
    problem = unweighted_scores(nlp.config["training"].get("score_weights", {}), pipe.spans_key, keys)
    if problem is not None:
        warnings.warn(f"'{pipe.name}': {problem}", stacklevel=3)


def w2ner_components(nlp: Language) -> List[Tuple[str, "W2NER"]]:
    """The pipeline's w2ner components (made by the ``w2ner`` factory), in pipeline order."""
    return [(name, pipe) for name, pipe in nlp.pipeline if nlp.get_pipe_meta(name).factory == "w2ner"]


def first_w2ner(nlp: Language) -> Tuple[str, "W2NER"]:
    """The pipeline's first w2ner component (name, component); ValueError naming the components if none."""
    found = w2ner_components(nlp)
    if not found:
        raise ValueError(f"the pipeline has no w2ner component (its components: {', '.join(nlp.pipe_names) or 'none'})")
    return found[0]


def _labels_and_sample(
    get_examples: Callable[[], Iterable[Example]], pipe: W2NER, read_labels: bool, plan: Optional[TrainingPlan] = None
) -> List[Example]:
    """One pass over the examples: their labels added to ``pipe`` in order of appearance (when
    ``read_labels``), their grids counted in ``plan``; the first ten examples returned as the
    model's sample, the others let go."""
    sample: List[Example] = []
    for example in get_examples():
        if plan is not None:
            plan.add(example, pipe.spans_key)
        if read_labels:
            for entity in get_entities(example.reference, pipe.spans_key):
                pipe.add_label(entity.label)
        if len(sample) < 10:
            sample.append(example)
    return sample
