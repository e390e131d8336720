"""Prediction passes replayed from CUDA graphs (``nn/cuda_graphs.py``): the padding to buckets
and the cut back on the CPU, the capture and replay on a GPU (``-m gpu``)."""
import warnings

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from transformers import BertConfig, BertModel, MPNetConfig, MPNetModel

from spacy_w2ner.nn.cuda_graphs import (
    GraphedEncoder,
    GraphedGridNetwork,
    HostCopiesFromWarmUp,
    bucket_shape,
    pad_inputs,
    square_mask,
    unpad_outputs,
)
from spacy_w2ner.nn.network import GridNetwork

SIZES = dict(vocab_size=120, hidden_size=32, num_hidden_layers=3, num_attention_heads=2, intermediate_size=64)


def _encoder(kind: str, device: str = "cpu") -> torch.nn.Module:
    torch.manual_seed(0)
    model = MPNetModel(MPNetConfig(**SIZES)) if kind == "mpnet" else BertModel(BertConfig(**SIZES))
    return model.to(device).eval()


def _pass(rows: int, width: int, pad_id: int, device: str = "cpu", seed: int = 1) -> dict:
    """A pass of ``rows`` spans of random wordpieces, the longest ``width`` wide, padded after each span."""
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(2, width + 1, (rows,), generator=generator)
    lengths[0] = width
    ids = torch.randint(3, SIZES["vocab_size"], (rows, width), generator=generator)
    mask = (torch.arange(width)[None, :] < lengths[:, None]).long()
    ids = torch.where(mask.bool(), ids, torch.full_like(ids, pad_id))
    return {"input_ids": ids.to(device), "attention_mask": mask.to(device), "output_hidden_states": True}


def _ids_and_mask(inputs: dict) -> dict:
    """A pass's word pieces and attention mask, for a module that takes nothing else."""
    return {key: value for key, value in inputs.items() if key != "output_hidden_states"}


def _no_autocast():
    return torch.autocast("cuda", enabled=False, cache_enabled=False)


def test_bucket_shapes_round_rows_to_a_power_of_two_and_wordpieces_to_32():
    assert bucket_shape(1, 1) == (1, 32)
    assert bucket_shape(3, 32) == (4, 32)
    assert bucket_shape(32, 33) == (32, 64)
    assert bucket_shape(33, 250) == (64, 256)


@pytest.mark.parametrize("kind", ["mpnet", "bert"])
def test_a_pass_padded_to_its_bucket_gives_the_real_rows_the_unpadded_vectors(kind):
    # What a graph replays: the pass padded with pad tokens under a mask of 0, cut back.
    encoder = _encoder(kind)
    pad_id = encoder.config.pad_token_id
    inputs = _pass(5, 19, pad_id)
    with torch.no_grad():
        expected = encoder(**inputs)
        padded = pad_inputs(inputs, bucket_shape(5, 19), pad_id)
        assert padded["input_ids"].shape == (8, 32) and padded["attention_mask"][5:].sum() == 0
        assert torch.equal(padded["input_ids"][:5, :19], inputs["input_ids"]) and (padded["input_ids"][:, 19:] == pad_id).all()
        output = unpad_outputs(encoder(**padded), 5, 19)
    real = inputs["attention_mask"].bool()
    assert output.last_hidden_state.shape == expected.last_hidden_state.shape
    assert torch.allclose(output.last_hidden_state[real], expected.last_hidden_state[real], atol=1e-5)
    assert torch.allclose(output.pooler_output, expected.pooler_output, atol=1e-5)
    for ours, theirs in zip(output.hidden_states, expected.hidden_states, strict=True):
        assert torch.allclose(ours[real], theirs[real], atol=1e-5)


@pytest.mark.parametrize("kind", ["mpnet", "bert"])
def test_a_square_attention_mask_gives_the_vectors_of_the_rows_mask(kind):
    # What a graph records: the (rows, wordpieces, wordpieces) mask, which BERT's SDPA attention
    # takes without reading the mask back to the host.
    encoder = _encoder(kind)
    inputs = pad_inputs(_pass(5, 19, encoder.config.pad_token_id), (8, 32), encoder.config.pad_token_id)
    squared = square_mask(inputs)
    assert squared["attention_mask"].shape == (8, 32, 32) and inputs["attention_mask"].shape == (8, 32)
    with torch.no_grad():
        expected, output = encoder(**inputs), encoder(**squared)
    real = inputs["attention_mask"].bool()
    assert torch.allclose(output.last_hidden_state[real], expected.last_hidden_state[real], atol=1e-6)
    assert square_mask({"input_ids": inputs["input_ids"]}) == {"input_ids": inputs["input_ids"]}


