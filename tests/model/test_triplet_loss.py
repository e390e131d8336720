"""The grid batch's triplet loss (spacy_w2ner.model.loss.grid_triplet_loss): off by default, its
gradient the finite differences of its value, padding never mined, scaled by its weight and its
batch's share of the step."""
import numpy as np
import pytest

from spacy_w2ner.entities import Entity
from spacy_w2ner.grid.segments import Segment
from spacy_w2ner.model.hyperparameters import triplet_settings
from spacy_w2ner.model.loss import grid_triplet_loss
from spacy_w2ner.model.types import TripletSettings

GOLD = [[Entity(0, (0, 1, 4)), Entity(0, (3, 5))], [Entity(1, (1, 2))]]
SEGMENTS = [Segment(0, 0, 6, 0, 6), Segment(1, 0, 4, 0, 4)]
ON = TripletSettings(weight=1.0, window=3, margin=4.0, mining="centroid")


def random_logits(longest=6, relations=4, seed=0, dtype="float64"):
    return np.random.default_rng(seed).normal(size=(len(SEGMENTS), longest, longest, relations)).astype(dtype)


def test_off_by_default_and_without_entities():
    logits = random_logits()
    assert grid_triplet_loss(logits, SEGMENTS, GOLD, TripletSettings(), 52) == (0.0, None)
    assert grid_triplet_loss(logits, SEGMENTS, GOLD, None, 52) == (0.0, None)
    assert grid_triplet_loss(logits, SEGMENTS, [[], []], ON, 52) == (0.0, None)


@pytest.mark.parametrize("mining", ["centroid", "negative_centroid", "hard_negative"])
def test_the_gradient_is_the_finite_differences_of_the_loss(mining):
    settings = TripletSettings(1.0, 3, 4.0, mining)
    logits = random_logits(seed=1)
    loss, gradient = grid_triplet_loss(logits, SEGMENTS, GOLD, settings, 52)
    assert loss > 0 and gradient.shape == logits.shape
    step = 1e-6
    for index in np.ndindex(*logits.shape[:3]):
        for relation in range(logits.shape[3]):
            cell = index + (relation,)
            shifted = [logits.copy(), logits.copy()]
            shifted[0][cell] += step
            shifted[1][cell] -= step
            up, down = (grid_triplet_loss(s, SEGMENTS, GOLD, settings, 52)[0] for s in shifted)
            assert gradient[cell] == pytest.approx((up - down) / (2 * step), abs=1e-6), cell


def test_only_real_cells_above_the_diagonal_are_mined():
    logits = random_logits(longest=9, seed=2)
    _, gradient = grid_triplet_loss(logits, SEGMENTS, GOLD, ON, 52)
    touched = np.abs(gradient).sum(axis=-1) > 0
    assert not np.tril(touched[0]).any() and not touched[0, 6:].any() and not touched[0, :, 6:].any()
    assert not touched[1, 4:].any() and not touched[1, :, 4:].any()
    padded = random_logits(longest=9, seed=3)
    padded[:, :6, :6] = random_logits(seed=2)[:, :6, :6]
    unpadded = random_logits(seed=2)
    unpadded[1, 4:] = unpadded[1, :, 4:] = 0  # segment 1 has 4 words: what lies beyond is padding
    padded[1, :4, :4] = unpadded[1, :4, :4]
    loss, gradient = grid_triplet_loss(padded, SEGMENTS, GOLD, ON, 52)
    same_loss, same_gradient = grid_triplet_loss(unpadded, SEGMENTS, GOLD, ON, 52)
    assert loss == pytest.approx(same_loss)
    assert np.allclose(gradient[:, :6, :6], same_gradient)


def test_scaled_by_its_weight_and_its_share_of_the_steps_cells():
    logits = random_logits(seed=4)
    loss, gradient = grid_triplet_loss(logits, SEGMENTS, GOLD, ON, 52)  # 36 + 16 cells: the whole step
    half, half_gradient = grid_triplet_loss(logits, SEGMENTS, GOLD, ON, 104)
    double, _ = grid_triplet_loss(logits, SEGMENTS, GOLD, TripletSettings(2.0, 3, 4.0, "centroid"), 52)
    assert half == pytest.approx(loss / 2) and np.allclose(half_gradient, gradient / 2)
    assert double == pytest.approx(2 * loss)


def test_float32_logits_give_a_float32_gradient():
    logits = random_logits(dtype="float32")
    loss, gradient = grid_triplet_loss(logits, SEGMENTS, GOLD, ON, 52)
    assert gradient.dtype == np.float32 and np.isfinite(gradient).all() and loss > 0


@pytest.mark.parametrize(
    "settings, message",
    [
        ((-1.0, 25, 1.0, "centroid"), "triplet_weight must be a number >= 0"),
        ((1.0, -2, 1.0, "centroid"), "triplet_window must be an int >= 0"),
        ((1.0, 2.5, 1.0, "centroid"), "triplet_window must be an int >= 0"),
        ((1.0, 25, 0.0, "centroid"), "triplet_margin must be a positive number"),
        ((1.0, 25, 1.0, "grid_centroid"), "triplet_mining must be one of centroid, negative_centroid, hard_negative"),
    ],
)
def test_bad_settings_are_named(settings, message):
    with pytest.raises(ValueError, match=message):
        triplet_settings(*settings)


def test_good_settings():
    assert triplet_settings(1, 20, 1, "hard_negative") == TripletSettings(1.0, 20, 1.0, "hard_negative")
    assert not TripletSettings().is_on and TripletSettings(weight=0.5).is_on
