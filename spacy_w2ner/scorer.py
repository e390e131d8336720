"""Exact-match entity scoring, as in the W2NER paper.

An entity counts as correct when its label and its exact set of token indices
match a gold entity. Keys (for spans_key "w2ner"):

* ``w2ner_p``, ``w2ner_r``, ``w2ner_f``: all entities;
* ``w2ner_per_type``: ``{label: {"p", "r", "f"}}``;
* ``w2ner_discontinuous_f``: only entities with a gap, gold and predicted;
* ``w2ner_overlapping_f``: only entities sharing a token with another entity of
  the same doc (gold with gold, predicted with predicted);
* ``spans_w2ner_p/r/f/per_type``: the same figures under spaCy's span-key names,
  so ``spacy evaluate --spans-key w2ner`` shows them in its table.

Figures are 0.0 when there is no such entity, gold or predicted. Gold entities
that cannot be aligned to the predicted tokenization count as missed, in the
discontinuous and overlapping figures too (gold overlap is read on the gold tokens).
"""
from typing import Any, Callable, Dict, Iterable, List, Optional, Set, Tuple

from spacy.scorer import PRFScore
from spacy.training import Example
from spacy.util import registry

from .entities import Entity, aligned_gold_entities, get_entities, overlapping


def score_entities(
    examples: Iterable[Example], spans_key: str = "w2ner", **kwargs: Any
) -> Dict[str, Any]:
    """Score the predicted entities of ``doc.spans[spans_key]`` against the gold ones."""
    overall, discontinuous, overlap = PRFScore(), PRFScore(), PRFScore()
    per_type: Dict[str, PRFScore] = {}
    for example in examples:
        gold, unaligned = aligned_gold_entities(example, spans_key)
        gold_set, predicted_set = set(gold), set(get_entities(example.predicted, spans_key))
        overall.score_set(predicted_set, gold_set)
        # Gold entities that no predicted tokens can express are misses.
        overall.fn += len(unaligned)
        for entity in unaligned:
            per_type.setdefault(entity.label, PRFScore()).fn += 1
        for label in {entity.label for entity in gold_set | predicted_set}:
            per_type.setdefault(label, PRFScore()).score_set(
                _with_label(predicted_set, label), _with_label(gold_set, label)
            )
        discontinuous.score_set(_discontinuous(predicted_set), _discontinuous(gold_set))
        discontinuous.fn += len(_discontinuous(set(unaligned)))
        overlapping_gold, overlapping_unaligned = _overlapping_gold(example, spans_key, gold, unaligned)
        overlap.score_set(_overlapping(predicted_set), overlapping_gold)
        overlap.fn += overlapping_unaligned
    scores = {
        f"{spans_key}_p": overall.precision,
        f"{spans_key}_r": overall.recall,
        f"{spans_key}_f": overall.fscore,
        f"{spans_key}_per_type": {label: prf.to_dict() for label, prf in sorted(per_type.items())},
        f"{spans_key}_discontinuous_f": discontinuous.fscore,
        f"{spans_key}_overlapping_f": overlap.fscore,
    }
    for name in ("p", "r", "f", "per_type"):
        scores[f"spans_{spans_key}_{name}"] = scores[f"{spans_key}_{name}"]
    return scores


SCORE_NAMES = ("p", "r", "f", "per_type", "discontinuous_f", "overlapping_f")  # each after "{spans_key}_"


def unweighted_scores(weights: Dict[str, Any], spans_key: str, pipeline_keys: Iterable[str] = ()) -> Optional[str]:
    """What is wrong where ``[training.score_weights]`` weighs the factory's default names
    (``w2ner_f``) and none of the names the scores of this component (another ``spans_key``) or of
    the pipeline's other w2ner components (``pipeline_keys``) have: spacy train's score would stay
    0 and model-best would be chosen on nothing; None otherwise."""
    keys = {spans_key, *pipeline_keys}
    weighted = {name for name, weight in weights.items() if weight}
    ours = {f"{prefix}{key}_{name}" for key in keys for prefix in ("", "spans_") for name in SCORE_NAMES}
    if "w2ner" in keys or weighted & ours or not {f"w2ner_{name}" for name in SCORE_NAMES} & weighted:
        return None
    return (f"[training.score_weights] weighs {', '.join(sorted(weighted))}, but this component writes doc.spans"
            f"[{spans_key!r}] and its scores are {spans_key}_f, ...: spacy train's score would stay 0. Set "
            f"[training.score_weights] {spans_key}_f = 1.0 and w2ner_f = null")  # fmt: skip


@registry.scorers("spacy_w2ner.entity_scorer.v1")
def make_entity_scorer() -> Callable[..., Dict[str, Any]]:
    return score_entities


def _with_label(entities: Set[Entity], label: str) -> Set[Entity]:
    return {e for e in entities if e.label == label}


def _discontinuous(entities: Set[Entity]) -> Set[Entity]:
    return {e for e in entities if e.is_discontinuous}


def _overlapping(entities: Set[Entity]) -> Set[Entity]:
    ordered = sorted(entities, key=lambda e: (e.tokens, e.label))
    return {ordered[k] for k in overlapping(ordered)}


def _overlapping_gold(example: Example, spans_key: str, aligned: List[Entity], unaligned: List[Entity]) -> Tuple[Set[Entity], int]:
    """The aligned gold entities that share a token with another gold entity, read on the gold
    tokens so that an unaligned one counts, and how many unaligned ones do."""
    if not unaligned:
        return _overlapping(set(aligned)), 0
    reference = get_entities(example.reference, spans_key)
    shared = _overlapping(set(reference))
    left_out = set(unaligned)
    kept = [entity for entity in reference if entity not in left_out]  # in aligned_gold_entities' order
    return {entity for entity, original in zip(aligned, kept) if original in shared}, len(left_out & shared)
