"""The training step a grid batch at a time (``GridTrainingStep``, issue 48): the gradients of
Thinc's single backward pass, each batch's backward before the next batch's forward, and float16
loss scaling unscaled once per step however many grid batches (issue 53)."""
import numpy as np
import pytest
import spacy
import torch
from spacy.tokens import Doc
from spacy.training import Example

from spacy_w2ner import set_entities
from spacy_w2ner.grid.segments import segment_docs

from ..conftest import SMALL_W2NER_CONFIG, make_examples

# Tiny grid batches: the four sentences (8-9 words, 64-81 cells) go in several batches.
SPLIT_CELLS = 100
WHOLE_CELLS = 10_000


def _pipeline(max_grid_cells: int, mixed_precision: bool = False, max_window: int = 256, dropout=None, max_grid_padding=None):
    spacy.util.fix_random_seed(0)
    nlp = spacy.blank("en")
    model = {**SMALL_W2NER_CONFIG["model"], "max_grid_cells": max_grid_cells, "max_window": max_window, "window_overlap": 2,
             "max_grid_padding": max_grid_padding}  # fmt: skip
    if dropout is not None:
        model.update(input_dropout=dropout, conv_dropout=dropout, output_dropout=dropout)
    if mixed_precision:
        model.update(mixed_precision=True, grad_scaler_config={"enabled": True})
    nlp.add_pipe("w2ner", config={**SMALL_W2NER_CONFIG, "model": model})
    examples = make_examples(nlp)
    nlp.initialize(lambda: examples)
    return nlp, examples


def _grid_module(nlp):
    return nlp.get_pipe("w2ner").model.get_ref("grid_scorer").layers[0].shims[0]._model


def _grid_shim(nlp):
    return nlp.get_pipe("w2ner").model.get_ref("grid_scorer").layers[0].shims[0]


def _gradients(nlp) -> list:
    """The grid network's parameter gradients and tok2vec's, in a fixed order, on the host."""
    grads = [p.grad.detach().float().cpu().numpy() for p in _grid_module(nlp).parameters()]
    tok2vec = nlp.get_pipe("w2ner").model.get_ref("tok2vec")
    for node in tok2vec.walk():
        grads.extend(node.ops.to_numpy(node.get_grad(name)) for name in node.param_names if node.has_grad(name))
    return grads


def _thinc_single_backward(nlp, examples):
    """The gradients of Thinc's begin_update (every grid batch's activations held) and get_loss."""
    pipe = nlp.get_pipe("w2ner")
    spacy.util.fix_random_seed(1)
    outputs, backprop = pipe.model.begin_update([eg.predicted for eg in examples])
    loss, d_logits = pipe.get_loss(examples, outputs)
    backprop(d_logits)
    return loss, _gradients(nlp)


def _step_by_batch(nlp, examples):
    spacy.util.fix_random_seed(1)
    losses = nlp.get_pipe("w2ner").update(examples)
    return losses["w2ner"], _gradients(nlp)


def _assert_close(left, right, tolerance=1e-5):
    assert len(left) == len(right)
    for a, b in zip(left, right):
        np.testing.assert_allclose(a, b, rtol=tolerance, atol=tolerance * max(1.0, float(np.abs(b).max())))


@pytest.mark.parametrize("max_grid_cells", [SPLIT_CELLS, WHOLE_CELLS])
def test_a_step_by_grid_batch_gives_the_single_backward_passes_gradients(max_grid_cells):
    nlp, examples = _pipeline(max_grid_cells)
    reference_nlp, reference_examples = _pipeline(max_grid_cells)
    expected_loss, expected = _thinc_single_backward(reference_nlp, reference_examples)
    loss, found = _step_by_batch(nlp, examples)
    assert loss == pytest.approx(expected_loss, rel=1e-6)
    _assert_close(found, expected)


