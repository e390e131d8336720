"""The W2NER grid network as a PyTorch module.

word vectors -> BiLSTM -> conditional layer norm grid + distance and region
embeddings -> MLP to ``conv_size`` channels -> dilated 2D convolutions ->
co-predictor (biaffine over words + MLP over grid cells, summed) -> logits.

The grid input of the paper is ``concat(CLN(h_i, h_j), dist(i, j), region(i, j))``
followed by a 1x1 convolution. That convolution is linear, so it is computed
part by part: the per-row term of the CLN and both embeddings are projected
before they are broadcast over the grid, and only ``gamma_i * norm(h_j)`` is
materialised. Channel dropout (Dropout2d) on the concatenated input is applied
as the same per-sentence feature mask on each part, which is exactly equivalent.
"""
from typing import Optional, Sequence

import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from .transfers import to_device

N_DISTANCE_BUCKETS = 20
REGION_PAD, REGION_UPPER, REGION_LOWER = 0, 1, 2


def distance_buckets(length: int, device=None) -> torch.Tensor:
    """Bucket ids of the signed distance i - j: 0 for i == j, log2 buckets after.

    Positive distances use buckets 1..9, negative ones 11..19.
    """
    positions = torch.arange(length, device=device)
    distance = positions[:, None] - positions[None, :]
    magnitude = distance.abs()
    bucket = torch.floor(torch.log2(magnitude.clamp(min=1).float())).long() + 1
    bucket = bucket.clamp(max=9)
    bucket = torch.where(magnitude == 0, torch.zeros_like(bucket), bucket)
    return torch.where(distance < 0, bucket + 10, bucket)


def region_ids(grid_mask: torch.Tensor) -> torch.Tensor:
    """0 for padding, 1 for the upper triangle (i < j), 2 for the lower one and diagonal."""
    length = grid_mask.shape[-1]
    lower = torch.ones(length, length, dtype=torch.bool, device=grid_mask.device).tril()
    ids = torch.where(lower, REGION_LOWER, REGION_UPPER)
    return torch.where(grid_mask, ids, REGION_PAD)


PREDICT_BLOCK_CELLS = 16384
# A GPU wants fewer, larger kernels: blocks of 8x the cells (256 MB of float32 at width 512).
PREDICT_BLOCK_CELLS_CUDA = 131072


