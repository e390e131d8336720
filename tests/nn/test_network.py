"""The torch GridNetwork of spacy_w2ner.network."""
import copy

import torch
from torch.nn import functional as F

from spacy_w2ner.nn.network import (
    lstm_by_direction,
    N_DISTANCE_BUCKETS,
    REGION_LOWER,
    REGION_PAD,
    REGION_UPPER,
    DilatedConvolutions,
    GridBuilder,
    GridNetwork,
    distance_buckets,
    region_ids,
    saved_bytes_per_cell,
    weights_in_one_block,
)

INPUT_SIZE = 12
N_CLASSES = 5

SMALL = dict(
    lstm_size=16,
    dist_emb_size=6,
    region_emb_size=4,
    conv_size=8,
    dilations=(1, 2, 3),
    biaffine_size=10,
    ffnn_size=12,
    input_dropout=0.5,
    conv_dropout=0.5,
    output_dropout=0.33,
)


def make_network(seed=0, **overrides):
    torch.manual_seed(seed)
    return GridNetwork(INPUT_SIZE, N_CLASSES, **{**SMALL, **overrides})


def grid_mask_for(lengths, length):
    positions = torch.arange(length)
    word_mask = positions[None, :] < torch.as_tensor(lengths)[:, None]
    return word_mask[:, :, None] & word_mask[:, None, :]


def test_output_shape_and_dtype():
    network = make_network().eval()
    vectors = torch.randn(3, 7, INPUT_SIZE)
    lengths = torch.tensor([7, 4, 1])
    with torch.no_grad():
        logits = network(vectors, lengths)
    assert logits.shape == (3, 7, 7, N_CLASSES)
    assert logits.dtype == torch.float32
    assert torch.isfinite(logits).all()


def test_padding_independence_in_eval_mode():
    network = make_network().eval()
    torch.manual_seed(1)
    sentence = torch.randn(5, INPUT_SIZE)
    other = torch.randn(11, INPUT_SIZE)
    with torch.no_grad():
        alone = network(sentence[None], torch.tensor([5]))[0]
        for position in (0, 1):
            batch = torch.zeros(2, 11, INPUT_SIZE)
            batch[position, :5] = sentence
            batch[1 - position] = other
            lengths = torch.tensor([5, 11]) if position == 0 else torch.tensor([11, 5])
            padded = network(batch, lengths)[position]
            assert torch.allclose(padded[:5, :5], alone, atol=1e-5)
        # Garbage in the padding does not leak either.
        noisy = torch.randn(1, 9, INPUT_SIZE) * 100
        noisy[0, :5] = sentence
        assert torch.allclose(network(noisy, torch.tensor([5]))[0, :5, :5], alone, atol=1e-5)


def test_gradients_reach_every_parameter():
    network = make_network().train()
    torch.manual_seed(2)
    vectors = torch.randn(2, 6, INPUT_SIZE)
    lengths = torch.tensor([6, 3])
    logits = network(vectors, lengths)
    mask = grid_mask_for(lengths, 6)[..., None].float()
    loss = (logits * torch.randn_like(logits) * mask).sum()
    loss.backward()
    total = 0.0
    for name, parameter in network.named_parameters():
        if not parameter.requires_grad:
            continue
        assert parameter.grad is not None, name
        assert torch.isfinite(parameter.grad).all(), name
        total += parameter.grad.abs().sum().item()
    assert total > 0


def test_gradients_nonzero_for_every_parameter_once_biaffine_is_nonzero():
    # The biaffine tensor starts at zero (so head/tail get no gradient on the very
    # first step); with a nonzero one, every parameter gets some gradient.
    network = make_network(input_dropout=0.0, conv_dropout=0.0, output_dropout=0.0).train()
    with torch.no_grad():
        network.co_predictor.biaffine.normal_()
    torch.manual_seed(3)
    vectors = torch.randn(2, 6, INPUT_SIZE)
    lengths = torch.tensor([6, 3])
    logits = network(vectors, lengths)
    mask = grid_mask_for(lengths, 6)[..., None].float()
    (logits * torch.randn_like(logits) * mask).sum().backward()
    for name, parameter in network.named_parameters():
        assert parameter.grad is not None, name
        assert torch.isfinite(parameter.grad).all(), name
        assert parameter.grad.abs().sum() > 0, name


