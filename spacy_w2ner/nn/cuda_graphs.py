"""Prediction passes on a GPU replayed from CUDA graphs: a forward pass's host work made one
call, for the encoder (``GraphedEncoder``) and the grid network (``GraphedGridNetwork``).

On a GPU, predicting sentences is bound by the host. A BERT-base-size forward pass is about 700
torch operators and 450 module calls (MPNet, counted on a CPU), the grid network's about 230
operators, each some microseconds of Python and a kernel launch, for a few milliseconds of the
device's arithmetic at 32 sentences (an H100 spent 6.2 ms a grid batch of 32 CADEC test
sentences in the grid network: bench/results/gpu-h100-2026-11-27b). A CUDA graph records the
kernels of one forward pass and replays them all in one call. Its shapes are fixed, so a pass
is padded up to a bucket: the encoder's rows to a power of two and wordpieces to a multiple of
``WIDTH_STEP``, padded with the pad token and an attention mask of 0 (no real wordpiece attends
to a padded one: their mask adds the dtype's minimum before the softmax, whose weights for them
are then exactly 0); the grid network's segments to a power of two and words to a multiple of
``GRID_WORDS_STEP``, padded with zero vectors and lengths (its padding cells are masked). So
the real rows' outputs are those of the unpadded pass, to the rounding of kernels of other
shapes. The outputs are copied out of the graph's buffers before the next replay can write them.

Each ``GraphedPasses`` keeps one graph per bucket, set of other arguments and float32 math mode
(``float32_math``: TF32 or not), all in one memory pool (a replay uses the pool's memory only
while it runs: inputs are copied in and outputs out around each replay), at most ``max_graphs``
of them; a pass it cannot replay (on the CPU, over the limit, a module whose forward reads a
value back to the host, which a capture cannot record) runs as before. A copy from the host
within a pass (MPNet's relative position buckets) is recorded as a copy on the device of the
warm-up pass's (``HostCopiesFromWarmUp``). A graph reads the weights where they were when it
was recorded: ``use_params`` (the averages copied into the weights and back) keeps the graphs; a
training step does not (``nn.adam``'s step gives every weight the other of two buffers, Thinc's
loop new arrays), nor does another module or moving it: the graphs are then recorded again at the
next prediction, so they pay off when predicting, not between training steps (spaCy's
evaluations during training record theirs anew). Which layers' outputs the encoder's keep
(``top_layers``: the ones the encoder averages) bounds the memory its graphs' outputs hold.
Turned off (``attach_graphs``), the graphs are kept for when they are on again.
"""
import contextlib
import functools
import threading
import warnings
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple

import torch

try:  # private: torch has no public dispatch mode; this module is its one user (``host_copies_mode``)
    from torch.utils._python_dispatch import TorchDispatchMode
except ImportError:  # a torch without it: a pass that copies from the host runs eagerly
    TorchDispatchMode = None

from .transfers import to_device

WIDTH_STEP = 32  # wordpieces: a pass's width is padded up to a multiple of this
GRID_WORDS_STEP = 8  # words: a grid batch's side (a GPU's grid batches already come so: ``model.padding``)
MAX_GRAPHS = 48
WARMUP_PASSES = 2  # eager passes on a side stream before a capture (cuBLAS's workspaces, lazy init)
# Keyword arguments that are (rows, wordpieces) tensors, and the value their padding takes
# (None: the module's pad token id).
PADDED_INPUTS = {"input_ids": None, "attention_mask": 0, "token_type_ids": 0, "position_ids": 0}
# A transformer's outputs whose second dimension is the wordpieces; every other one has a row
# per span (the encoder's passes merge them so too).
SEQUENCE_OUTPUTS = ("last_hidden_state", "hidden_states")


def bucket_shape(rows: int, width: int) -> Tuple[int, int]:
    """The padded shape a (rows, width) pass is replayed at."""
    return _power_of_two(rows), _multiple_of(width, WIDTH_STEP)