def test_unpadded_outputs_are_copies_and_keep_only_the_top_layers():
    encoder = _encoder("mpnet")
    inputs = _pass(4, 32, encoder.config.pad_token_id)
    with torch.no_grad():
        output = encoder(**inputs)
    cut = unpad_outputs(output, 3, 20, top_layers=2)
    assert len(cut.hidden_states) == len(output.hidden_states) == 4
    assert cut.hidden_states[:2] == (None, None) and torch.equal(cut.hidden_states[3], output.hidden_states[3][:3, :20])
    cut.last_hidden_state.zero_()  # the next replay writes the graph's buffers: the cut must not share them
    assert output.last_hidden_state.abs().sum() > 0


# Operators a CUDA graph's capture cannot hold: each makes the host wait for the device's values
# (a value read back, or an output whose size depends on them); ``lift_fresh``, a tensor made of
# the host's data, is a copy from pageable memory on a GPU, its values fixed in the graph.
CAPTURE_BREAKING = frozenset(
    {"_local_scalar_dense", "nonzero", "masked_select", "_unique", "_unique2", "unique_dim", "unique_consecutive",
     "bincount", "equal", "is_nonzero", "repeat_interleave", "lift_fresh"}
)  # fmt: skip
INDEXING = frozenset({"index", "index_put", "index_put_", "_index_put_impl_"})


