"""GPU code paths that can be checked on a CPU: the grad scaler setting and mixed precision."""
import copy

import numpy as np
import pytest
import spacy

from spacy_w2ner.model.grid_scorer import grad_scaler_settings
from spacy_w2ner.model.predictions import grid_probabilities

from ..conftest import SMALL_W2NER_CONFIG, make_examples


def test_grad_scaler_is_on_for_mixed_precision_on_cuda():
    # Without loss scaling, float16 gradients of small losses underflow to zero on a GPU.
    assert grad_scaler_settings({}, True, "cuda") == {"enabled": True}


@pytest.mark.parametrize("mixed_precision,device", [(True, "cpu"), (False, "cuda"), (False, "cpu")])
def test_grad_scaler_is_off_without_mixed_precision_or_cuda(mixed_precision, device):
    assert grad_scaler_settings({}, mixed_precision, device) == {"enabled": False}


def test_grad_scaler_config_wins():
    config = {"enabled": False, "init_scale": 1024.0}
    assert grad_scaler_settings(config, True, "cuda") == config
    assert grad_scaler_settings({"init_scale": 8.0}, True, "cuda") == {"init_scale": 8.0, "enabled": True}
    assert config == {"enabled": False, "init_scale": 1024.0}  # not modified


def _trained_three_steps(mixed_precision):
    config = copy.deepcopy(SMALL_W2NER_CONFIG)
    config["model"]["mixed_precision"] = mixed_precision
    nlp = spacy.blank("en")
    nlp.add_pipe("w2ner", config=config)
    examples = make_examples(nlp)
    spacy.util.fix_random_seed(0)
    optimizer = nlp.initialize(lambda: examples)
    losses = [nlp.update(examples, sgd=optimizer, losses={})["w2ner"] for _ in range(3)]
    return nlp, losses


def test_mixed_precision_config_trains_on_a_cpu():
    # The GPU config's mixed_precision = true must not break a CPU run (the scaler only
    # works on CUDA tensors; before, enabling it would raise on the first update). On a CPU
    # autocast does nothing: it trains and predicts exactly as in float32.
    mixed, mixed_losses = _trained_three_steps(True)
    plain, plain_losses = _trained_three_steps(False)
    assert mixed_losses == plain_losses and mixed_losses[-1] > 0
    assert np.array_equal(_sentence_grid(mixed), _sentence_grid(plain))


def _sentence_grid(nlp):
    """Every relation's probability on the grid of one sentence."""
    [(_, probabilities)] = grid_probabilities(nlp.get_pipe("w2ner").model, [nlp.make_doc("She had pain in her knees .")])
    return probabilities


def test_dilated_convolutions_get_contiguous_input_in_the_devices_layout():
    # A permuted (channels-last) view sent CUDA's dilated depthwise convolution down a path
    # ~50x slower (bench/results/gpu-h100-2026-11-23/profile-fp32-before-conv-fix.txt), so a GPU
    # gets channels first; oneDNN's is faster channels last (bench/README.md, "Training speed").
    import torch

    from spacy_w2ner.nn.network import DilatedConvolutions, convolution_layout

    assert convolution_layout(torch.device("cuda", 0)) == torch.contiguous_format
    assert convolution_layout(torch.device("cpu")) == torch.channels_last
    convolutions = DilatedConvolutions(8, [1, 2, 3])
    seen = []
    for conv in convolutions.convs:
        conv.register_forward_pre_hook(
            lambda module, args: seen.append((args[0].is_contiguous(memory_format=torch.channels_last),
                                              args[0].is_contiguous()))
        )  # fmt: skip
    grid = torch.randn(2, 5, 5, 8)
    output = convolutions(grid, torch.ones(2, 5, 5, dtype=torch.bool))
    assert output.shape == (2, 5, 5, 24)
    assert seen == [(True, False)] * 3  # channels last in memory, not a channels-first copy


