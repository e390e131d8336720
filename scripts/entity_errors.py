"""Where a pipeline's entity errors are, contiguous and discontinuous entities counted apart.

    python scripts/entity_errors.py MODEL DATA.spacy [--spans-key w2ner]

The pipeline annotates DATA's words (its tokenization, without its entities), and each entity is
compared by exact (label, token indices), as the scorer does: a gold entity is found, missed at
its boundaries or label (a prediction shares a token with it) or missed with no prediction on any of its
tokens; a predicted entity is right, wrong at a gold entity's boundaries or label, or spurious (no gold
entity on any of its tokens). Prints the counts as JSON, with recall and precision per kind.
"""
import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Dict, Sequence

from spacy_w2ner.entities import Entity

OUTCOMES = {"gold": ("found", "missed, wrong boundaries or label", "missed, nothing predicted there"),
            "predicted": ("right", "wrong boundaries or label", "spurious, no gold entity there")}  # fmt: skip


def kind(entity: Entity) -> str:
    return "discontinuous" if entity.is_discontinuous else "contiguous"


def error_counts(gold: Sequence[Entity], predicted: Sequence[Entity]) -> Counter:
    """One document's counts, keyed ``(side, kind, outcome)``: side ``gold`` or ``predicted``."""
    counts = Counter()
    for side, entities, others in (("gold", gold, predicted), ("predicted", predicted, gold)):
        exact, boundaries, elsewhere = OUTCOMES[side]
        other_keys = {other.key for other in others}
        other_tokens = set().union(*(other.tokens for other in others))
        for entity in entities:
            if entity.key in other_keys:
                outcome = exact
            elif other_tokens.intersection(entity.tokens):
                outcome = boundaries
            else:
                outcome = elsewhere
            counts[(side, kind(entity), outcome)] += 1
    return counts


def summary(counts: Counter) -> Dict[str, Dict[str, object]]:
    """The counts by side and kind, with recall (gold) or precision (predicted) in percent."""
    table: Dict[str, Dict[str, object]] = {}
    for (side, entity_kind, outcome), n in sorted(counts.items()):
        table.setdefault(f"{side}, {entity_kind}", {})[outcome] = n
    for name, row in table.items():
        side = name.split(",")[0]
        total = sum(row.values())
        row["total"] = total
        row["recall" if side == "gold" else "precision"] = round(100 * row.get(OUTCOMES[side][0], 0) / total, 2)
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", type=Path)
    parser.add_argument("data", type=Path, help="gold documents (.spacy)")
    parser.add_argument("--spans-key", default="w2ner")
    args = parser.parse_args()

    import spacy
    from spacy.tokens import Doc, DocBin

    from spacy_w2ner.entities import get_entities

    nlp = spacy.load(args.model)
    gold_docs = list(DocBin().from_disk(args.data).get_docs(nlp.vocab))
    words_only = (Doc(nlp.vocab, words=[t.text for t in doc], spaces=[bool(t.whitespace_) for t in doc]) for doc in gold_docs)
    counts = Counter()
    for gold, predicted in zip(gold_docs, nlp.pipe(words_only, batch_size=64)):
        counts += error_counts(get_entities(gold, args.spans_key), get_entities(predicted, args.spans_key))
    print(json.dumps({"model": str(args.model), "data": str(args.data), "counts": summary(counts)}, indent=1))


if __name__ == "__main__":
    main()
