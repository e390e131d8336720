"""grid.targets.gold_grids' loss weights: 1 on a segment's cells, 0 past its end and on the links
a window cuts (but those an entity it holds whole shares), ``gap_link_weight`` on the NNW links
that cross a discontinuous entity's gap; and the THW conflicts a training step counts."""
import numpy as np

from spacy_w2ner.entities import Entity
from spacy_w2ner.grid.codec import NNW
from spacy_w2ner.grid.segments import Segment, segment_docs
from spacy_w2ner.grid.targets import gap_links, gold_grids

# "pain in her knees and ankles": pain..knees (0-3) and pain in her ... ankles (0, 1, 2, 5)
ENTITIES = [Entity(0, (0, 1, 2, 3)), Entity(0, (0, 1, 2, 5)), Entity(0, (6, 9))]


def test_gap_links_are_the_links_that_skip_words():
    assert gap_links((0, 1, 2, 5)) == ([2], [5])
    assert gap_links((1, 3, 4, 8)) == ([1, 4], [3, 8])
    assert gap_links((0, 1, 2)) == ([], [])


def test_the_gap_links_weigh_gap_link_weight_and_every_other_cell_one():
    segments = [Segment(0, 0, 10, 0, 10)]
    targets, plain = gold_grids(segments, 11, [ENTITIES])
    _, weighted = gold_grids(segments, 11, [ENTITIES], gap_link_weight=4.0)
    assert targets[0, 2, 5] == NNW and targets[0, 6, 9] == NNW
    expected = plain.copy()
    expected[0, [2, 6], [5, 9]] = 4.0
    assert np.array_equal(weighted, expected)
    assert plain[0, :10, :10].min() == 1.0 and plain[0, 10].max() == 0.0  # the padding row


def test_a_gap_in_a_later_segment_is_weighted_at_its_place_there():
    segments = [Segment(0, 0, 5, 0, 5), Segment(0, 5, 10, 5, 10)]  # the third entity in the second
    _, weighted = gold_grids(segments, 5, [ENTITIES], gap_link_weight=3.0)
    assert weighted[1, 1, 4] == 3.0 and (weighted[1] == 3.0).sum() == 1
    assert weighted[0, 2, 0] == 1.0 and (weighted[0] == 3.0).sum() == 0  # the first two are cut: not held


def test_a_cut_entity_leaves_the_links_it_shares_with_a_held_one_taught():
    """(6, 7, 8) is held whole by the first window only, where (6, ..., 11) is cut: the links
    6-7 and 7-8 are (6, 7, 8)'s and keep their weight; the cut entity's others weigh 0."""
    segments = [Segment(0, 0, 10, 0, 9), Segment(0, 8, 18, 9, 18)]
    gold = [Entity(0, (6, 7, 8)), Entity(1, tuple(range(6, 12)))]
    targets, weights = gold_grids(segments, 10, [gold])
    assert targets[0, 6, 7] == targets[0, 7, 8] == NNW
    assert weights[0, 6, 7] == weights[0, 7, 8] == 1.0
    assert weights[0, 8, 9] == 0.0  # the cut entity's own link, not taught either way
    assert weights[1, 0, 1] == weights[1, 1, 2] == weights[1, 2, 3] == 0.0  # (6, 7, 8) and (6..11) cut there


def test_a_step_counts_a_thw_conflict_once_however_many_windows_hold_it():
    """Two entities with one head and tail and two labels, in the overlap of three windows."""
    import spacy
    from spacy.training import Example
    from spacy_w2ner.entities import set_entities
    from spacy_w2ner.model.objective import TrainingObjective

    nlp = spacy.blank("en")
    doc = nlp.make_doc(" ".join(["w"] * 12))
    set_entities(doc, [("A", (4, 5, 6), None), ("B", (4, 6), None)])
    model = type("M", (), {"attrs": {"max_window": 8, "window_overlap": 6}})()
    objective = TrainingObjective.of(model, [Example(nlp.make_doc(doc.text), doc)], ["A", "B"], "w2ner")
    segments = segment_docs([doc], 8, 6)
    assert sum(segment.contains((4, 6)) for segment in segments) == 3
    assert objective.counts["thw_conflict"] == 1