class _CaptureBreakingOperators(TorchDispatchMode):
    """Lists the operators of ``CAPTURE_BREAKING`` that run under it, and indexing by a boolean
    mask (a ``nonzero`` inside the kernel), which a CPU's run gives no other sign of."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func.overloadpacket.__name__
        by_mask = name in INDEXING and any(
            isinstance(index, torch.Tensor) and index.dtype == torch.bool for index in args[1]
        )
        if by_mask or (name in CAPTURE_BREAKING and not (name == "repeat_interleave" and kwargs.get("output_size"))):
            self.found.append(str(func))
        return func(*args, **kwargs)


class ReplayingRecorder:
    """A recorder for the CPU: its replay runs the pass again and writes the result into the
    first run's output tensors, as a graph's replay writes its buffers. Its recording refuses a
    pass that does what a capture cannot hold (``CAPTURE_BREAKING``), with the error a capture
    gives, so that the CPU's tests hold the passes to a GPU's rule."""

    device_type = "cpu"

    def __init__(self) -> None:
        self.recorded = 0

    def __call__(self, run):
        with _CaptureBreakingOperators() as operators:
            output = run()
        if operators.found:
            raise RuntimeError(f"operation not permitted when stream is capturing ({', '.join(operators.found)})")
        self.recorded += 1

        def replay():
            fresh = run()
            if isinstance(fresh, torch.Tensor):  # the grid network's logits
                output.copy_(fresh)
                return
            for key, value in fresh.items():
                buffers = output[key] if isinstance(value, tuple) else (output[key],)
                for buffer, fresh in zip(buffers, value if isinstance(value, tuple) else (value,)):
                    if fresh is not None:
                        buffer.copy_(fresh)

        return replay, output


@pytest.mark.parametrize("kind", ["mpnet", "bert"])
def test_replayed_passes_give_the_unpadded_vectors_from_one_recording_per_bucket(kind):
    # The recording holds each pass to a capture's rule (no read-back): BERT's passes keep to
    # it through the square attention mask.
    encoder = _encoder(kind)
    recorder = ReplayingRecorder()
    graphs = GraphedEncoder(top_layers=2, recorder=recorder)
    outputs = []
    for rows, width, seed in [(5, 19, 1), (6, 25, 2), (3, 40, 3), (5, 19, 4)]:
        inputs = _pass(rows, width, encoder.config.pad_token_id, seed=seed)
        with torch.no_grad():
            expected = encoder(**inputs)
        output = graphs(encoder, (), inputs, _no_autocast)
        real = inputs["attention_mask"].bool()
        assert output.last_hidden_state.shape == (rows, width, SIZES["hidden_size"])
        assert torch.allclose(output.last_hidden_state[real], expected.last_hidden_state[real], atol=1e-5)
        assert torch.allclose(output.hidden_states[-1][real], expected.hidden_states[-1][real], atol=1e-5)
        assert output.hidden_states[:2] == (None, None)
        outputs.append((output, output.last_hidden_state.clone()))
    assert recorder.recorded == len(graphs.graphs) == 2  # (8, 32) for the first, second and last; (4, 64)
    assert all(torch.equal(output.last_hidden_state, kept) for output, kept in outputs)  # copies, not the buffers


def _module_of(module_forward):
    """A module without a config whose forward is ``module_forward(input_ids, attention_mask)``."""

    class Module(torch.nn.Module):
        config = None

        def forward(self, input_ids, attention_mask):
            return {"last_hidden_state": module_forward(input_ids, attention_mask)}

    return Module()


@pytest.mark.parametrize(
    "forward",
    [
        lambda ids, mask: ids.float() * (mask.sum().item() > 0),  # a value read back
        lambda ids, mask: ids.float() * bool(mask.any()),  # a truth value read back
        lambda ids, mask: ids.float().index_fill(1, mask[0].nonzero()[:, 0], 0.0),  # a size of the values
        lambda ids, mask: ids.float() + mask[mask.bool()].float().sum(),  # indexed by a mask
        lambda ids, mask: ids.float() + torch.tensor([1.0]),  # the host's data
    ],
    ids=["item", "bool", "nonzero", "mask-index", "host-data"],
)
def test_the_cpus_recording_refuses_what_a_capture_cannot_hold_and_the_pass_runs_eagerly(forward):
    # As a GPU's capture does (test_a_module_that_reads_back_to_the_host_runs_eagerly_with_a_warning).
    graphs = GraphedEncoder(recorder=ReplayingRecorder())
    inputs = _ids_and_mask(_pass(2, 10, 0))
    with pytest.warns(UserWarning, match="CUDA graphs are off for this encoder"):
        assert graphs(_module_of(forward), (), inputs, _no_autocast) is None
    assert graphs.failed.startswith("Module: operation not permitted when stream is capturing (aten.")
    assert graphs.recorder.recorded == 0 and graphs.graphs == {}


def test_the_cpus_recording_takes_what_stays_on_the_device():
    # Masks kept as tensors, sizes known before the values: a capture holds these.
    def forward(ids, mask):
        mask = mask if mask.dim() == 2 else mask[:, 0]  # a graph's square mask: every row alike
        ones = torch.ones(ids.shape[1], dtype=torch.long)
        return torch.where(mask.bool(), ids.float(), 0.0).repeat_interleave(ones, dim=1, output_size=ids.shape[1])

    graphs = GraphedEncoder(recorder=ReplayingRecorder())
    inputs = _ids_and_mask(_pass(2, 10, 0))
    output = graphs(_module_of(forward), (), inputs, _no_autocast)
    assert graphs.failed is None and torch.equal(output["last_hidden_state"], forward(inputs["input_ids"], inputs["attention_mask"]))


def test_bert_with_its_two_dimensional_mask_reads_it_back_which_the_square_mask_avoids():
    # What square_mask is for, seen by the CPU's recording: BERT's SDPA attention asks whether
    # every wordpiece of a (rows, wordpieces) mask is real.
    encoder = _encoder("bert")
    inputs = pad_inputs(_pass(3, 12, 0), (4, 32), 0)
    with pytest.raises(RuntimeError, match="not permitted when stream is capturing"):
        ReplayingRecorder()(lambda: encoder(**inputs))
    with torch.no_grad():
        ReplayingRecorder()(lambda: encoder(**square_mask(inputs)))


def test_a_pass_with_other_arguments_is_recorded_apart_and_over_the_limit_runs_eagerly():
    encoder = _encoder("mpnet")
    graphs = GraphedEncoder(max_graphs=2, recorder=ReplayingRecorder())
    inputs = _pass(2, 10, 1)
    assert graphs(encoder, (), inputs, _no_autocast) is not None
    assert graphs(encoder, (), {**inputs, "output_hidden_states": False}, _no_autocast).hidden_states is None
    assert graphs(encoder, (), _pass(2, 40, 1), _no_autocast) is None
    assert len(graphs.graphs) == 2 and graphs.failed is None


def _recorded_once():
    """(encoder, recorder, graphs, a pass) after one pass recorded with the CPU's recorder."""
    encoder = _encoder("mpnet")
    recorder = ReplayingRecorder()
    graphs = GraphedEncoder(recorder=recorder)
    inputs = _pass(3, 12, 1)
    graphs(encoder, (), inputs, _no_autocast)
    return encoder, recorder, graphs, inputs