def naive_grid(builder: GridBuilder, words: torch.Tensor, grid_mask: torch.Tensor) -> torch.Tensor:
    """The paper's grid, cell by cell: concat(CLN(h_i, h_j), dist, region) -> linear -> GELU."""
    batch, length, hidden = words.shape
    buckets = distance_buckets(length)
    regions = region_ids(grid_mask)
    weight = torch.cat(
        [builder.project_cln.weight, builder.project_distance.weight, builder.project_region.weight],
        dim=1,
    )
    bias = builder.project_cln.bias
    out = torch.zeros(batch, length, length, weight.shape[0])
    for b in range(batch):
        for i in range(length):
            gamma = builder.gamma(words[b, i])
            beta = builder.beta(words[b, i])
            for j in range(length):
                normed = F.layer_norm(words[b, j], (hidden,))
                cln = gamma * normed + beta
                x = torch.cat(
                    [
                        cln,
                        builder.distance.weight[buckets[i, j]],
                        builder.region.weight[regions[b, i, j]],
                    ]
                )
                value = F.gelu(weight @ x + bias)
                out[b, i, j] = value if grid_mask[b, i, j] else torch.zeros_like(value)
    return out


def test_factorised_grid_builder_equals_naive_computation():
    torch.manual_seed(4)
    builder = GridBuilder(hidden=8, dist_size=5, region_size=3, channels=7, dropout=0.5)
    with torch.no_grad():
        for linear in (builder.gamma, builder.beta):
            linear.weight.normal_()
            linear.bias.normal_()
    builder.eval()
    lengths = torch.tensor([6, 4, 1])
    words = torch.randn(3, 6, 8)
    grid_mask = grid_mask_for(lengths, 6)
    with torch.no_grad():
        fast = builder(words, grid_mask)
        slow = naive_grid(builder, words, grid_mask)
    assert fast.shape == (3, 6, 6, 7)
    assert slow.abs().max() > 0.1  # not trivially zero
    assert torch.allclose(fast, slow, atol=1e-5)


def test_distance_buckets():
    length = 1100
    buckets = distance_buckets(length)
    assert buckets.shape == (length, length)
    assert buckets.min() >= 0 and buckets.max() < N_DISTANCE_BUCKETS
    assert (buckets.diagonal() == 0).all()
    # Rows i, columns j: bucket of i - j.
    assert buckets[1, 0] == 1
    assert buckets[2, 0] == 2 and buckets[3, 0] == 2
    assert buckets[4, 0] == 3 and buckets[7, 0] == 3
    assert buckets[8, 0] == 4 and buckets[15, 0] == 4
    assert buckets[16, 0] == 5
    assert buckets[255, 0] == 8
    assert buckets[256, 0] == 9 and buckets[511, 0] == 9
    assert buckets[512, 0] == 9 and buckets[1099, 0] == 9
    assert buckets[0, 1] == 11
    assert buckets[0, 2] == 12 and buckets[0, 3] == 12
    assert buckets[0, 4] == 13 and buckets[0, 7] == 13
    assert buckets[0, 1099] == 19
    # Every cell against the closed form.
    positions = torch.arange(length)
    distance = positions[:, None] - positions[None, :]
    magnitude = distance.abs()
    bit_length = torch.zeros_like(magnitude)
    remaining = magnitude.clone()
    while (remaining > 0).any():
        bit_length += (remaining > 0).long()
        remaining = remaining // 2
    expected = bit_length.clamp(max=9) + 10 * (distance < 0).long()
    assert torch.equal(buckets, expected)
    # Only depends on i - j, so a prefix of a longer grid is the shorter grid.
    assert torch.equal(distance_buckets(7), buckets[:7, :7])


def test_region_ids():
    grid_mask = grid_mask_for(torch.tensor([4, 2]), 4)
    ids = region_ids(grid_mask)
    assert ids.shape == (2, 4, 4)
    for b, n in enumerate((4, 2)):
        for i in range(4):
            for j in range(4):
                if i >= n or j >= n:
                    expected = REGION_PAD
                elif i < j:
                    expected = REGION_UPPER
                else:
                    expected = REGION_LOWER
                assert ids[b, i, j] == expected, (b, i, j)
    assert (REGION_PAD, REGION_UPPER, REGION_LOWER) == (0, 1, 2)


