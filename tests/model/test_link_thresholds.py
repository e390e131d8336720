"""The link thresholds' reading of grid cells (``predictions.decided_relations``, ``HostGrids``):
by default the arg-max exactly as before them; with thresholds, each triangle by its own link's
probability."""
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from spacy_w2ner.grid.codec import NNW, NONE, THW_OFFSET, decode_grid
from spacy_w2ner.model.predictions import HostGrids, decided_relations
from spacy_w2ner.model.types import LinkThresholds, check_link_threshold


def random_logits(seed, segments=3, n=7, relations=5):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(segments, n, n, relations, generator=generator) * 3


def probabilities(*rows):
    """A (1, n, n, relations) tensor from nested lists of per-cell probabilities."""
    return torch.tensor([rows], dtype=torch.float32)


@pytest.mark.parametrize("thresholds", [None, LinkThresholds(), LinkThresholds(None, None)])
@pytest.mark.parametrize("seed", range(5))
def test_the_default_is_the_argmax_as_before(seed, thresholds):
    logits = random_logits(seed)
    before_confidences, before_relations = torch.softmax(logits.float(), dim=-1).max(dim=-1)  # the code before thresholds
    relations, confidences = HostGrids(logits, thresholds).arrays()
    assert np.array_equal(relations, before_relations.numpy())
    assert np.array_equal(confidences, before_confidences.numpy())
    for k in range(logits.shape[0]):
        default = decode_grid(relations[k], confidences[k])
        before = decode_grid(before_relations[k].numpy(), before_confidences[k].numpy())
        assert [(e.label, e.tokens, e.score) for e in default.entities] == [(e.label, e.tokens, e.score) for e in before.entities]


def reference_reading(probs: np.ndarray, thresholds: LinkThresholds):
    """Cell by cell, as the rule is stated: NNW above the diagonal, THW on and below it."""
    argmax = probs.argmax(-1)
    relations = argmax.copy()
    confidences = probs.max(-1)
    n = probs.shape[1]
    for b in range(probs.shape[0]):
        for i in range(n):
            for j in range(n):
                p = probs[b, i, j]
                if i < j and thresholds.nnw is not None:
                    relations[b, i, j] = NNW if p[NNW] >= thresholds.nnw else NONE
                    confidences[b, i, j] = p[NNW] if p[NNW] >= thresholds.nnw else confidences[b, i, j]
                elif i >= j and thresholds.thw is not None:
                    label = int(np.argmax(p[THW_OFFSET:]))
                    link = p[THW_OFFSET + label] >= thresholds.thw
                    relations[b, i, j] = THW_OFFSET + label if link else NONE
                    confidences[b, i, j] = p[THW_OFFSET + label] if link else confidences[b, i, j]
    return relations, confidences


threshold_values = st.one_of(st.none(), st.floats(0.01, 1.0))


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), nnw=threshold_values, thw=threshold_values, n=st.integers(1, 6), relations=st.integers(3, 6))
def test_thresholds_read_each_triangle_by_its_own_link(seed, nnw, thw, n, relations):
    probs = torch.softmax(random_logits(seed, 2, n, relations), dim=-1)
    thresholds = LinkThresholds(nnw, thw)
    confidences, decided = decided_relations(probs, thresholds)
    expected_relations, expected_confidences = reference_reading(probs.numpy(), thresholds)
    assert np.array_equal(decided.numpy(), expected_relations)
    assert np.allclose(confidences.numpy(), expected_confidences)


def test_a_lower_nnw_threshold_links_a_cell_the_argmax_leaves_unlinked():
    # Words 0, 1: cell (0, 1) is P(NNW) 0.4 against NONE 0.6; the THW cell (1, 0) is certain.
    none, nnw, thw = [1.0, 0.0, 0.0], [0.6, 0.4, 0.0], [0.0, 0.0, 1.0]
    probs = probabilities([none, nnw], [thw, none])
    assert decode_grid(*[a[0].numpy() for a in reversed(decided_relations(probs))]).entities == []
    confidences, relations = decided_relations(probs, LinkThresholds(nnw=0.3))
    assert relations[0, 0, 1] == NNW and confidences[0, 0, 1] == pytest.approx(0.4)
    found = decode_grid(relations[0].numpy(), confidences[0].numpy()).entities
    assert [(e.label, e.tokens, round(e.score, 4)) for e in found] == [(0, (0, 1), 0.4)]
    assert decided_relations(probs, LinkThresholds(nnw=0.5))[1][0, 0, 1] == NONE


def test_a_higher_nnw_threshold_unlinks_an_argmax_link():
    probs = probabilities([[1, 0, 0], [0.45, 0.55, 0]], [[0, 0, 1], [1, 0, 0]])
    assert decided_relations(probs)[1][0, 0, 1] == NNW
    assert decided_relations(probs, LinkThresholds(nnw=0.6))[1][0, 0, 1] == NONE
    assert decided_relations(probs, LinkThresholds(nnw=0.55))[1][0, 0, 1] == NNW  # at the threshold: a link


def test_thw_threshold_takes_the_likeliest_label_and_leaves_the_upper_triangle_alone():
    # Lower cell (1, 0): NONE 0.45, THW-A 0.3, THW-B 0.25; upper cell (0, 1): THW-B arg-max, P(NNW) 0.2.
    probs = probabilities([[1, 0, 0, 0], [0.1, 0.2, 0.1, 0.6]], [[0.45, 0, 0.3, 0.25], [1, 0, 0, 0]])
    confidences, relations = decided_relations(probs, LinkThresholds(thw=0.3))
    assert relations[0, 1, 0] == THW_OFFSET + 0 and confidences[0, 1, 0] == pytest.approx(0.3)
    assert relations[0, 0, 1] == THW_OFFSET + 1  # the arg-max is kept where no threshold is set
    assert decided_relations(probs, LinkThresholds(thw=0.35))[1][0, 1, 0] == NONE
    assert decided_relations(probs, LinkThresholds(nnw=0.3, thw=0.35))[1][0, 0, 1] == NONE  # P(NNW) 0.2 < 0.3


def test_lowering_a_threshold_only_adds_links():
    probs = torch.softmax(random_logits(7, 4, 9, 4), dim=-1)
    for high, low in [(0.6, 0.3), (0.9, 0.1)]:
        strict = decided_relations(probs, LinkThresholds(high, high))[1]
        loose = decided_relations(probs, LinkThresholds(low, low))[1]
        assert torch.all(loose[strict != NONE] == strict[strict != NONE])
        assert (loose != NONE).sum() >= (strict != NONE).sum()


def test_with_no_label_the_thw_threshold_reads_nothing():
    probs = torch.softmax(random_logits(3, 1, 4, 2), dim=-1)  # NONE and NNW only
    confidences, relations = decided_relations(probs, LinkThresholds(thw=0.1))
    assert torch.equal(relations, probs.max(dim=-1).indices)


@pytest.mark.parametrize("value", [0, 0.0, -0.1, 1.5, True, "0.5"])
def test_bad_thresholds_are_named(value):
    with pytest.raises(ValueError, match=r"nnw_threshold must be null \(the arg-max\) or a probability in \(0, 1\]"):
        check_link_threshold("nnw_threshold", value)


def test_good_thresholds_are_floats():
    assert check_link_threshold("thw_threshold", 1) == 1.0 and check_link_threshold("thw_threshold", None) is None