def test_lstm_weights_stay_in_one_block_after_an_optimizer_step():
    # Thinc's optimizer gives torch parameters new storage; the network re-flattens them
    # before the LSTM runs (cuDNN otherwise copies them on every call).
    import torch

    from spacy_w2ner.nn.network import GridNetwork

    network = GridNetwork(
        8, 4, lstm_size=8, dist_emb_size=4, region_emb_size=4, conv_size=8, dilations=[1, 2],
        biaffine_size=8, ffnn_size=8, input_dropout=0.0, conv_dropout=0.0, output_dropout=0.0,
    )  # fmt: skip
    calls = []
    original = network.lstm.flatten_parameters
    network.lstm.flatten_parameters = lambda: calls.append(1) or original()
    for parameter in network.lstm.parameters():
        parameter.data = parameter.data.clone()  # what Thinc's finish_update does
    network.lstm_packed(torch.randn(2, 3, 8), torch.tensor([3, 2]), 3)  # a GPU's path (a CPU runs lstm_by_direction)
    assert calls == [1]


def _predictions(nlp, texts, batch_size=128):
    from spacy_w2ner import get_entities

    return [[(e.label, e.tokens, round(e.score, 5)) for e in get_entities(doc)] for doc in nlp.pipe(texts, batch_size=batch_size)]


def test_grids_padded_to_a_multiple_of_8_predict_and_train_the_same(trained_nlp, monkeypatch):
    # On a GPU grid sides are rounded up to a multiple of 8 (fewer distinct shapes); the
    # padding is masked, so entities, scores and the loss do not change.
    import torch

    from spacy_w2ner.model import batches as grid_batches

    from ..conftest import TRAIN_DATA

    texts = [text for text, _ in TRAIN_DATA] + ["Pain .", "Severe pain in the lower back and legs after a month ."]
    examples = make_examples(trained_nlp)
    pipe = trained_nlp.get_pipe("w2ner")
    network = pipe.model.get_ref("grid_scorer").layers[0].shims[0]._model
    for module in network.modules():  # no dropout: the two passes must see the same network
        if isinstance(module, torch.nn.Dropout):
            monkeypatch.setattr(module, "p", 0.0)
    monkeypatch.setattr(network.grid_builder, "dropout", 0.0)
    outputs, _ = pipe.model.begin_update([example.predicted for example in examples])
    unpadded = (_predictions(trained_nlp, texts), pipe.get_loss(examples, outputs)[0])
    monkeypatch.setattr(grid_batches, "grid_length_multiple", lambda ops: 8)
    outputs, _ = pipe.model.begin_update([example.predicted for example in examples])
    assert all(batch.logits.shape[1] % 8 == 0 for batch in outputs)
    padded = (_predictions(trained_nlp, texts), pipe.get_loss(examples, outputs)[0])
    assert padded[0] == unpadded[0] and any(padded[0])
    assert abs(padded[1] - unpadded[1]) < 1e-6


@pytest.mark.gpu
@pytest.mark.parametrize("grid_graphs,overlap", [(False, False), (True, False), (True, True)])
def test_predictions_on_the_gpu_equal_the_cpus(trained_nlp, tmp_path, grid_graphs, overlap):
    """The same saved pipeline finds the same entities on a CUDA GPU as on the CPU (scores within
    float rounding), with the grid network's passes eager or replayed from CUDA graphs, and
    with batches of 2 overlapped (``W2NER.overlap_batches``)."""
    import spacy

    from ..conftest import TRAIN_DATA

    texts = [text for text, _ in TRAIN_DATA] + ["Severe pain in the lower back and legs after a month ."]
    trained_nlp.to_disk(tmp_path / "nlp")
    on_cpu = _predictions(trained_nlp, texts)
    spacy.require_gpu(0)
    try:
        nlp = spacy.load(tmp_path / "nlp")
        grid_scorer = nlp.get_pipe("w2ner").model.get_ref("grid_scorer")
        grid_scorer.attrs["cuda_graphs"] = grid_graphs
        nlp.get_pipe("w2ner").overlap_batches = overlap
        on_gpu = _predictions(nlp, texts, batch_size=2 if overlap else 128)
        graphs = grid_scorer.layers[0].shims[0].cuda_graphs
        assert graphs is None if not grid_graphs else (len(graphs.graphs) > 0 and graphs.failed is None)
    finally:
        spacy.require_cpu()
    assert [[e[:2] for e in doc] for doc in on_gpu] == [[e[:2] for e in doc] for doc in on_cpu] and any(on_cpu)
    assert all(abs(g[2] - c[2]) < 1e-3 for gd, cd in zip(on_gpu, on_cpu) for g, c in zip(gd, cd))
