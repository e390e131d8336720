"""The triplet hinges over cell representations (spacy_w2ner.nn.triplet): their values against a
naive reference, their gradients against finite differences."""
import numpy as np
import pytest
import torch

from spacy_w2ner.nn.triplet import MINING, distance, mean_violated, triplet_hinges


def random_case(seed, cells=9, width=4, anchors=3):
    """Representations and masks in which every anchor has a positive and a negative; anchor 0
    is its own (only) positive."""
    generator = np.random.default_rng(seed)
    representations = torch.tensor(generator.normal(size=(cells, width)) * 2, dtype=torch.float64)
    anchor_cells = generator.choice(cells, size=anchors, replace=False)
    positive = generator.random((anchors, cells)) < 0.3
    negative = (generator.random((anchors, cells)) < 0.5) & ~positive
    for a, cell in enumerate(anchor_cells):
        positive[a, cell], negative[a, cell] = False, False
        if not negative[a].any():
            negative[a, (cell + 1) % cells] = True
            positive[a, (cell + 1) % cells] = False
        if a == 0 or not positive[a].any():
            positive[a] = False
            positive[a, cell] = True
    return representations, torch.as_tensor(anchor_cells), torch.as_tensor(positive), torch.as_tensor(negative)


def reference_hinges(cells, anchors, positive, negative, margin, mining):
    """Triplet by triplet, in numpy."""
    x, positive, negative = cells.detach().numpy(), positive.numpy(), negative.numpy()
    hinges = []
    for a, anchor in enumerate(anchors.tolist()):
        negatives = x[negative[a]]
        if mining == "hard_negative":
            far = min(np.linalg.norm(x[anchor] - n) for n in negatives)
        else:
            far = np.linalg.norm(x[anchor] - negatives.mean(axis=0))
        if mining == "centroid":
            hinges.append(max(0.0, margin + np.linalg.norm(x[anchor] - x[positive[a]].mean(axis=0)) - far))
        else:
            hinges.extend(max(0.0, margin + np.linalg.norm(x[anchor] - x[p]) - far) for p in np.flatnonzero(positive[a]))
    return np.array(hinges)


@pytest.mark.parametrize("mining", MINING)
@pytest.mark.parametrize("seed", range(4))
def test_hinges_are_the_reference(mining, seed):
    case = random_case(seed)
    for margin in (0.5, 1.0, 4.0):
        hinges = triplet_hinges(*case, margin, mining)
        assert np.allclose(hinges.detach().numpy(), reference_hinges(*case, margin, mining), atol=1e-9)


@pytest.mark.parametrize("mining", MINING)
@pytest.mark.parametrize("seed", range(4))
def test_gradients_are_the_finite_differences(mining, seed):
    cells, anchors, positive, negative = random_case(seed)
    cells.requires_grad_(True)

    def loss(representations):
        return mean_violated(triplet_hinges(representations, anchors, positive, negative, 4.0, mining))

    assert loss(cells) > 0
    assert torch.autograd.gradcheck(loss, (cells,), eps=1e-6, atol=1e-5)


def test_centroids_by_hand():
    # Anchor at the origin; positives (1, 0) and (3, 0): centroid at 2; negatives (0, 1) and (0, 3): at 2.
    cells = torch.tensor([[0.0, 0.0], [1, 0], [3, 0], [0, 1], [0, 3]], dtype=torch.float64, requires_grad=True)
    positive = torch.tensor([[False, True, True, False, False]])
    negative = torch.tensor([[False, False, False, True, True]])
    hinges = triplet_hinges(cells, torch.tensor([0]), positive, negative, 1.0, "centroid")
    assert hinges.tolist() == pytest.approx([1.0])
    hinges.sum().backward()
    # d/dx of |x - p| - |x - n| at the origin: -(p - x)/2 + (n - x)/2 = (-1, 0) + (0, 1)
    assert cells.grad[0].tolist() == pytest.approx([-1.0, 1.0])
    assert cells.grad[1].tolist() == pytest.approx([0.5, 0.0]) and cells.grad[3].tolist() == pytest.approx([0.0, -0.5])
    hard = triplet_hinges(cells, torch.tensor([0]), positive, negative, 1.0, "hard_negative")
    assert hard.tolist() == pytest.approx([1 + 1 - 1, 1 + 3 - 1])  # the nearest negative, (0, 1), for each positive


def test_a_step_down_the_gradient_lowers_the_loss():
    for mining in MINING:
        cells, anchors, positive, negative = random_case(3)
        cells.requires_grad_(True)
        before = mean_violated(triplet_hinges(cells, anchors, positive, negative, 4.0, mining))
        before.backward()
        with torch.no_grad():
            after = mean_violated(triplet_hinges(cells - 0.01 * cells.grad, anchors, positive, negative, 4.0, mining))
        assert after < before


def test_an_anchor_that_is_its_own_positive_only_pushes_and_has_finite_gradients():
    cells = torch.tensor([[0.0, 0.0], [0.3, 0.0]], requires_grad=True)
    hinges = triplet_hinges(cells, torch.tensor([0]), torch.tensor([[True, False]]), torch.tensor([[False, True]]), 1.0, "centroid")
    assert hinges.item() == pytest.approx(1 - 0.3, abs=1e-5)
    hinges.sum().backward()
    assert torch.isfinite(cells.grad).all() and cells.grad[1, 0] < 0  # the negative is pushed away


def test_the_mean_is_over_the_violated_triplets():
    assert mean_violated(torch.tensor([0.0, 2.0, 4.0])).item() == 3.0
    assert mean_violated(torch.zeros(3)).item() == 0.0
    assert distance(torch.zeros(2), torch.tensor([3.0, 4.0])).item() == pytest.approx(5.0)


def test_an_unknown_mining_is_named():
    with pytest.raises(ValueError, match="triplet mining must be one of centroid, negative_centroid, hard_negative"):
        triplet_hinges(*random_case(0), 1.0, "semihard")


@pytest.mark.parametrize("mining", MINING)
def test_no_mining_keeps_a_difference_per_anchor_and_cell(mining):
    """The graph saves nothing of (anchors, cells, width), at most the masks or a difference per
    triplet: hard_negative over a 256-word window once kept 5 s and 1.7 GB of such differences
    for one grid batch."""
    cells, anchors, positive, negative = random_case(0, cells=400, width=32, anchors=20)
    cells.requires_grad_(True)
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t.numel()) or t, lambda t: t):
        mean_violated(triplet_hinges(cells, anchors, positive, negative, 4.0, mining)).backward()
    assert max(saved) <= max(20 * 400, int(positive.sum()) * 32) < 20 * 400 * 32