def test_dropout_in_train_mode_and_determinism_in_eval_mode():
    network = make_network()
    torch.manual_seed(5)
    vectors = torch.randn(2, 6, INPUT_SIZE)
    lengths = torch.tensor([6, 4])
    network.train()
    with torch.no_grad():
        first = network(vectors, lengths)
        second = network(vectors, lengths)
    assert not torch.allclose(first, second)
    network.eval()
    with torch.no_grad():
        torch.manual_seed(6)
        a = network(vectors, lengths)
        torch.manual_seed(7)
        b = network(vectors, lengths)
    assert torch.equal(a, b)


def test_predicting_in_row_blocks_equals_one_pass(monkeypatch):
    """Without gradients, big grids are built a block of rows at a time: same logits."""
    from spacy_w2ner.nn import network as network_module

    network = make_network().eval()
    vectors = torch.randn(2, 40, INPUT_SIZE)
    lengths = torch.tensor([40, 23])
    with torch.no_grad():
        one_pass = network(vectors, lengths)
        monkeypatch.setattr(network_module, "PREDICT_BLOCK_CELLS", 2 * 40 * 7)  # 7 rows per block
        assert len(network_module.row_blocks(2, 40, network_module.PREDICT_BLOCK_CELLS)) == 6
        blocked = network(vectors, lengths)
    assert torch.allclose(one_pass, blocked, atol=1e-5)
    # With gradients recorded it is always one block.
    assert network_module.row_blocks(2, 40, 1) == [slice(0, 40)]


def test_a_network_with_an_int8_lstm_predicts_close_to_float32():
    """torch's dynamic int8 LSTM (CPU inference) has no flatten_parameters: the network runs with it."""
    network = make_network().eval()
    vectors = torch.randn(2, 7, INPUT_SIZE)
    lengths = torch.tensor([7, 4])
    quantized = torch.ao.quantization.quantize_dynamic(network, {"lstm"}, dtype=torch.qint8)
    assert not hasattr(quantized.lstm, "flatten_parameters")
    with torch.no_grad():
        expected, found = network(vectors, lengths), quantized(vectors, lengths)
    assert found.shape == expected.shape
    assert torch.allclose(found, expected, atol=0.1) and not torch.equal(found, expected)


def test_lstm_by_direction_equals_the_packed_lstm():
    """A CPU runs each direction of the BiLSTM over the padded batch (oneDNN's kernel) instead
    of a packed sequence: the same outputs, zeros at padding."""
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(16, 8, batch_first=True, bidirectional=True)
    vectors = torch.randn(5, 9, 16)
    lengths = torch.tensor([9, 1, 4, 7, 2])
    packed = torch.nn.utils.rnn.pack_padded_sequence(vectors, lengths, batch_first=True, enforce_sorted=False)
    with torch.no_grad():
        expected, _ = torch.nn.utils.rnn.pad_packed_sequence(lstm(packed)[0], batch_first=True, total_length=9)
        got = lstm_by_direction(lstm, vectors, lengths)
    assert got.shape == expected.shape == (5, 9, 16)
    assert torch.allclose(got, expected, atol=1e-6)
    assert (got[1, 1:] == 0).all() and (got[4, 2:] == 0).all()


def test_lstm_by_direction_has_the_packed_lstms_gradients():
    """Training on a CPU runs the BiLSTM by direction too: the gradients of the inputs and of
    every weight are the packed sequence's (padding's outputs are zeroed, so nothing flows back
    through them)."""
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(16, 8, batch_first=True, bidirectional=True)
    vectors = torch.randn(5, 9, 16, requires_grad=True)
    lengths = torch.tensor([9, 1, 4, 7, 2])
    upstream = torch.randn(5, 9, 16)

    def gradients(outputs):
        return torch.autograd.grad((outputs * upstream).sum(), [vectors, *lstm.parameters()])

    packed = torch.nn.utils.rnn.pack_padded_sequence(vectors, lengths, batch_first=True, enforce_sorted=False)
    expected = gradients(torch.nn.utils.rnn.pad_packed_sequence(lstm(packed)[0], batch_first=True, total_length=9)[0])
    got = gradients(lstm_by_direction(lstm, vectors, lengths))
    assert all(torch.allclose(g, e, atol=1e-6) for g, e in zip(got, expected))
    assert (got[0][1, 1:] == 0).all()  # no gradient reaches the padding's vectors


