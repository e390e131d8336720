"""grid.targets.gold_grids' loss weights: 1 on a segment's cells, 0 past its end and on the links
a window cuts, ``gap_link_weight`` on the NNW links that cross a discontinuous entity's gap."""
import numpy as np

from spacy_w2ner.entities import Entity
from spacy_w2ner.grid.codec import NNW
from spacy_w2ner.grid.segments import Segment
from spacy_w2ner.grid.targets import gap_links, gold_grids

# "pain in her knees and ankles": pain..knees (0-3) and pain in her ... ankles (0, 1, 2, 5)
ENTITIES = [Entity(0, (0, 1, 2, 3)), Entity(0, (0, 1, 2, 5)), Entity(0, (6, 9))]


def test_gap_links_are_the_links_that_skip_words():
    assert gap_links((0, 1, 2, 5)) == ([2], [5])
    assert gap_links((1, 3, 4, 8)) == ([1, 4], [3, 8])
    assert gap_links((0, 1, 2)) == ([], [])


def test_the_gap_links_weigh_gap_link_weight_and_every_other_cell_one():
    segments = [Segment(0, 0, 10, 0, 10)]
    targets, plain, _ = gold_grids(segments, 11, [ENTITIES])
    _, weighted, _ = gold_grids(segments, 11, [ENTITIES], gap_link_weight=4.0)
    assert targets[0, 2, 5] == NNW and targets[0, 6, 9] == NNW
    expected = plain.copy()
    expected[0, [2, 6], [5, 9]] = 4.0
    assert np.array_equal(weighted, expected)
    assert plain[0, :10, :10].min() == 1.0 and plain[0, 10].max() == 0.0  # the padding row


def test_a_gap_in_a_later_segment_is_weighted_at_its_place_there():
    segments = [Segment(0, 0, 5, 0, 5), Segment(0, 5, 10, 5, 10)]  # the third entity in the second
    _, weighted, _ = gold_grids(segments, 5, [ENTITIES], gap_link_weight=3.0)
    assert weighted[1, 1, 4] == 3.0 and (weighted[1] == 3.0).sum() == 1
    assert weighted[0, 2, 0] == 1.0 and (weighted[0] == 3.0).sum() == 0  # the first two are cut: not held