def test_windows_of_an_unsegmented_document_add_their_gradients_as_before():
    """A document longer than max_window, without sentences: overlapping windows in batches of
    their own, their word-vector gradients added where they overlap."""
    data = [(" ".join(text for text, _ in [("She had pain in her knees and ankles .", 0)] * 3), [("SYM", (2, 3, 4, 5))])]

    def build():
        nlp, _ = _pipeline(SPLIT_CELLS, max_window=8)
        return nlp, make_examples(nlp, data)

    reference_nlp, reference_examples = build()
    nlp, examples = build()
    assert len(segment_docs([examples[0].predicted], 8, 2)) > 2
    expected_loss, expected = _thinc_single_backward(reference_nlp, reference_examples)
    loss, found = _step_by_batch(nlp, examples)
    assert loss == pytest.approx(expected_loss, rel=1e-6)
    _assert_close(found, expected)


def test_unlimited_grid_padding_makes_one_batch_with_the_same_loss_gradients_and_predictions():
    """max_grid_padding (a GPU's default is no limit): eight sentences of 12 words and one of 39
    in one grid batch instead of two, with the same loss and gradients (dropout off) and
    predictions."""
    short = "She had a dull ache in her lower back and knees ."
    long = " ".join([short] * 3) + " Severe pain ."
    data = [(short, [("SYM", (4,))])] * 8 + [(long, [("SYM", (4,)), ("SYM", (37,))])]
    runs = {}
    for padding in (1.25, 1e9):
        nlp, _ = _pipeline(100_000, dropout=0.0, max_grid_padding=padding)
        examples = make_examples(nlp, data)
        calls = []
        _grid_module(nlp).register_forward_hook(lambda *_: calls.append(1))
        predicted = [[(s.start, s.end, s.label_) for s in doc.spans["w2ner"]] for doc in nlp.pipe([short] * 8 + [long])]
        scores = [list(doc.spans["w2ner"].attrs["scores"]) for doc in nlp.pipe([short] * 8 + [long])]
        calls.clear()
        loss, gradients = _step_by_batch(nlp, examples)
        runs[padding] = (len(calls), loss, gradients, predicted, scores)
    (cpu_batches, cpu_loss, cpu_grads, cpu_found, cpu_scores), (batches, loss, grads, found, scores) = runs.values()
    assert cpu_batches == 2 and batches == 1
    assert loss == pytest.approx(cpu_loss, rel=1e-6)
    _assert_close(grads, cpu_grads)
    assert found == cpu_found
    np.testing.assert_allclose(sum(scores, []), sum(cpu_scores, []), atol=1e-5)