def test_training_on_a_cpu_runs_the_lstm_by_direction(monkeypatch):
    from spacy_w2ner.nn import network as network_module

    calls = []
    original = network_module.lstm_by_direction
    monkeypatch.setattr(network_module, "lstm_by_direction", lambda *args: calls.append(1) or original(*args))
    network = make_network().train()
    network(torch.randn(2, 5, INPUT_SIZE), torch.tensor([5, 3])).sum().backward()
    assert calls == [1]


def test_the_bilstm_stays_float32_under_the_cpus_bfloat16_autocast():
    """Mixed precision on a CPU (bfloat16 autocast) leaves the BiLSTM in float32, as on a GPU: its
    words are float32's own; the grid network's logits come out in float32."""
    network = make_network().eval()
    vectors = torch.randn(3, 7, INPUT_SIZE)
    lengths = torch.tensor([7, 4, 1])
    with torch.no_grad():
        expected = network.encode_words(vectors, lengths, 7)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            words = network.encode_words(vectors, lengths, 7)
            logits = network(vectors, lengths)
    assert words.dtype == torch.float32 and torch.equal(words, expected)
    assert logits.dtype == torch.float32 and torch.isfinite(logits).all()


def test_dilated_convolutions_in_bfloat16_have_float32s_weight_gradients_call_after_call():
    """bfloat16 weights on a CPU (``nn.bfloat16``'s training copies): each convolution's weight
    gradient is float32's on the same (bfloat16-rounded) grid, within bfloat16's rounding, and the
    same on every call. oneDNN's own bfloat16 weight gradient at dilation 2 and 3 is 100% off or
    more on a grid 29 or more words wide (``network.convolve``); 32 words here."""
    torch.manual_seed(0)
    float32 = DilatedConvolutions(8, (1, 2, 3))
    bfloat16 = DilatedConvolutions(8, (1, 2, 3)).to(torch.bfloat16)
    bfloat16.load_state_dict(float32.state_dict())
    float32.load_state_dict(bfloat16.state_dict())  # the same bfloat16-rounded weights in both
    grid = torch.randn(2, 32, 32, 8).to(torch.bfloat16)
    grid_mask = torch.ones(2, 32, 32, dtype=torch.bool)
    float32(grid.float(), grid_mask).sum().backward()
    expected = [conv.weight.grad for conv in float32.convs]
    calls = []
    for _ in range(3):
        bfloat16.zero_grad(set_to_none=True)
        bfloat16(grid, grid_mask).float().sum().backward()
        calls.append([conv.weight.grad.float() for conv in bfloat16.convs])
    for grads in calls:
        for dilation, grad, want in zip((1, 2, 3), grads, expected):
            error = ((grad - want).abs().max() / want.abs().max()).item()
            assert error < 0.02, (dilation, error)
        assert all(torch.equal(a, b) for a, b in zip(grads, calls[0]))


def test_every_parameters_gradient_in_bfloat16_is_float32s_within_its_rounding():
    """The whole network with bfloat16 weights (a training copy), sentences of 31-45 words: each
    parameter's gradient is float32's on the same rounded weights and inputs, within 20% of its
    largest value (bfloat16's rounding summed over the grid's cells: 0.4-8% on a CPU with bfloat16
    instructions; 11.7% for the region projection where they are emulated, on an AVX2-only AMD
    EPYC), so no kernel of a bfloat16 pass gives a wrong gradient (oneDNN's dilated convolutions
    did: 100% off)."""
    network = make_network(lstm_size=64, conv_size=16, input_dropout=0.0, conv_dropout=0.0, output_dropout=0.0)
    twin = copy.deepcopy(network).to(torch.bfloat16)
    network.load_state_dict(twin.state_dict())  # the same bfloat16-rounded weights in both
    vectors = torch.randn(3, 45, INPUT_SIZE).to(torch.bfloat16)
    lengths = torch.tensor([45, 40, 31])
    weights = torch.randn(3, 45, 45, N_CLASSES)
    (network.train()(vectors.float(), lengths) * weights).sum().backward()
    (twin.train()(vectors, lengths).float() * weights).sum().backward()
    for (name, param), copied in zip(network.named_parameters(), twin.parameters()):
        error = ((copied.grad.float() - param.grad).abs().max() / param.grad.abs().max()).item()
        assert error < 0.2, (name, error)