def row_blocks(batch: int, length: int, block_cells: Optional[int] = None):
    """Row slices for building a (batch, length, length, ...) tensor piecewise.

    When gradients are recorded (training) it is one slice: autograd keeps every
    piece anyway. When predicting, each block holds about ``block_cells`` cells,
    which bounds the memory of a long window's grid.
    """
    block_cells = PREDICT_BLOCK_CELLS if block_cells is None else block_cells
    if torch.is_grad_enabled() or batch * length * length <= block_cells:
        return [slice(0, length)]
    rows = max(1, block_cells // max(1, batch * length))
    return [slice(start, min(start + rows, length)) for start in range(0, length, rows)]


def by_row_blocks(compute, batch: int, length: int, device: torch.device) -> torch.Tensor:
    """``compute(rows)`` over the row blocks of ``row_blocks`` for the device, concatenated on dim 1."""
    blocks = row_blocks(batch, length, PREDICT_BLOCK_CELLS_CUDA if device.type == "cuda" else PREDICT_BLOCK_CELLS)
    if len(blocks) == 1:
        return compute(blocks[0])
    return torch.cat([compute(rows) for rows in blocks], dim=1)


def channel_mask(batch: int, width: int, p: float, training: bool, like: torch.Tensor):
    """A Dropout2d-style mask: one keep/drop draw per sentence and feature."""
    if not training or p == 0.0:
        return None
    keep = torch.empty(batch, width, device=like.device, dtype=like.dtype).bernoulli_(1 - p)
    return keep / (1 - p)


class Dropout(nn.Dropout):
    """``nn.Dropout`` whose mask, on a CPU, is drawn with ``torch.rand``: torch's CPU
    ``bernoulli_`` took 3x as long, a fifth of the grid network's training time, the grid's cells
    being dropped twice (bench/README.md, "Training speed"). The same distribution (each value
    kept with probability 1 - p, scaled by 1 / (1 - p)), in bfloat16 too: the draws are float32
    (bfloat16's 8 bits kept 0.898 of the values for p = 0.1), the scale a float multiplied in
    float. A GPU keeps ``nn.Dropout``'s kernel."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0 or self.p >= 1.0 or x.device.type != "cpu":
            return super().forward(x)
        keep = 1.0 - self.p
        kept = torch.rand(x.shape, device=x.device).lt_(keep).to(x.dtype)
        return (x * kept).mul_(1.0 / keep)


class GridBuilder(nn.Module):
    """Conditional layer norm grid + distance/region embeddings, projected to channels."""

    def __init__(self, hidden: int, dist_size: int, region_size: int, channels: int, dropout: float):
        super().__init__()
        self.gamma = nn.Linear(hidden, hidden)
        self.beta = nn.Linear(hidden, hidden)
        nn.init.zeros_(self.gamma.weight)
        nn.init.ones_(self.gamma.bias)
        nn.init.zeros_(self.beta.weight)
        nn.init.zeros_(self.beta.bias)
        self.distance = nn.Embedding(N_DISTANCE_BUCKETS, dist_size)
        self.region = nn.Embedding(3, region_size)
        self.project_cln = nn.Linear(hidden, channels)
        self.project_distance = nn.Linear(dist_size, channels, bias=False)
        self.project_region = nn.Linear(region_size, channels, bias=False)
        self.dropout = dropout

    def forward(self, words: torch.Tensor, grid_mask: torch.Tensor) -> torch.Tensor:
        batch, length, hidden = words.shape
        normed = F.layer_norm(words, (hidden,))
        gamma = self.gamma(words)  # conditions from word i (the row)
        beta = self.beta(words)
        mask = channel_mask(batch, hidden, self.dropout, self.training, words)
        if mask is not None:
            gamma = gamma * mask[:, None, :]
            beta = beta * mask[:, None, :]
        # CLN(h_i, h_j) = gamma_i * norm(h_j) + beta_i, then the 1x1 convolution.
        # The (batch, n, n, hidden) product is the largest tensor of the network:
        # when predicting, it is built a block of rows at a time.
        grid = by_row_blocks(
            lambda rows: F.linear(gamma[:, rows, None, :] * normed[:, None, :, :], self.project_cln.weight),
            batch,
            length,
            words.device,
        )
        grid = grid + self.project_cln(beta)[:, :, None, :]
        grid = grid + self._embedding_term(
            self.distance, self.project_distance, distance_buckets(length, words.device), batch
        )
        grid = grid + self._embedding_term(
            self.region, self.project_region, region_ids(grid_mask), batch
        )
        return F.gelu(grid) * grid_mask[..., None]

    def _embedding_term(self, table: nn.Embedding, project: nn.Linear, ids: torch.Tensor, batch: int):
        mask = channel_mask(batch, table.embedding_dim, self.dropout, self.training, table.weight)
        if mask is None:
            return project(table.weight)[ids]
        # Per-sentence feature dropout, then projection: (batch, n_ids, channels).
        projected = project(table.weight[None, :, :] * mask[:, None, :])
        if ids.dim() == 2:
            ids = ids.expand(batch, -1, -1)
        index = ids.reshape(batch, -1, 1).expand(-1, -1, projected.shape[-1])
        return projected.gather(1, index).reshape(batch, ids.shape[1], ids.shape[2], -1)


def convolution_layout(device: torch.device) -> torch.memory_format:
    """The memory layout the dilated convolutions are fastest in on ``device``: channels last
    on a CPU, channels first (contiguous) on a GPU (see DilatedConvolutions.forward)."""
    return torch.channels_last if device.type == "cpu" else torch.contiguous_format


class DilatedConvolutions(nn.Module):
    """Stacked depthwise 3x3 convolutions with growing dilation; outputs concatenated."""

    def __init__(self, channels: int, dilations: Sequence[int]):
        super().__init__()
        self.convs = nn.ModuleList(
            nn.Conv2d(channels, channels, 3, padding=d, dilation=d, groups=channels)
            for d in dilations
        )

    def forward(self, grid: torch.Tensor, grid_mask: torch.Tensor) -> torch.Tensor:
        mask = grid_mask[:, None, :, :]
        # On a GPU channels first, and contiguous: a permuted view is channels-last in memory,
        # where CUDA's dilated depthwise convolution was ~50x slower (H100: 45 ms a forward
        # call for 12 sentences). On a CPU channels last, the grid's own layout: oneDNN's
        # depthwise convolution was 2.5-6x faster so (AVX-512), and its backward pass channels
        # first took 10x longer at dilation 3 (bench/README.md, "Training speed").
        # In the weights' dtype: float32 under mixed precision too (depthwise convolutions are
        # memory-bound, and their half-precision kernels are not the fast ones on every GPU);
        # bfloat16 where the weights are (``nn.bfloat16``: oneDNN's kernels on a CPU; a
        # training pass of the dilated ones in float32: ``convolve``).
        x = grid.permute(0, 3, 1, 2).to(self.convs[0].weight.dtype)
        x = x.contiguous(memory_format=convolution_layout(x.device))
        outputs = []
        with torch.autocast(device_type=x.device.type, enabled=False):
            for conv in self.convs:
                # Padding cells are zeroed after every layer, so what a sentence gets
                # does not depend on how long the other sentences in its batch are.
                x = F.gelu(convolve(conv, x)) * mask
                outputs.append(x)
        return torch.cat(outputs, dim=1).permute(0, 2, 3, 1)


def convolve(conv: nn.Conv2d, x: torch.Tensor) -> torch.Tensor:
    """``conv(x)``, except a training pass of a dilated convolution in bfloat16 on a CPU, which runs
    in float32 (the weights cast inside the graph: their gradients come back in bfloat16).

    oneDNN's bfloat16 weight gradient of a dilated depthwise convolution in channels last (torch
    2.13; an AVX512-BF16 EPYC here, and CI's CPU without those instructions) is wrong once the
    grid is 29 or more words wide: 100% off or more, inf or NaN, and different on each call (its
    output and input gradient are right; dilation 1 is right). In float32, channels last as
    before, a training step with the grid network's copies is as fast as it was (bench/README.md,
    "bfloat16 copies of the weights"), and its gradients are float32's within bfloat16's rounding
    (``tests/nn/test_network.py``)."""
    weight = conv.weight
    trains_weight = torch.is_grad_enabled() and weight.requires_grad
    if not (trains_weight and weight.dtype == torch.bfloat16 and x.device.type == "cpu" and conv.dilation != (1, 1)):
        return conv(x)
    bias = None if conv.bias is None else conv.bias.float()
    out = F.conv2d(x.float(), weight.float(), bias, conv.stride, conv.padding, conv.dilation, conv.groups)
    return out.to(x.dtype)


class CoPredictor(nn.Module):
    """Biaffine scores over word pairs plus an MLP over grid cells, summed."""

    def __init__(self, n_classes: int, hidden: int, grid_channels: int, biaffine_size: int, ffnn_size: int, dropout: float):
        super().__init__()
        self.head = nn.Linear(hidden, biaffine_size)
        self.tail = nn.Linear(hidden, biaffine_size)
        self.biaffine = nn.Parameter(torch.empty(n_classes, biaffine_size + 1, biaffine_size + 1))
        nn.init.xavier_normal_(self.biaffine)
        self.cell_hidden = nn.Linear(grid_channels, ffnn_size)
        self.cell_output = nn.Linear(ffnn_size, n_classes)
        self.dropout = Dropout(dropout)

    def forward(self, words: torch.Tensor, grid: torch.Tensor) -> torch.Tensor:
        words = self.dropout(words)
        head = F.gelu(self.head(words))
        tail = F.gelu(self.tail(words))
        ones = head.new_ones(head.shape[:-1] + (1,))
        head = torch.cat([head, ones], dim=-1)
        tail = torch.cat([tail, ones], dim=-1)
        # (batch, i, class, d) @ (batch, 1, d, j) -> (batch, i, class, j)
        head_u = torch.einsum("bid,cde->bice", head, self.biaffine)
        pair_scores = torch.einsum("bice,bje->bijc", head_u, tail)
        batch, length = grid.shape[:2]
        cell_scores = by_row_blocks(
            lambda rows: self.cell_output(self.dropout(F.gelu(self.cell_hidden(self.dropout(grid[:, rows]))))),
            batch,
            length,
            grid.device,
        )
        return pair_scores + cell_scores


class GridNetwork(nn.Module):
    """Word vectors (batch, length, width) -> relation logits (batch, length, length, classes)."""

    def __init__(
        self,
        input_size: int,
        n_classes: int,
        *,
        lstm_size: int,
        dist_emb_size: int,
        region_emb_size: int,
        conv_size: int,
        dilations: Sequence[int],
        biaffine_size: int,
        ffnn_size: int,
        input_dropout: float,
        conv_dropout: float,
        output_dropout: float,
    ):
        """Sizes and dropouts as ``spacy_w2ner.W2NER.v1`` takes them (checked there; defaults
        in the ``w2ner`` factory's config); ``lstm_size`` is even (two directions)."""
        super().__init__()
        self.input_dropout = Dropout(input_dropout)
        self.lstm = nn.LSTM(input_size, lstm_size // 2, batch_first=True, bidirectional=True)
        self.grid_builder = GridBuilder(lstm_size, dist_emb_size, region_emb_size, conv_size, conv_dropout)
        self.convolutions = DilatedConvolutions(conv_size, dilations)
        self.co_predictor = CoPredictor(
            n_classes, lstm_size, conv_size * len(dilations), biaffine_size, ffnn_size, output_dropout
        )

    def forward(self, vectors: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        batch, length, _ = vectors.shape
        positions = torch.arange(length, device=vectors.device)
        word_mask = positions[None, :] < to_device(lengths, vectors.device)[:, None]
        grid_mask = word_mask[:, :, None] & word_mask[:, None, :]
        words = self.encode_words(self.input_dropout(vectors), lengths, length)
        grid = self.grid_builder(words, grid_mask)
        grid = self.convolutions(grid, grid_mask)
        # float32 logits even under mixed precision, for a stable loss.
        return self.co_predictor(words, grid).float()

    def encode_words(self, vectors: torch.Tensor, lengths: torch.Tensor, length: int) -> torch.Tensor:
        """The BiLSTM's outputs: unpacked (``lstm_by_direction``) on a CPU, and where the lengths
        are on the device (a CUDA graph's replay, ``nn.cuda_graphs``: packing reads them on the
        host); packed otherwise."""
        # float32 under mixed precision too: a small share of the work, and cuDNN's LSTM is
        # not half-precision everywhere (a fallback would be many small kernels). On a CPU in
        # the weights' dtype (bfloat16 weights: ``nn.bfloat16``, oneDNN's bfloat16 LSTM).
        with torch.autocast(device_type=vectors.device.type, enabled=False):
            unpacked = vectors.device.type == "cpu" or lengths.device.type != "cpu"
            if unpacked and isinstance(self.lstm, nn.LSTM):
                return lstm_by_direction(self.lstm, vectors.to(self.lstm.weight_ih_l0.dtype), lengths)
            return self.lstm_packed(vectors, lengths, length)

    def lstm_packed(self, vectors: torch.Tensor, lengths: torch.Tensor, length: int) -> torch.Tensor:
        """The BiLSTM over the packed sequence (a GPU, cuDNN's kernel; an int8 LSTM)."""
        packed = pack_padded_sequence(vectors.float(), lengths.cpu(), batch_first=True, enforce_sorted=False)
        # Thinc's optimizer gives the weights new storage after each update; cuDNN wants them
        # in one block (else it copies them on every call, with a warning). No-op on a CPU, and
        # absent from a quantized LSTM (int8 inference on a CPU). Only when they are not in one
        # block already: flattening moves them to new memory each time, and the grid network's
        # CUDA graphs, which read them where they were, would all be recorded again.
        if hasattr(self.lstm, "flatten_parameters") and not weights_in_one_block(self.lstm):
            self.lstm.flatten_parameters()
        encoded, _ = self.lstm(packed)
        words, _ = pad_packed_sequence(encoded, batch_first=True, total_length=length)
        return words


def weights_in_one_block(module: nn.Module) -> bool:
    """Whether every weight of ``module`` is a view of one storage (an LSTM's after
    ``flatten_parameters``)."""
    return len({weight.untyped_storage().data_ptr() for weight in module.parameters()}) == 1


def lstm_by_direction(lstm: nn.LSTM, vectors: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """A one-layer bidirectional ``lstm`` over padded ``vectors`` without packing them, each
    direction on its own: the same outputs as over the packed sequence (zeros at padding).

    On a CPU, a packed sequence runs a step at a time in small kernels; a padded batch runs in
    oneDNN's fused kernel, several times faster (forward and backward: the padding's outputs
    are multiplied by 0, so no gradient flows through them and the gradients are the packed
    sequence's). The forward direction reads padding only after
    a sequence's end; the backward one reads each sequence reversed within its length.
    """
    batch, length, _ = vectors.shape
    positions = torch.arange(length, device=vectors.device)
    lengths = lengths.to(vectors.device)
    mask = positions[None, :] < lengths[:, None]
    # Position t of the reversed sequence is len - 1 - t (padding stays where it is): its own inverse.
    reverse = torch.where(mask, lengths[:, None] - 1 - positions[None, :], positions[None, :])
    gather = reverse[:, :, None].expand(-1, -1, vectors.shape[-1])
    forward = _one_direction(lstm, vectors, "")
    backward = _one_direction(lstm, vectors.gather(1, gather), "_reverse")
    backward = backward.gather(1, reverse[:, :, None].expand(-1, -1, backward.shape[-1]))
    return torch.cat([forward, backward], dim=-1) * mask[:, :, None]


def _one_direction(lstm: nn.LSTM, vectors: torch.Tensor, suffix: str) -> torch.Tensor:
    weights = [getattr(lstm, f"{name}_l0{suffix}") for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
    zeros = vectors.new_zeros(1, vectors.shape[0], lstm.hidden_size)
    output, _, _ = torch.lstm(vectors, (zeros, zeros), weights, True, 1, 0.0, False, False, True)
    return output


def saved_bytes_per_cell(network: GridNetwork, input_size: int, sides=(24, 48)) -> float:
    """The bytes a training forward pass keeps for its backward pass per grid cell, measured on
    two small random grids (the difference, so the per-word terms cancel) with torch's
    saved-tensor hooks: the network's own figure whatever its sizes, dtype and device. Read
    by ``model.training_plan`` to say what a training step's grids will need."""
    device = next(network.parameters()).device
    totals = []
    was_training = network.training
    network.train()  # a training pass's figure (dropout's masks), whatever mode prediction left
    try:
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):  # training's draws unchanged
            for side in sides:
                totals.append(_saved_bytes(network, input_size, side, device))
    finally:
        network.train(was_training)
    return (totals[1] - totals[0]) / (sides[1] ** 2 - sides[0] ** 2)


def _saved_bytes(network: GridNetwork, input_size: int, side: int, device) -> int:
    storages = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        storages[(storage.data_ptr(), storage.device)] = storage.nbytes()
        return tensor

    vectors = torch.zeros(1, side, input_size, device=device, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        network(vectors, torch.tensor([side]))
    return sum(storages.values())
