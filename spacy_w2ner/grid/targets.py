"""Training targets: gold entities -> relation grids and loss weights per segment (pure numpy).

The gold entities of an example are aligned to its predicted tokens and their labels
turned into label ids (``gold_entities``). Each segment (sentence or window, see
``segments.py``) then gets the grid of the entities it holds whole (``gold_grids``).
Some gold entities cannot be taught, and are counted so the component can say so:

* ``misaligned``: a fragment boundary falls inside a predicted token;
* ``unlearnable``: no segment holds the entity whole (it crosses a sentence
  boundary, is longer than ``max_window``, or is cut by every window of a long
  sentence: only one spanning at most ``window_overlap`` + 1 tokens never is);
* ``thw_conflicts``: another entity with the same first and last word but another
  label already claims its tail-to-head cell (one label per cell; the first wins).

Training grids are cut at the gold Doc's sentence boundaries (``training_regions``): the
predicted Doc of an Example is made from the text and has none, and without them a document
would be gridded in windows of ``max_window`` tokens, whose cells grow with the square of
their length. Sentences that a gold entity crosses are joined into one region (counted):
an entity is never cut by a boundary.

The links of an entity that a window cuts are neither taught as present nor as
absent (weight 0), so windows never teach that half an entity is no entity; a link it
shares with an entity the window holds whole is taught as that entity's. The links that
join a discontinuous entity's fragments across its gap can weigh more than other cells
(``gap_link_weight``): they are rare, and the grid learns to leave them out.
"""
from bisect import bisect_right
from itertools import accumulate
from typing import Dict, List, Sequence, Tuple

import numpy as np
from spacy.training import Example

from ..entities import Entity, aligned_gold_entities
from .codec import NONE, encode_grid
from .segments import Region, Segment, entities_met, regions_joined_for, sentence_regions


def gold_entities(
    examples: Sequence[Example], labels: Sequence[str], spans_key: str
) -> Tuple[List[List[Entity]], int]:
    """Aligned gold entities per example, labelled by label id, and how many could not be aligned.

    Raises ValueError naming the doc when a gold label is not one of ``labels``.
    """
    label_ids = {label: i for i, label in enumerate(labels)}
    gold: List[List[Entity]] = []
    misaligned = 0
    for i, example in enumerate(examples):
        entities, unaligned = aligned_gold_entities(example, spans_key)
        misaligned += len(unaligned)
        for entity in entities:
            if entity.label not in label_ids:
                raise ValueError(
                    f"Gold entity label '{entity.label}' in doc {i} of the batch "
                    f"({example.reference.text[:60]!r}) is not one of the component's "
                    f"labels {list(labels)}. Initialize with all labels."
                )
        gold.append([entity.with_label(label_ids[entity.label]) for entity in entities])
    return gold, misaligned


def gold_grids(
    segments: Sequence[Segment], longest: int, gold: Sequence[Sequence[Entity]], gap_link_weight: float = 1.0
) -> Tuple[np.ndarray, np.ndarray, int]:
    """Target relation ids and loss weights (1 on valid cells, ``gap_link_weight`` on the
    NNW cells that join an entity's fragments across a gap) for a batch of segments.

    ``gold[doc_index]`` holds the doc's gold entities (label ids, doc token indices).
    Returns (targets, weights), both (segments, longest, longest).
    """
    targets = np.zeros((len(segments), longest, longest), dtype="int64")
    weights = np.zeros((len(segments), longest, longest), dtype="float32")
    for k, (segment, (held, cut)) in enumerate(zip(segments, entities_met(segments, gold))):
        inside = [segment.to_segment(e) for e in held]
        n = segment.length
        targets[k, :n, :n], _ = encode_grid(inside, n)  # conflicts: counted once a doc (``thw_conflicts``)
        weights[k, :n, :n] = 1.0
        if gap_link_weight != 1.0:
            for entity in inside:
                tails, heads = gap_links(entity.tokens)
                weights[k, tails, heads] = gap_link_weight
        for entity in cut:
            kept = segment.held(entity.tokens)
            links = (k, kept[:-1], kept[1:])
            weights[links] *= targets[links] != NONE  # a link an entity held whole shares stays taught
    return targets, weights


def gap_links(tokens: Sequence[int]) -> Tuple[List[int], List[int]]:
    """The (from, to) word pairs of an entity's NNW links that skip words: its gaps."""
    pairs = [(a, b) for a, b in zip(tokens, tokens[1:]) if b - a > 1]
    return [a for a, _ in pairs], [b for _, b in pairs]


def count_unlearnable(gold: Sequence[Sequence[Entity]], segments: Sequence[Segment]) -> int:
    """Gold entities that no segment holds whole: for each, the furthest end of its doc's
    segments that start at or before its first token (found by bisection) is at or before its
    last token."""
    by_doc: Dict[int, List[Tuple[int, int]]] = {}
    for segment in segments:
        by_doc.setdefault(segment.doc_index, []).append((segment.start, segment.end))
    unlearnable = 0
    for i, entities in enumerate(gold):
        spans = sorted(by_doc.get(i, []))
        starts = [start for start, _ in spans]
        furthest = list(accumulate((end for _, end in spans), max))
        for entity in entities:
            before = bisect_right(starts, entity.tokens[0])
            unlearnable += before == 0 or furthest[before - 1] <= entity.tokens[-1]
    return unlearnable



def training_regions(example: Example, entities: Sequence[Entity]) -> Tuple[List[Region], int]:
    """The regions of the predicted Doc that training grids: its sentences where it has
    boundaries, else the gold Doc's sentences (on the predicted tokens, by character offset;
    a boundary inside a predicted token is left out), else the whole doc; the sentences a gold
    entity (``entities``, predicted token indices) crosses joined. And the number of boundaries
    removed for entities."""
    predicted = example.predicted
    if predicted.has_annotation("SENT_START") or not example.reference.has_annotation("SENT_START"):
        return regions_joined_for(sentence_regions(predicted), entities)
    token_at = {token.idx: token.i for token in predicted}
    starts = sorted({token_at[sent[0].idx] for sent in example.reference.sents if sent[0].idx in token_at} | {0})
    regions = list(zip(starts, starts[1:] + [len(predicted)])) if len(predicted) else []
    return regions_joined_for(regions, entities)