def test_weights_in_new_tensors_or_another_module_are_recorded_again():
    # A graph reads the weights' memory as recorded: updated in place, it stays; given new data
    # (Thinc's own optimizer loop, loading, moving), every graph is recorded again.
    encoder, recorder, graphs, inputs = _recorded_once()
    with torch.no_grad():
        next(encoder.parameters()).add_(0.01)
    graphs(encoder, (), inputs, _no_autocast)
    assert recorder.recorded == 1
    first = next(encoder.parameters())
    first.data = first.data.clone()
    graphs(encoder, (), inputs, _no_autocast)
    assert recorder.recorded == 2 and len(graphs.graphs) == 1
    graphs(_encoder("mpnet"), (), inputs, _no_autocast)
    assert recorder.recorded == 3


def test_a_module_a_recording_cannot_hold_runs_eagerly_with_a_warning():
    class Refusing(ReplayingRecorder):
        def __call__(self, run):
            raise RuntimeError("operation not permitted when stream is capturing\nmore")

    graphs = GraphedEncoder(recorder=Refusing())
    encoder = _encoder("mpnet")
    with pytest.warns(UserWarning, match="CUDA graphs are off for this encoder"):
        assert graphs(encoder, (), _pass(2, 10, 1), _no_autocast) is None
    assert graphs.failed == "MPNetModel: operation not permitted when stream is capturing"
    assert graphs(encoder, (), _pass(2, 10, 1), _no_autocast) is None and graphs.graphs == {}


def test_passes_on_the_cpu_are_not_for_cuda_graphs():
    encoder = _encoder("mpnet")
    graphs = GraphedEncoder()
    assert graphs(encoder, (), _pass(2, 8, 1), _no_autocast) is None
    assert graphs.graphs == {} and graphs.failed is None


def test_the_encoder_attr_gives_its_shims_graphs_that_replay_only_while_on():
    from thinc.api import Model

    from spacy_w2ner.encoders.transformer import _attach_cuda_graphs

    class Shim:
        cuda_graphs = None

    node = Model("hf-pytorch", lambda *a: None, shims=[Shim()], attrs={"cuda_graphs": True, "last_layers": 4, "keep_hidden_states": False})
    _attach_cuda_graphs(node)
    graphs = node.shims[0].cuda_graphs
    assert isinstance(graphs, GraphedEncoder) and graphs.top_layers == 4
    _attach_cuda_graphs(node)
    assert node.shims[0].cuda_graphs is graphs and graphs.enabled  # kept: its captured graphs with it
    node.attrs["cuda_graphs"] = False
    _attach_cuda_graphs(node)
    assert node.shims[0].cuda_graphs is graphs and not graphs.enabled
    node.attrs["cuda_graphs"] = True
    _attach_cuda_graphs(node)
    assert node.shims[0].cuda_graphs is graphs and graphs.enabled


def test_a_shim_of_thincs_own_class_gets_graphs_only_when_on():
    # Thinc's PyTorchShim has no cuda_graphs (the fused shims' class attribute): off, it is left
    # as it is (the tests that train with Thinc's per-tensor steps swap the shims' class).
    from spacy_w2ner.nn.cuda_graphs import attach_graphs

    class ThincShim:
        pass

    shim = ThincShim()
    attach_graphs([shim], False, GraphedGridNetwork)
    assert not hasattr(shim, "cuda_graphs")
    attach_graphs([shim], True, GraphedGridNetwork)
    assert isinstance(shim.cuda_graphs, GraphedGridNetwork) and shim.cuda_graphs.enabled


def test_turned_off_passes_run_eagerly_and_on_again_replay_the_graphs_recorded_before():
    encoder, recorder, graphs, inputs = _recorded_once()
    graphs.enabled = False
    assert graphs(encoder, (), inputs, _no_autocast) is None and len(graphs.graphs) == 1
    graphs.enabled = True
    assert graphs(encoder, (), inputs, _no_autocast) is not None and recorder.recorded == 1