def test_cpu_dropout_keeps_each_value_with_probability_1_minus_p_and_scales_it():
    """The grid network's Dropout draws its CPU mask with torch.rand (3x faster than bernoulli_):
    the same distribution as nn.Dropout, the same values in eval mode, seeded by torch's generator."""
    from spacy_w2ner.nn.network import Dropout

    dropout = Dropout(0.33).train()
    ones = torch.ones(400_000, requires_grad=True)
    torch.manual_seed(3)
    dropped = dropout(ones)
    kept = dropped != 0
    assert abs(kept.float().mean().item() - 0.67) < 0.005
    assert torch.allclose(dropped[kept], torch.tensor(1 / 0.67))
    dropped.sum().backward()
    assert torch.equal(ones.grad, dropped.detach())  # the gradient is the mask
    torch.manual_seed(3)
    assert torch.equal(dropout(ones), dropped)
    assert torch.equal(dropout.eval()(ones), ones)
    assert torch.equal(Dropout(0.0).train()(ones), ones) and not Dropout(1.0).train()(ones).any()


def test_cpu_dropout_in_bfloat16_keeps_and_scales_as_in_float32():
    """bfloat16 draws (8 bits) kept 0.8984 of the values for p = 0.1: the mask is drawn in float32."""
    from spacy_w2ner.nn.network import Dropout

    torch.manual_seed(0)
    dropped = Dropout(0.1).train()(torch.ones(2_000_000, dtype=torch.bfloat16))
    assert dropped.dtype == torch.bfloat16
    assert abs((dropped != 0).float().mean().item() - 0.9) < 0.0006  # 3 standard errors
    kept = dropped[dropped != 0]
    assert torch.equal(kept, torch.full_like(kept, 1 / 0.9))  # 1 / 0.9 as near as bfloat16 holds it


def test_saved_bytes_per_cell_is_a_training_passs_in_either_mode():
    network = make_network(input_dropout=0.5, conv_dropout=0.5, output_dropout=0.5)
    in_training = saved_bytes_per_cell(network, INPUT_SIZE)
    network.eval()  # as a prediction leaves it (nn.shim's shim keeps the module's last mode)
    assert saved_bytes_per_cell(network, INPUT_SIZE) == in_training
    assert not network.training and not network.grid_builder.training
    network.train()
    assert saved_bytes_per_cell(network, INPUT_SIZE) == in_training and network.training


def _into_one_block(module: torch.nn.Module) -> None:
    """The module's weights made views of one block, as cuDNN's ``flatten_parameters`` leaves them."""
    weights = list(module.parameters())
    block = torch.cat([weight.detach().flatten() for weight in weights])
    offset = 0
    for weight in weights:
        weight.data = block[offset : offset + weight.numel()].view_as(weight)
        offset += weight.numel()


def test_the_packed_lstm_flattens_its_weights_only_when_they_are_not_in_one_block(monkeypatch):
    """Flattening gives the weights new memory each time (on a GPU), where the grid network's
    CUDA graphs read them: an eager pass after the graphs' would have them all recorded again."""
    network = make_network().eval()
    flattened = []
    monkeypatch.setattr(network.lstm, "flatten_parameters", lambda: flattened.append(True))
    vectors, lengths = torch.randn(2, 7, INPUT_SIZE), torch.tensor([7, 4])
    with torch.no_grad():
        expected = network.lstm_packed(vectors, lengths, 7)
        assert flattened == [True] and not weights_in_one_block(network.lstm)
        _into_one_block(network.lstm)
        assert weights_in_one_block(network.lstm)
        assert torch.equal(network.lstm_packed(vectors, lengths, 7), expected)
    assert flattened == [True]

