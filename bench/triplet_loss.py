"""The triplet loss's cost beside the cross-entropy's, per training step, on a corpus's gold
entities and random logits (the loss's cost depends on the grids and the entities, not on the
values of the logits).

    python bench/triplet_loss.py ~/w2ner-runs/cadec/train.spacy --docs 1600 --output bench/results/triplet_loss.json

Steps of 16 documents (the project's CPU recipes), cut into segments and grid batches as the
model cuts them; per grid batch, the targets and cross-entropy (``gold_grids``,
``grid_cross_entropy``) and the triplet loss with its gradient (``grid_triplet_loss``), for each
window and mining scheme. Reports milliseconds a step and the ratio of the two.
"""
import argparse
import json
import time
from pathlib import Path

import numpy as np
import spacy
from spacy.tokens import DocBin
from thinc.api import NumpyOps

from spacy_w2ner.entities import get_entities
from spacy_w2ner.grid.segments import batch_by_cells, segment_docs
from spacy_w2ner.grid.targets import gold_grids
from spacy_w2ner.model.loss import grid_cross_entropy, grid_triplet_loss
from spacy_w2ner.model.types import TripletSettings

STEP_DOCS = 16


def time_setting(docs, settings: TripletSettings, relations: int, seed: int = 0) -> dict:
    ops, rng = NumpyOps(), np.random.default_rng(seed)
    cross_entropy = triplet = 0.0
    steps = 0
    for start in range(0, len(docs), STEP_DOCS):
        step = docs[start : start + STEP_DOCS]
        gold = [[entity.with_label(0) for entity in get_entities(doc, "w2ner")] for doc in step]
        segments = segment_docs(step, 256, 64)
        n_cells = sum(segment.length**2 for segment in segments)
        for batch in batch_by_cells(segments, 32768):
            longest = max(segment.length for segment in batch)
            logits = rng.normal(size=(len(batch), longest, longest, relations)).astype("float32")
            began = time.perf_counter()
            targets, weights = gold_grids(batch, longest, gold)
            grid_cross_entropy(ops, logits, targets, weights, n_cells)
            middle = time.perf_counter()
            grid_triplet_loss(logits, batch, gold, settings, n_cells)
            cross_entropy += middle - began
            triplet += time.perf_counter() - middle
        steps += 1
    return {"window": settings.window, "mining": settings.mining, "steps": steps,
            "cross_entropy_ms_per_step": round(1000 * cross_entropy / steps, 2),
            "triplet_ms_per_step": round(1000 * triplet / steps, 2), "ratio": round(triplet / cross_entropy, 2)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", type=Path, help="a .spacy with entities in doc.spans['w2ner']")
    parser.add_argument("--docs", type=int, default=1600)
    parser.add_argument("--relations", type=int, default=3, help="NONE, NNW and one THW per label (CADEC: 3)")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    docs = list(DocBin().from_disk(args.corpus).get_docs(spacy.blank("en").vocab))[: args.docs]
    rows = [time_setting(docs, TripletSettings(1.0, window, 1.0, mining), args.relations)
            for window in (20, 25, 0) for mining in ("centroid", "negative_centroid", "hard_negative")]  # fmt: skip
    for row in rows:
        print(json.dumps(row))
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps({"corpus": str(args.corpus), "docs": len(docs), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