def test_each_float32_math_mode_has_its_own_graphs():
    # A graph replays the kernels chosen when it was recorded: TF32 matrix products need graphs
    # of their own.
    encoder, recorder, graphs, inputs = _recorded_once()
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        graphs(encoder, (), inputs, _no_autocast)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before
    graphs(encoder, (), inputs, _no_autocast)
    assert recorder.recorded == len(graphs.graphs) == 2


def _grid_network(device: str = "cpu") -> GridNetwork:
    torch.manual_seed(0)
    network = GridNetwork(
        12, 5, lstm_size=16, dist_emb_size=4, region_emb_size=4, conv_size=6, dilations=[1, 2, 3], biaffine_size=8,
        ffnn_size=6, input_dropout=0.5, conv_dropout=0.5, output_dropout=0.33,
    )  # fmt: skip
    return network.to(device).eval()


def _grid_pass(segments: int, words: int, seed: int, device: str = "cpu"):
    """(vectors, lengths) of a grid batch: zero vectors after each segment's end, the lengths on
    the host (as the grid scorer gives them)."""
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, words + 1, (segments,), generator=generator)
    lengths[0] = words
    real = torch.arange(words)[None, :] < lengths[:, None]
    vectors = torch.randn(segments, words, 12, generator=generator) * real[..., None]
    return vectors.to(device), lengths


def _assert_same_cells(logits, expected, lengths, atol):
    assert logits.shape == expected.shape
    for k, n in enumerate(lengths.tolist()):
        assert torch.allclose(logits[k, :n, :n], expected[k, :n, :n], atol=atol)


def test_replayed_grid_passes_give_the_unpadded_logits_from_one_recording_per_bucket():
    # Segments padded to a power of two and words to a multiple of 8, with zero vectors and
    # lengths: every real cell's logits are the unpadded pass's.
    network = _grid_network()
    recorder = ReplayingRecorder()
    graphs = GraphedGridNetwork(recorder=recorder)
    outputs = []
    for segments, words, seed in [(5, 13, 1), (7, 16, 2), (3, 21, 3), (5, 13, 4)]:
        vectors, lengths = _grid_pass(segments, words, seed)
        with torch.no_grad():
            expected = network(vectors, lengths)
        logits = graphs(network, (vectors, lengths), {}, _no_autocast)
        _assert_same_cells(logits, expected, lengths, 1e-5)
        outputs.append((logits, logits.clone()))
    assert recorder.recorded == len(graphs.graphs) == 2  # (8, 16) for the first, second and last; (4, 24)
    assert [key[0] for key in graphs.graphs] == [(("vectors", (8, 16, 12)), ("lengths", (8,))), (("vectors", (4, 24, 12)), ("lengths", (4,)))]
    assert all(torch.equal(logits, kept) for logits, kept in outputs)  # copies, not the buffers


def test_grid_passes_on_the_cpu_or_of_other_arguments_are_not_for_cuda_graphs():
    network = _grid_network()
    graphs = GraphedGridNetwork()
    assert graphs(network, _grid_pass(2, 8, 1), {}, _no_autocast) is None
    graphs = GraphedGridNetwork(recorder=ReplayingRecorder())
    vectors, lengths = _grid_pass(2, 8, 1)
    assert graphs(network, (vectors,), {"lengths": lengths}, _no_autocast) is None
    assert graphs(network, (vectors[0], lengths), {}, _no_autocast) is None
    assert graphs.graphs == {} and graphs.failed is None


def test_a_grid_network_a_recording_cannot_hold_runs_eagerly_with_a_warning():
    class Refusing(ReplayingRecorder):
        def __call__(self, run):
            raise RuntimeError("operation not permitted when stream is capturing")

    graphs = GraphedGridNetwork(recorder=Refusing())
    with pytest.warns(UserWarning, match="CUDA graphs are off for this grid network"):
        assert graphs(_grid_network(), _grid_pass(2, 8, 1), {}, _no_autocast) is None
    assert graphs.failed == "GridNetwork: operation not permitted when stream is capturing"