def _power_of_two(n: int) -> int:
    """The least power of two that is at least ``n`` (1 for 0)."""
    return 1 << max(n - 1, 0).bit_length()


def _multiple_of(n: int, step: int) -> int:
    """``n`` rounded up to a multiple of ``step``."""
    return -(-n // step) * step


def padding_values(pad_token_id: int) -> Dict[str, int]:
    """What each of ``PADDED_INPUTS`` is padded with, for a module whose pad token is ``pad_token_id``."""
    return {name: pad_token_id if fill is None else fill for name, fill in PADDED_INPUTS.items()}


def pad_inputs(kwargs: Mapping, shape: Tuple[int, int], pad_token_id: int) -> Dict:
    """``kwargs`` with its (rows, wordpieces) tensors padded to ``shape`` (new tensors)."""
    padded = dict(kwargs)
    for name, fill in padding_values(pad_token_id).items():
        value = kwargs.get(name)
        if isinstance(value, torch.Tensor):
            padded[name] = _padded(value, shape, fill, value.device)
    return padded


def square_mask(kwargs: Mapping) -> Dict:
    """``kwargs`` with a (rows, wordpieces) attention mask given as (rows, wordpieces, wordpieces):
    each wordpiece's own row of the same mask, a view. Transformers' encoders take both alike (the
    same additive mask before the softmax), but for a 2-d mask BERT's and RoBERTa's SDPA
    attention first ask whether every wordpiece is real (``torch.all(mask == 1)``), a read-back
    to the host that no capture can hold."""
    mask = kwargs.get("attention_mask")
    if not isinstance(mask, torch.Tensor) or mask.dim() != 2:
        return dict(kwargs)
    return {**kwargs, "attention_mask": mask[:, None, :].expand(-1, mask.shape[1], -1)}


def unpad_outputs(output, rows: int, width: int, top_layers: Optional[int] = None):
    """A model output (a ``ModelOutput``) of a padded pass cut back to ``rows`` and ``width``,
    copied (the graph's buffers are written again by the next replay). ``top_layers``: only
    that many of ``hidden_states`` are copied; the lower ones are None, the tuple as long."""
    fields = {}
    for key, value in output.items():
        sequence = key in SEQUENCE_OUTPUTS
        if isinstance(value, tuple):
            keep = len(value) if top_layers is None else top_layers
            fields[key] = tuple(
                _cut(item, rows, width, sequence) if k >= len(value) - keep else None for k, item in enumerate(value)
            )
        elif isinstance(value, torch.Tensor):
            fields[key] = _cut(value, rows, width, sequence)
        else:
            fields[key] = value
    return type(output)(**fields)


def _cut(tensor: torch.Tensor, rows: int, width: int, sequence: bool) -> torch.Tensor:
    return (tensor[:rows, :width] if sequence else tensor[:rows]).clone()


class CudaGraphRecorder:
    """Records a function's kernels in a CUDA graph, after warm-up runs on a side stream (cuBLAS's
    workspaces, lazy initialisation), all graphs in one memory pool."""

    device_type = "cuda"

    def __init__(self) -> None:
        self._pool = None

    def __call__(self, run: Callable[[], Any]) -> Tuple[Callable[[], None], Any]:
        """(replay, the output buffers that each replay writes) of ``run``, whose inputs are
        buffers too; RuntimeError (``run``'s own, where it raised one) where ``run`` does what a
        capture cannot hold. The current stream is the caller's again afterwards, even then
        (``torch.cuda.graph`` leaves its capture stream current when the capture fails)."""
        if self._pool is None:
            self._pool = torch.cuda.graph_pool_handle()
        caller = torch.cuda.current_stream()
        side = torch.cuda.Stream()
        side.wait_stream(caller)
        raised = []

        def run_keeping_its_error():
            try:
                return run()
            except RuntimeError as error:
                raised.append(error)
                raise

        host_copies = host_copies_mode()
        with torch.cuda.stream(side):
            for _ in range(WARMUP_PASSES):
                with host_copies.warming_up():
                    run()
            graph = torch.cuda.CUDAGraph()
            try:
                with torch.cuda.graph(graph, pool=self._pool, stream=side), host_copies.capturing():
                    output = run_keeping_its_error()
            except RuntimeError as error:
                raise (raised[0] if raised else error) from None
        caller.wait_stream(side)
        return functools.partial(_replay, graph, host_copies.device_values()), output


def host_copies_mode():
    """``HostCopiesFromWarmUp`` for a capture; where torch lacks its (private) dispatch mode, a
    stand-in under which a capture meets a pass's copies from the host as they are: torch refuses
    them, and such a pass runs eagerly (the warning of ``GraphedPasses``), as before the mode."""
    return HostCopiesFromWarmUp() if TorchDispatchMode is not None else _HostCopiesAsTheyCome()


class _HostCopiesAsTheyCome:
    def warming_up(self):
        return contextlib.nullcontext()

    def capturing(self):
        return contextlib.nullcontext()

    def device_values(self) -> list:
        return []


class HostCopiesFromWarmUp(TorchDispatchMode or object):
    """Copies from the host to the device within a recorded pass, given in the capture from the
    last warm-up pass's.

    A capture takes a copy from the host only from pinned memory and without waiting for it
    (torch refuses the others), yet a module may make a small tensor on the host in its forward
    pass and copy it over: MPNet's relative position buckets (``torch.arange`` on the host, then
    ``.to(device)``). What such a tensor holds can depend only on the pass's shapes and the
    module's settings (a capture cannot read device values back), the same in each replay of the
    graph. So each such copy of the last warm-up pass keeps its host value and its device result;
    in the capture, the n-th copy's host value must equal the n-th kept one (else RuntimeError:
    the pass runs eagerly), and the copy becomes a copy on the device from the kept result, which
    the graph then reads in every replay."""

    def __init__(self) -> None:
        super().__init__()
        self._kept: list = []  # (host value, device value) of each copy, in order
        self._capturing = False
        self._taken = 0

    def warming_up(self) -> "HostCopiesFromWarmUp":
        """This mode for a warm-up pass: its copies run and are kept (the previous pass's dropped)."""
        self._kept, self._capturing = [], False
        return self

    def capturing(self) -> "HostCopiesFromWarmUp":
        """This mode for the capture: its copies are given from the kept ones."""
        self._capturing, self._taken = True, 0
        return self

    def device_values(self) -> list:
        """The kept copies' device values, which the captured copies read."""
        return [device for _, device in self._kept]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        host = _host_source(func, args, kwargs)
        if host is None:
            return func(*args, **kwargs)
        makes_a_tensor = func is torch.ops.aten._to_copy.default  # else copy_ into a device tensor
        if not self._capturing:
            result = func(*args, **kwargs)
            self._kept.append((host.clone(), (result if makes_a_tensor else args[0]).clone()))
            return result
        kept = self._take(host)
        return kept.clone() if makes_a_tensor else args[0].copy_(kept)

    def _take(self, host: torch.Tensor) -> torch.Tensor:
        """The device value kept for the next copy, whose host value is ``host``."""
        number, self._taken = self._taken, self._taken + 1
        if number >= len(self._kept):
            raise RuntimeError(f"copy {number + 1} from the host to the device was not in the warm-up pass")
        kept_host, kept_device = self._kept[number]
        same = kept_host.shape == host.shape and kept_host.dtype == host.dtype and torch.equal(kept_host, host)
        if not same:
            raise RuntimeError(f"copy {number + 1} from the host to the device holds other values than in the warm-up pass")
        return kept_device


def _replay(graph: "torch.cuda.CUDAGraph", held: list) -> None:
    """Replays ``graph``; ``held``: tensors its kernels read, kept as long as the replay is."""
    graph.replay()


def _host_source(func, args: Sequence, kwargs: Mapping) -> Optional[torch.Tensor]:
    """The host tensor that an operator copies to a device (``tensor.to(device)``,
    ``device_tensor.copy_(host_tensor)``), or None."""
    if func is torch.ops.aten._to_copy.default:
        source, device = args[0], kwargs.get("device")
        to_a_device = device is not None and torch.device(device).type != "cpu"
    elif func is torch.ops.aten.copy_.default:
        source, to_a_device = args[1], args[0].device.type != "cpu"
    else:
        return None
    return source if isinstance(source, torch.Tensor) and source.device.type == "cpu" and to_a_device else None


class GraphedPasses:
    """A module's prediction passes on a CUDA device, replayed from graphs (module docstring): what
    the encoder's and the grid network's passes share. A subclass says which tensors a pass has
    (``_pass_tensors``), the bucket each is padded to (``_bucket_shapes``), what else a graph is
    specific to (``_signature``), what padding holds (``_fills``), how the module runs on the
    padded buffers (``_forward``) and how an output is cut back (``_cut``).

    Called with the module, a pass's positional and keyword arguments and the prediction's
    autocast (a function giving the context), it gives the pass's output, or None where the pass
    is not for a graph (the caller runs it eagerly). ``recorder``: what records a pass (the tests
    give one that runs on a CPU)."""

    what = "module"  # named in the warning when recording fails

    def __init__(self, max_graphs: int = MAX_GRAPHS, recorder=None) -> None:
        self.max_graphs = max_graphs
        self.recorder = recorder or CudaGraphRecorder()
        self.graphs: Dict[tuple, "_Graph"] = {}
        self.enabled = True  # off: every pass runs eagerly, the graphs kept for when it is on again
        self.failed: Optional[str] = None  # why recording failed: the module runs eagerly from then on
        self._lock = threading.Lock()  # a graph's buffers serve one pass at a time
        # The module the graphs are of, its parameters and buffers, and where they live
        self._module_id: Optional[int] = None
        self._tensors: list = []
        self._storage: tuple = ()

    def __call__(self, module: torch.nn.Module, args: Sequence, kwargs: Mapping, autocast: Callable):
        tensors = self._pass_tensors(args, kwargs) if self.enabled and not self.failed else None
        if not tensors or next(iter(tensors.values())).device.type != self.recorder.device_type:
            return None
        shapes = self._bucket_shapes(tensors)
        key = (tuple(shapes.items()), self._signature(args, kwargs), float32_math())
        with self._lock:
            self._forget_graphs_of_other_weights(module)
            graph = self.graphs.get(key)
            if graph is None:
                if len(self.graphs) >= self.max_graphs:
                    return None
                graph = self._record(module, args, kwargs, tensors, shapes, autocast)
                if graph is None:
                    return None
                self.graphs[key] = graph
            return self._cut(graph.replay(tensors), tensors)

    def _forget_graphs_of_other_weights(self, module: torch.nn.Module) -> None:
        """Drop every graph when ``module`` is another module than theirs, or its weights live in
        other memory than they read (a graph reads where the weights were when it was recorded).
        ``use_params`` copies into the weights and keeps them; a training step (``nn.adam``: the
        other of two buffers; Thinc's own loop: new arrays), or moving the module, gives the weights
        other memory. The module's tensors are listed once per
        module (walking its submodules costs 0.8 ms for MPNet-base), their addresses read each
        pass."""
        if id(module) != self._module_id:
            self._module_id, self._tensors = id(module), [*module.parameters(), *module.buffers()]
        storage = tuple(tensor.data_ptr() for tensor in self._tensors)
        if storage != self._storage:
            self.graphs.clear()
            self._storage = storage

    def _record(self, module, args, kwargs, tensors, shapes, autocast) -> Optional["_Graph"]:
        """The module's pass on its tensors padded to ``shapes`` (the graph's input buffers, on the
        device of the pass's first tensor), recorded; None (and eager from then on) if the module
        does what a capture cannot hold (a read-back to the host)."""
        fills = self._fills(module)
        device = next(iter(tensors.values())).device
        static = {name: _padded(value, shapes[name], fills[name], device) for name, value in tensors.items()}

        def run():
            with torch.no_grad(), autocast():
                return self._forward(module, args, kwargs, static)

        try:
            replay, output = self.recorder(run)
        except RuntimeError as error:
            self.failed = f"{type(module).__name__}: {error}".splitlines()[0]
            warnings.warn(f"spacy_w2ner: CUDA graphs are off for this {self.what}, which predicts as before ({self.failed})")
            return None
        return _Graph(replay, {name: (static[name], fills[name]) for name in static}, output)

    def _pass_tensors(self, args: Sequence, kwargs: Mapping) -> Optional[Dict[str, torch.Tensor]]:
        raise NotImplementedError

    def _bucket_shapes(self, tensors: Mapping[str, torch.Tensor]) -> Dict[str, Tuple[int, ...]]:
        raise NotImplementedError

    def _signature(self, args: Sequence, kwargs: Mapping) -> tuple:
        raise NotImplementedError

    def _fills(self, module: torch.nn.Module) -> Dict[str, float]:
        raise NotImplementedError

    def _forward(self, module: torch.nn.Module, args: Sequence, kwargs: Mapping, static: Mapping[str, torch.Tensor]):
        raise NotImplementedError

    def _cut(self, output, tensors: Mapping[str, torch.Tensor]):
        raise NotImplementedError


class GraphedEncoder(GraphedPasses):
    """A transformer's prediction passes (keyword arguments, ``PADDED_INPUTS`` of (rows,
    wordpieces)): padded to ``bucket_shape``, the attention mask given square (``square_mask``),
    outputs cut back to the pass and copied, only the ``top_layers`` of ``hidden_states`` kept."""

    what = "encoder"

    def __init__(self, top_layers: Optional[int] = None, max_graphs: int = MAX_GRAPHS, recorder=None) -> None:
        super().__init__(max_graphs, recorder)
        self.top_layers = top_layers

    def _pass_tensors(self, args, kwargs):
        ids = kwargs.get("input_ids")
        if args or not isinstance(ids, torch.Tensor) or ids.dim() != 2:
            return None
        return {name: kwargs[name] for name in PADDED_INPUTS if isinstance(kwargs.get(name), torch.Tensor)}

    def _bucket_shapes(self, tensors):
        shape = bucket_shape(*tensors["input_ids"].shape)
        return {name: shape for name in tensors}

    def _signature(self, args, kwargs):
        return tuple(sorted((name, _argument_signature(value)) for name, value in kwargs.items()))

    def _fills(self, module):
        return padding_values(_pad_token_id(module))

    def _forward(self, module, args, kwargs, static):
        return _keep_top_layers(module(**square_mask({**kwargs, **static})), self.top_layers)

    def _cut(self, output, tensors):
        return unpad_outputs(output, *tensors["input_ids"].shape, self.top_layers)


class GraphedGridNetwork(GraphedPasses):
    """The grid network's prediction passes (``nn.network.GridNetwork``: word vectors (segments,
    words, width) and their lengths): segments padded to a power of two and words to a multiple
    of ``GRID_WORDS_STEP``, with zero vectors and zero lengths, the lengths copied to the device
    (its LSTM then runs unpacked, ``GridNetwork.encode_words``: packing reads them on the host);
    the logits cut back to (segments, words, words) and copied. Padding cells are masked through
    the network, so a segment's logits are the unpadded pass's, to float rounding."""

    what = "grid network"

    def _pass_tensors(self, args, kwargs):
        if len(args) != 2 or kwargs or not all(isinstance(value, torch.Tensor) for value in args) or args[0].dim() != 3:
            return None
        return {"vectors": args[0], "lengths": args[1]}

    def _bucket_shapes(self, tensors):
        segments, words, width = tensors["vectors"].shape
        rows = _power_of_two(segments)
        return {"vectors": (rows, _multiple_of(words, GRID_WORDS_STEP), width), "lengths": (rows,)}

    def _signature(self, args, kwargs):
        return tuple(str(value.dtype) for value in args)

    def _fills(self, module):
        return {"vectors": 0, "lengths": 0}

    def _forward(self, module, args, kwargs, static):
        with warnings.catch_warnings():
            # Its backward direction's LSTM weights are not at the start of the LSTM's one
            # block: cuDNN copies them into one for the call, a kernel the graph replays.
            warnings.filterwarnings("ignore", message="RNN module weights are not part of single contiguous")
            return module(static["vectors"], static["lengths"])

    def _cut(self, output, tensors):
        segments, words, _ = tensors["vectors"].shape
        return output[:segments, :words, :words].clone()


def attach_graphs(shims: Sequence, on: bool, make: Callable[[], GraphedPasses]) -> None:
    """Give each of ``shims`` (``nn.shim.FusedUpdate``'s) replayed passes (``make()``) the
    first time ``on`` is true, and enable or disable the ones they have with ``on``: turned off
    and on again, the graphs recorded before are replayed, not recorded anew (their memory stays
    held meanwhile; ``shim.cuda_graphs = None`` lets it go). A shim of Thinc's own class, which
    has none, gets none while off."""
    for shim in shims:
        if on and getattr(shim, "cuda_graphs", None) is None:
            shim.cuda_graphs = make()
        if getattr(shim, "cuda_graphs", None) is not None:
            shim.cuda_graphs.enabled = on


def float32_math() -> Tuple[str, bool]:
    """The float32 math mode that kernels are chosen under (TF32 for matrix products, for cuDNN):
    a graph replays the kernels of the mode it was recorded in, so each mode has its own."""
    return torch.get_float32_matmul_precision(), bool(torch.backends.cudnn.allow_tf32)


class _Graph:
    """One recorded pass: its padded input buffers (with their padding values), its replay, its
    output buffers."""

    def __init__(self, replay: Callable[[], None], inputs: Dict[str, Tuple[torch.Tensor, float]], output) -> None:
        self._replay, self.inputs, self.output = replay, inputs, output

    def replay(self, tensors: Mapping[str, torch.Tensor]):
        """The output buffers after a replay on ``tensors``, padded into the input buffers (a copy
        from the host does not wait for the device: ``nn.transfers``)."""
        for name, (buffer, fill) in self.inputs.items():
            value = to_device(tensors[name], buffer.device)
            buffer.fill_(fill)
            buffer[tuple(slice(0, size) for size in value.shape)].copy_(value)
        self._replay()
        return self.output


def _padded(value: torch.Tensor, shape: Tuple[int, ...], fill: float, device: torch.device) -> torch.Tensor:
    """A new tensor of ``shape`` on ``device``: ``value`` in its leading corner, ``fill`` elsewhere."""
    padded = torch.full(shape, fill, dtype=value.dtype, device=device)
    padded[tuple(slice(0, size) for size in value.shape)] = value
    return padded


def _keep_top_layers(output, top_layers: Optional[int]):
    """The output with ``hidden_states`` below the top ``top_layers`` dropped (None), so that the
    graph's pool does not hold them."""
    hidden = output.get("hidden_states") if hasattr(output, "get") else None
    if top_layers is None or not isinstance(hidden, tuple):
        return output
    output["hidden_states"] = tuple(h if k >= len(hidden) - top_layers else None for k, h in enumerate(hidden))
    return output


def _argument_signature(value):
    """What of a keyword argument a graph is specific to: a tensor's dtype and rank, or the value."""
    if isinstance(value, torch.Tensor):
        return ("tensor", str(value.dtype), value.dim())
    return value if isinstance(value, (bool, int, float, str, type(None))) else repr(value)


def _pad_token_id(module: torch.nn.Module) -> int:
    pad = getattr(getattr(module, "config", None), "pad_token_id", None)
    return 0 if pad is None else int(pad)
