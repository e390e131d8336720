"""scripts/entity_errors.py: each error where it lies."""
import importlib.util
from collections import Counter
from pathlib import Path

from spacy_w2ner.entities import Entity

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "entity_errors.py"
spec = importlib.util.spec_from_file_location("entity_errors", SCRIPT)
entity_errors = importlib.util.module_from_spec(spec)
spec.loader.exec_module(entity_errors)


def test_each_entity_is_counted_once_where_its_error_lies():
    gold = [Entity("ADR", (0, 1)), Entity("ADR", (3, 4)), Entity("ADR", (6, 8)), Entity("ADR", (10,))]
    predicted = [Entity("ADR", (0, 1)), Entity("ADR", (3,)), Entity("ADR", (6, 7, 8)), Entity("ADR", (12, 13))]
    assert entity_errors.error_counts(gold, predicted) == Counter({
        ("gold", "contiguous", "found"): 1,
        ("gold", "contiguous", "missed, wrong boundaries or label"): 1,  # (3, 4): (3,) was predicted
        ("gold", "discontinuous", "missed, wrong boundaries or label"): 1,  # (6, 8): (6, 7, 8) was predicted
        ("gold", "contiguous", "missed, nothing predicted there"): 1,  # (10,)
        ("predicted", "contiguous", "right"): 1,
        ("predicted", "contiguous", "wrong boundaries or label"): 2,  # (3,) and (6, 7, 8)
        ("predicted", "contiguous", "spurious, no gold entity there"): 1,  # (12, 13)
    })


def test_a_wrong_label_on_the_right_tokens_is_not_a_find():
    counts = entity_errors.error_counts([Entity("ADR", (2, 3))], [Entity("Drug", (2, 3))])
    assert counts == Counter({("gold", "contiguous", "missed, wrong boundaries or label"): 1,
                              ("predicted", "contiguous", "wrong boundaries or label"): 1})


def test_the_summary_gives_recall_and_precision_per_kind():
    counts = Counter({("gold", "contiguous", "found"): 3, ("gold", "contiguous", "missed, wrong boundaries or label"): 1,
                      ("predicted", "discontinuous", "right"): 1, ("predicted", "discontinuous", "wrong boundaries or label"): 1})
    table = entity_errors.summary(counts)
    assert table["gold, contiguous"] == {"found": 3, "missed, wrong boundaries or label": 1, "total": 4, "recall": 75.0}
    assert table["predicted, discontinuous"]["precision"] == 50.0