def test_the_grid_scorer_attr_gives_its_shim_graphs_that_replay_only_while_on(saved_model, monkeypatch):
    # Through the pipeline (the grid scorer's shim, its predict), with a recorder that replays on
    # the CPU: the same grids and entities as eager passes; a CPU's own passes never use graphs.
    import spacy

    from spacy_w2ner import get_entities
    from spacy_w2ner.model.predictions import grid_probabilities
    from spacy_w2ner.nn import cuda_graphs

    from ..conftest import TRAIN_DATA

    nlp = spacy.load(saved_model)
    model = nlp.get_pipe("w2ner").model
    shim = model.get_ref("grid_scorer").layers[0].shims[0]
    texts = [text for text, _ in TRAIN_DATA] * 3 + ["She had severe pain in her knees and ankles after Lipitor ."]

    def predicted():
        docs = list(nlp.pipe(texts, batch_size=4))
        grids = grid_probabilities(model, [nlp.make_doc(text) for text in texts])
        return [[(e.label, e.tokens) for e in get_entities(doc)] for doc in docs], grids

    eager_entities, eager_grids = predicted()
    assert shim.cuda_graphs is None and any(eager_entities)
    model.get_ref("grid_scorer").attrs["cuda_graphs"] = True
    assert predicted()[0] == eager_entities and shim.cuda_graphs.graphs == {}  # on a CPU: eager
    monkeypatch.setattr(cuda_graphs, "CudaGraphRecorder", ReplayingRecorder)
    shim.cuda_graphs = None  # a new GraphedGridNetwork, with the CPU's recorder
    entities, grids = predicted()
    assert isinstance(shim.cuda_graphs, GraphedGridNetwork) and len(shim.cuda_graphs.graphs) > 0
    assert entities == eager_entities
    for (segment, probs), (eager_segment, eager_probs) in zip(grids, eager_grids, strict=True):
        assert segment == eager_segment and probs.shape == eager_probs.shape
        assert abs(probs - eager_probs).max() < 1e-5
    graphs = shim.cuda_graphs
    recorded = graphs.recorder.recorded
    model.get_ref("grid_scorer").attrs["cuda_graphs"] = False
    assert predicted()[0] == eager_entities and shim.cuda_graphs is graphs and not graphs.enabled
    model.get_ref("grid_scorer").attrs["cuda_graphs"] = True
    assert predicted()[0] == eager_entities and graphs.enabled and graphs.recorder.recorded == recorded


class _HostToDeviceCopies(TorchDispatchMode):
    """Counts the copies from the host to another device that run under it."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.ops.aten._to_copy.default:
            source, target = args[0].device, torch.device(kwargs.get("device") or args[0].device)
            self.count += source.type == "cpu" and target.type != "cpu"
        if func is torch.ops.aten.copy_.default:
            self.count += args[1].device.type == "cpu" and args[0].device.type != "cpu"
        return func(*args, **kwargs)


def _pass_with_host_tensors(side: int, shift: int = 0, extra: bool = False):
    """A pass (on the meta device, which a CPU has) that makes tensors on the host and copies them
    over, as MPNet's relative position buckets: ``.to(device)`` and ``copy_`` into a device tensor."""
    positions = torch.arange(side)[None, :] - torch.arange(side)[:, None] + shift
    buckets = positions.to("meta")
    target = torch.empty(side, device="meta", dtype=torch.float64)
    target.copy_(torch.arange(side, dtype=torch.float64))
    if extra:
        torch.ones(2).to("meta")
    host_only = torch.arange(3).to(torch.float64)  # a copy on the host: not one of them
    return buckets, target, host_only


def test_a_captures_copies_from_the_host_are_given_from_the_warm_ups_on_the_device():
    copies = HostCopiesFromWarmUp()
    with _HostToDeviceCopies() as counted:
        for _ in range(2):
            with copies.warming_up():
                warm = _pass_with_host_tensors(5)
        warm_copies = counted.count
        with copies.capturing():
            captured = _pass_with_host_tensors(5)
    assert warm_copies == 4  # two a warm-up pass, run as they are
    assert counted.count == warm_copies  # none in the capture: copies on the device of the kept ones
    assert [(t.shape, t.dtype) for t in copies.device_values()] == [((5, 5), torch.int64), ((5,), torch.float64)]
    assert all(t.device.type == "meta" for t in copies.device_values())
    assert [(t.shape, t.dtype, t.device.type) for t in captured[:2]] == [(t.shape, t.dtype, t.device.type) for t in warm[:2]]
    assert torch.equal(captured[2], torch.arange(3).double())