def test_each_grid_batchs_backward_pass_runs_before_the_next_batch_is_scored():
    nlp, examples = _pipeline(SPLIT_CELLS)
    module = _grid_module(nlp)
    events = []
    module.register_forward_hook(lambda *_: events.append("forward"))
    module.register_full_backward_hook(lambda *_: events.append("backward"))
    nlp.get_pipe("w2ner").update(examples)
    assert len(events) >= 4 and events == ["forward", "backward"] * (len(events) // 2)


def test_training_grids_follow_the_gold_sentences_when_the_predicted_doc_has_none():
    """spaCy's corpus makes the predicted Doc from the text (no sentence boundaries): the gold
    Doc's sentences still cut the training grids, so no grid spans a whole document."""
    nlp, _ = _pipeline(WHOLE_CELLS)
    words = "pain in knees . no fever . rash on arms .".split()
    reference = Doc(nlp.vocab, words=words, sent_starts=[True, False, False, False, True, False, False, True, False, False, False])
    set_entities(reference, [("SYM", (0, 1, 2), None), ("SYM", (7, 8, 9), None)])
    example = Example(Doc(nlp.vocab, words=words), reference)
    module = _grid_module(nlp)
    shapes = []
    module.register_forward_hook(lambda _module, inputs, _output: shapes.append(tuple(inputs[1].tolist())))
    nlp.get_pipe("w2ner").update([example])
    assert sorted(length for batch in shapes for length in batch) == [3, 4, 4]


def _scaled_by_hand(nlp):
    """Thinc's scaler multiplies CUDA tensors only: on a CPU the test scales by hand."""
    scaler = _grid_shim(nlp)._grad_scaler
    scaler.scale = lambda tensors, inplace=False: [t.mul_(scaler._scale) for t in tensors] if isinstance(tensors, list) else tensors.mul_(scaler._scale)
    return scaler


@pytest.mark.parametrize("max_grid_cells,n_batches", [(180, 2), (150, 3)])
def test_float16_loss_scaling_unscales_a_steps_gradients_once_however_many_grid_batches(max_grid_cells, n_batches):
    """Dropout off, so that batching changes nothing but the number of backward calls: the loss
    scaled step in 2 or 3 grid batches has the gradients of the unscaled step in one."""
    expected_nlp, expected_examples = _pipeline(WHOLE_CELLS, dropout=0.0)
    _step_by_batch(expected_nlp, expected_examples)
    nlp, examples = _pipeline(max_grid_cells, mixed_precision=True, dropout=0.0)
    scaler = _scaled_by_hand(nlp)
    module = _grid_module(nlp)
    calls = []
    module.register_forward_hook(lambda *_: calls.append(1))
    _step_by_batch(nlp, examples)
    assert len(calls) == n_batches
    assert _grid_shim(nlp).unscale_gradients() is False and float(scaler._scale) == 2.0**16
    _assert_close(_gradients(nlp), _gradients(expected_nlp), 1e-4)


def test_an_overflow_in_one_grid_batch_skips_the_whole_step_and_lowers_the_scale_once(monkeypatch):
    from spacy_w2ner.model.objective import TrainingObjective

    nlp, examples = _pipeline(SPLIT_CELLS, mixed_precision=True)
    scaler = _scaled_by_hand(nlp)
    pipe = nlp.get_pipe("w2ner")
    batch_gradient = TrainingObjective.batch_gradient
    calls = []

    def overflow_in_the_second(objective, segments, logits, n_cells):
        gradient = batch_gradient(objective, segments, logits, n_cells)
        calls.append(len(segments))
        if len(calls) == 2:
            gradient[0, 0, 0, 0] = np.inf
        return gradient

    monkeypatch.setattr(TrainingObjective, "batch_gradient", overflow_in_the_second)
    module = _grid_module(nlp)
    before = [p.detach().clone() for p in module.parameters()]
    tok2vec = pipe.model.get_ref("tok2vec")
    tok2vec_before = [np.array(node.get_param(n)) for node in tok2vec.walk() for n in node.param_names if node.has_param(n)]
    optimizer = nlp.create_optimizer()
    scale = float(scaler._scale)
    pipe.update(examples, sgd=optimizer)
    assert len(calls) >= 3
    assert all(torch.equal(a, b) for a, b in zip(before, module.parameters()))
    tok2vec_after = [np.array(node.get_param(n)) for node in tok2vec.walk() for n in node.param_names if node.has_param(n)]
    assert all(np.array_equal(a, b) for a, b in zip(tok2vec_before, tok2vec_after))
    assert float(scaler._scale) == scale * 0.5
    monkeypatch.setattr(TrainingObjective, "batch_gradient", batch_gradient)
    pipe.update(examples, sgd=optimizer)  # the next step trains again
    assert not all(torch.equal(a, b) for a, b in zip(before, module.parameters()))


@pytest.mark.gpu
def test_float16_loss_scaling_on_cuda_gives_one_batchs_gradients_in_three():
    """Issue 53 on a GPU: float16 autocast and Thinc's scaler (65,536); the step in 3 grid batches
    has the float32 one-batch step's gradients to float16's precision (the scale divided 3 times
    into the first batch's gradients, before the fix, was off by 4e9)."""
    spacy.require_gpu(0)
    try:
        expected_nlp, expected_examples = _pipeline(WHOLE_CELLS, dropout=0.0)
        _step_by_batch(expected_nlp, expected_examples)
        nlp, examples = _pipeline(150, mixed_precision=True, dropout=0.0)
        calls = []
        _grid_module(nlp).register_forward_hook(lambda *_: calls.append(1))
        _step_by_batch(nlp, examples)
        assert len(calls) == 3 and _grid_shim(nlp).unscale_gradients() is False
        found, expected = _gradients(nlp), _gradients(expected_nlp)
    finally:
        spacy.require_cpu()
    for a, b in zip(found, expected):
        assert np.abs(a - b).max() <= 2e-2 * max(1e-3, float(np.abs(b).max()))
