"""scripts/discontinuous_cells.py: which cells a discontinuous error comes from."""
import importlib.util
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import spacy

from spacy_w2ner import set_entities
from spacy_w2ner.grid.codec import NNW, NONE, THW_OFFSET
from spacy_w2ner.grid.segments import Segment
from spacy_w2ner.model.types import LinkThresholds

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "discontinuous_cells.py"
spec = importlib.util.spec_from_file_location("discontinuous_cells", SCRIPT)
discontinuous_cells = importlib.util.module_from_spec(spec)
spec.loader.exec_module(discontinuous_cells)


def test_an_entitys_cells_by_kind():
    assert discontinuous_cells.cell_kinds((2, 3, 6)) == {"adjacent": [(2, 3)], "skip": [(3, 6)], "thw": [(6, 2)]}


def test_the_cells_a_grid_reads_wrong():
    relations = np.zeros((7, 7), dtype=int)
    relations[2, 3] = NNW
    relations[6, 2] = THW_OFFSET
    assert discontinuous_cells.wrong_cells((2, 3, 6), THW_OFFSET, relations) == {"adjacent": [], "skip": [(3, 6)], "thw": []}
    assert discontinuous_cells.wrong_cells((2, 3, 6), THW_OFFSET + 1, relations)["thw"] == [(6, 2)]  # another label


def grid_with_a_weak_skip_link():
    """'pain in the knees .': gold (0, 1, 3) with its skip link (1, 3) at P(NNW) 0.3."""
    probs = np.zeros((5, 5, 3), dtype=np.float32)
    probs[..., NONE] = 1.0
    probs[0, 1] = [0.1, 0.9, 0.0]
    probs[1, 3] = [0.7, 0.3, 0.0]
    probs[3, 0] = [0.05, 0.0, 0.95]
    return [(Segment(0, 0, 5, 0, 5), probs)]


def test_a_missed_skip_link_is_counted_with_its_probability_and_a_threshold_finds_it():
    doc = spacy.blank("en")("pain in the knees .")
    set_entities(doc, [("ADR", (0, 1, 3), None)], "w2ner")
    pipe = SimpleNamespace(labels=("ADR",), spans_key="w2ner", max_paths_per_edge=64)
    at_argmax = discontinuous_cells.analyse(pipe, [doc], grid_with_a_weak_skip_link(), LinkThresholds())
    assert at_argmax["counts"] == {"gold: discontinuous": 1, "gold: wrong cells: skip": 1}
    assert at_argmax["probabilities"]["gold, wrong skip cells: P(the entity's relation)"]["quartiles"] == [0.3] * 3
    tuned = discontinuous_cells.analyse(pipe, [doc], grid_with_a_weak_skip_link(), LinkThresholds(nnw=0.25))
    assert tuned["counts"] == {"gold: discontinuous": 1, "gold: right": 1, "predicted: discontinuous": 1, "predicted: right": 1}


def test_a_wrong_prediction_is_counted_by_the_cells_gold_lacks():
    doc = spacy.blank("en")("pain in the knees .")
    set_entities(doc, [("ADR", (0, 1), None)], "w2ner")  # gold: "pain in"; the grid reads "pain in ... knees"
    pipe = SimpleNamespace(labels=("ADR",), spans_key="w2ner", max_paths_per_edge=64)
    found = discontinuous_cells.analyse(pipe, [doc], grid_with_a_weak_skip_link(), LinkThresholds(nnw=0.25))
    assert found["counts"]["predicted: wrong cells: skip, thw"] == 1
    assert found["probabilities"]["predicted, wrong thw cells: P(the entity's relation)"]["quartiles"] == [0.95] * 3