@pytest.mark.parametrize("kind, copies", [("mpnet", [((20, 20), torch.int64)]), ("bert", [])])
def test_mpnets_passes_copy_position_buckets_from_the_host_which_a_capture_takes_from_the_warm_up(kind, copies):
    """On the meta device (a CPU's stand-in for a GPU) a pass's copies from the host show, which
    on a CPU are no copies: MPNet makes its relative position buckets on the host in every pass
    (every MPNet capture failed so on an H100, 2026-11-27), BERT makes none."""
    encoder = _encoder(kind).to("meta")
    inputs = square_mask({name: value.to("meta") for name, value in _ids_and_mask(_pass(4, 20, 1)).items()})
    host_copies = HostCopiesFromWarmUp()
    with torch.no_grad(), _HostToDeviceCopies() as counted:
        with host_copies.warming_up():
            encoder(**inputs)
        in_the_warm_up = counted.count
        with host_copies.capturing():
            encoder(**inputs)
    assert [(tuple(value.shape), value.dtype) for value in host_copies.device_values()] == copies
    assert counted.count == in_the_warm_up == len(copies)  # none in the capture


@pytest.mark.parametrize(
    "change, message",
    [({"shift": 1}, "copy 1 from the host to the device holds other values"), ({"side": 6}, "copy 1 from the host"),
     ({"extra": True}, "copy 3 from the host to the device was not in the warm-up pass")],
)  # fmt: skip
def test_a_capture_whose_host_values_are_not_the_warm_ups_is_refused(change, message):
    copies = HostCopiesFromWarmUp()
    with copies.warming_up():
        _pass_with_host_tensors(5)
    with pytest.raises(RuntimeError, match=message), copies.capturing():
        _pass_with_host_tensors(**{"side": 5, **change})


