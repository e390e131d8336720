"""Which grid cells a pipeline's discontinuous errors come from.

    python scripts/discontinuous_cells.py MODEL DEV.spacy [--nnw T] [--thw T] [--output JSON]

A discontinuous entity is read off the grid through its links (NNW cells between its
consecutive words: "adjacent" when the words are neighbours, "skip" when the link jumps its gap)
and its THW cell (tail, head). For each gold discontinuous entity of DEV the pipeline misses, this
counts which of those cells the pipeline reads wrong (at the arg-max, or with the link thresholds
given); for each discontinuous entity it predicts that is not gold, which of its cells gold does
not have; each with the probability the model gives the entity's relation there: where a
threshold would help and where the model is simply wrong. The network runs
once (``release.decoding.dev_probabilities``); cells are read with the component's rule
(``decided_relations``). Prints JSON.
"""
import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Dict, List, NamedTuple, Sequence

import numpy as np

from spacy_w2ner.entities import Entity


def cell_kinds(tokens: Sequence[int]) -> Dict[str, List[tuple]]:
    """The cells that read an entity off a grid: its adjacent and skip links, and its THW cell."""
    links = list(zip(tokens, tokens[1:]))
    return {
        "adjacent": [(a, b) for a, b in links if b == a + 1],
        "skip": [(a, b) for a, b in links if b > a + 1],
        "thw": [(tokens[-1], tokens[0])],
    }


def wrong_cells(tokens: Sequence[int], relation_of_thw: int, relations: np.ndarray) -> Dict[str, List[tuple]]:
    """The cells of an entity (segment token indices) that the read grid does not give it."""
    from spacy_w2ner.grid.codec import NNW

    kinds = cell_kinds(tokens)
    wrong = {kind: [c for c in cells if relations[c] != NNW] for kind, cells in kinds.items() if kind != "thw"}
    wrong["thw"] = [c for c in kinds["thw"] if relations[c] != relation_of_thw]
    return wrong


def quantiles(values: List[float]) -> Dict[str, object]:
    if not values:
        return {"n": 0}
    values = np.asarray(values)
    shares = {f">= {t}": round(float((values >= t).mean()), 3) for t in (0.05, 0.1, 0.2, 0.3, 0.5)}
    return {"n": len(values), "quartiles": np.round(np.quantile(values, [0.25, 0.5, 0.75]), 3).tolist(), **shares}


class ReadGrid(NamedTuple):
    """A segment's grid as the pipeline reads it, its probabilities and its gold relations."""

    segment: object
    relations: np.ndarray
    confidences: np.ndarray
    probs: np.ndarray
    gold: np.ndarray


def analyse(pipe, gold_docs, grids, thresholds) -> dict:
    """Counts over DEV's discontinuous entities, gold and predicted (see the module docstring)."""
    import torch

    from spacy_w2ner.entities import get_entities
    from spacy_w2ner.grid.codec import NNW, THW_OFFSET, encode_grid
    from spacy_w2ner.grid.segments import decode_segments
    from spacy_w2ner.model.predictions import decided_relations

    labels = {label: i for i, label in enumerate(pipe.labels)}
    gold = [{(labels[e.label], e.tokens) for e in get_entities(doc, pipe.spans_key)} for doc in gold_docs]
    read = []
    for segment, probs in grids:
        confidences, relations = decided_relations(torch.from_numpy(probs), thresholds)
        inside = [segment.to_segment(Entity(label, tokens)) for label, tokens in gold[segment.doc_index] if segment.contains(tokens)]
        read.append(ReadGrid(segment, relations.numpy(), confidences.numpy(), probs, encode_grid(inside, segment.length)[0]))
    predicted, _ = decode_segments([grid[:3] for grid in read], len(gold_docs), pipe.max_paths_per_edge)
    counts, probabilities = Counter(), {}
    for d in range(len(gold_docs)):
        found = {(e.label, e.tokens) for e in predicted[d]}
        # a gold entity's cells that the pipeline reads wrong; a predicted one's that gold does not have
        for side, entities, others in (("gold", gold[d], found), ("predicted", found, gold[d])):
            for label, tokens in entities:
                if len(tokens) == tokens[-1] - tokens[0] + 1:
                    continue  # contiguous
                counts[f"{side}: discontinuous"] += 1
                if (label, tokens) in others:
                    counts[f"{side}: right"] += 1
                    continue
                grid = next(g for g in read if g.segment.doc_index == d and g.segment.contains(tokens))
                against = grid.relations if side == "gold" else grid.gold
                wrong = wrong_cells([t - grid.segment.start for t in tokens], THW_OFFSET + label, against)
                counts[f"{side}: wrong cells: " + (", ".join(kind for kind, cells in wrong.items() if cells) or "none")] += 1
                for kind, cells in wrong.items():
                    column = NNW if kind != "thw" else THW_OFFSET + label
                    probabilities.setdefault(f"{side}, wrong {kind} cells: P(the entity's relation)", []).extend(
                        float(grid.probs[c][column]) for c in cells
                    )
    return {"counts": dict(sorted(counts.items())), "probabilities": {k: quantiles(v) for k, v in sorted(probabilities.items())}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", type=Path)
    parser.add_argument("data", type=Path, help="gold documents (.spacy); dev, never test")
    parser.add_argument("--nnw", type=float, default=None, help="nnw_threshold (default: the arg-max)")
    parser.add_argument("--thw", type=float, default=None, help="thw_threshold (default: the arg-max)")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()

    import spacy
    from spacy.tokens import DocBin

    from spacy_w2ner.component import first_w2ner
    from spacy_w2ner.model.types import LinkThresholds
    from spacy_w2ner.release.decoding import dev_probabilities, words_only

    nlp = spacy.load(args.model)
    _, pipe = first_w2ner(nlp)
    gold = list(DocBin().from_disk(args.data).get_docs(nlp.vocab))
    grids = dev_probabilities(nlp, words_only(nlp, gold))
    result = {"model": str(args.model), "data": str(args.data), "nnw_threshold": args.nnw, "thw_threshold": args.thw,
              **analyse(pipe, gold, grids, LinkThresholds(args.nnw, args.thw))}  # fmt: skip
    text = json.dumps(result, indent=1)
    print(text)
    if args.output:
        args.output.write_text(text)


if __name__ == "__main__":
    main()