def test_without_torchs_private_dispatch_mode_a_capture_meets_the_host_copies_as_they_come():
    """The fallback where ``torch.utils._python_dispatch`` is gone: the module imports, and a
    capture's mode lets a pass's copies from the host run as they are (a CUDA capture then
    refuses them, and the pass runs eagerly, as before the mode existed)."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "import torch\n"
        "sys.modules['torch.utils._python_dispatch'] = None  # importing it fails, as in a torch without it\n"
        "from spacy_w2ner.nn import cuda_graphs\n"
        "assert cuda_graphs.TorchDispatchMode is None\n"
        "mode = cuda_graphs.host_copies_mode()\n"
        "with mode.warming_up():\n"
        "    warm = torch.arange(4).to('meta')\n"
        "with mode.capturing():\n"
        "    captured = torch.arange(4).to('meta')\n"
        "print(type(mode).__name__, mode.device_values(), captured.device)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["_HostCopiesAsTheyCome", "[]", "meta"]


def test_with_torchs_dispatch_mode_a_capture_takes_the_warm_ups_copies():
    from spacy_w2ner.nn.cuda_graphs import host_copies_mode

    assert isinstance(host_copies_mode(), HostCopiesFromWarmUp)


# ---------------------------------------------------------------- on a GPU


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["mpnet", "bert"])
def test_replayed_passes_give_the_eager_passes_vectors(kind):
    encoder = _encoder(kind, "cuda")
    graphs = GraphedEncoder(top_layers=2)
    for rows, width, seed in [(5, 19, 1), (6, 25, 2), (32, 40, 3), (1, 7, 4)]:
        inputs = _pass(rows, width, encoder.config.pad_token_id, "cuda", seed)
        with torch.no_grad():
            expected = encoder(**inputs)
        output = graphs(encoder, (), inputs, _no_autocast)
        assert output is not None and graphs.failed is None
        real = inputs["attention_mask"].bool()
        assert torch.allclose(output.last_hidden_state[real], expected.last_hidden_state[real], atol=1e-4)
        assert torch.allclose(output.hidden_states[-1][real], expected.hidden_states[-1][real], atol=1e-4)
        assert output.hidden_states[0] is None
    assert len(graphs.graphs) == 3  # (5, 19) and (6, 25) share the (8, 32) bucket


@pytest.mark.gpu
def test_an_earlier_replays_output_survives_the_next_replay():
    encoder = _encoder("mpnet", "cuda")
    graphs = GraphedEncoder()
    first_inputs = _pass(4, 20, 1, "cuda", 1)
    first = graphs(encoder, (), first_inputs, _no_autocast).last_hidden_state
    kept = first.clone()
    graphs(encoder, (), _pass(4, 20, 1, "cuda", 2), _no_autocast)  # the same graph, other wordpieces
    assert torch.equal(first, kept)


@pytest.mark.gpu
def test_over_the_limit_a_pass_runs_eagerly():
    encoder = _encoder("mpnet", "cuda")
    graphs = GraphedEncoder(max_graphs=1)
    assert graphs(encoder, (), _pass(2, 10, 1, "cuda"), _no_autocast) is not None
    assert graphs(encoder, (), _pass(2, 40, 1, "cuda"), _no_autocast) is None
    assert len(graphs.graphs) == 1 and graphs.failed is None


@pytest.mark.gpu
def test_a_module_that_reads_back_to_the_host_runs_eagerly_with_a_warning():
    class ReadsBack(torch.nn.Module):
        config = None

        def forward(self, input_ids, attention_mask):
            if attention_mask.sum().item() > 0:  # a synchronisation: no capture can hold it
                return {"last_hidden_state": input_ids.float()}
            return {"last_hidden_state": -input_ids.float()}

    graphs = GraphedEncoder()
    inputs = _ids_and_mask(_pass(2, 10, 0, "cuda"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert graphs(ReadsBack(), (), inputs, _no_autocast) is None
    assert graphs.failed and any("CUDA graphs are off" in str(w.message) for w in caught)
    assert graphs(ReadsBack(), (), inputs, _no_autocast) is None  # not tried again
    # The device works on as before, on the caller's stream (not the failed capture's).
    assert torch.cuda.current_stream() == torch.cuda.default_stream()
    assert (torch.ones(3, device="cuda") * 2).sum().item() == 6


@pytest.mark.gpu
def test_replayed_grid_passes_give_the_eager_passes_logits():
    # The eager pass packs the LSTM's sequences (lengths on the host); the graph runs it
    # unpacked, each direction on its own, with the lengths on the device.
    network = _grid_network("cuda")
    graphs = GraphedGridNetwork()
    for segments, words, seed in [(5, 13, 1), (7, 16, 2), (32, 40, 3), (1, 3, 4)]:
        vectors, lengths = _grid_pass(segments, words, seed, "cuda")
        with torch.no_grad():
            expected = network(vectors, lengths)
        logits = graphs(network, (vectors, lengths), {}, _no_autocast)
        assert logits is not None and graphs.failed is None
        _assert_same_cells(logits, expected, lengths, 1e-4)
    assert len(graphs.graphs) == 3  # (5, 13) and (7, 16) share the (8, 16) bucket


@pytest.mark.gpu
def test_a_pass_that_copies_host_tensors_to_the_device_is_replayed():
    # MPNet's relative position buckets are made on the host and copied over in every pass.
    class HostPositions(torch.nn.Module):
        config = None

        def forward(self, input_ids, attention_mask):
            positions = (torch.arange(input_ids.shape[1]) % 7 + 1).to(input_ids.device)
            return {"last_hidden_state": (input_ids * positions[None, :]).float()}

    module, graphs = HostPositions(), GraphedEncoder()
    for rows, width, seed in [(3, 20, 1), (3, 20, 2), (2, 40, 3)]:
        inputs = _ids_and_mask(_pass(rows, width, 0, "cuda", seed))
        replayed = graphs(module, (), inputs, _no_autocast)
        assert replayed is not None and graphs.failed is None
        assert torch.equal(replayed["last_hidden_state"], module(**inputs)["last_hidden_state"])
    assert len(graphs.graphs) == 2


@pytest.mark.gpu
def test_a_pass_whose_host_values_change_between_passes_runs_eagerly():
    class Counter(torch.nn.Module):
        config = None
        calls = 0

        def forward(self, input_ids, attention_mask):
            self.calls += 1
            return {"last_hidden_state": input_ids.float() + torch.tensor(float(self.calls)).to(input_ids.device)}

    graphs = GraphedEncoder()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert graphs(Counter(), (), _ids_and_mask(_pass(2, 10, 0, "cuda")), _no_autocast) is None
    assert "other values than in the warm-up pass" in graphs.failed
    assert any("CUDA graphs are off" in str(w.message) for w in caught)


@pytest.mark.gpu
def test_eager_grid_passes_leave_the_lstms_weights_where_the_graphs_read_them():
    network = _grid_network("cuda")
    vectors, lengths = _grid_pass(4, 9, 1, "cuda")
    with torch.no_grad():
        network(vectors, lengths)  # packs the sequences: cuDNN's LSTM puts its weights in one block
        where = [weight.data_ptr() for weight in network.lstm.parameters()]
        network(vectors, lengths)
    assert [weight.data_ptr() for weight in network.lstm.parameters()] == where
