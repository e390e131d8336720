"""The grid scorer: the torch grid network (``nn.network``) as a Thinc layer.

``grid_scorer_layer`` makes the Thinc node at config time, with no torch module: its
dims (``nI``, the word vector width from tok2vec; ``nO``, the number of relations from
the component's labels) are only known at ``initialize``. ``build_grid_scorer`` then
wraps a ``nn.network.GridNetwork`` for those dims, once. A saved pipeline's weights can only load
into a built module, so the component keeps the dims in its cfg (``grid_scorer_dims``)
and builds the module from them before loading (``build_for_loading``); pipelines saved
by 0.1.0 kept them in the model bytes only (``legacy_grid_scorer_dims``).

The layer takes padded word vectors and their lengths and gives logits (segments,
longest, longest, relations): Thinc arrays in training, the torch tensor itself when
predicting (``predictions.HostGrids`` reduces it on its device).
"""
import os
from typing import Any, Callable, Dict, Optional, Tuple

import srsly
import torch
from thinc.api import Model, PyTorchGradScaler, PyTorchWrapper_v2, get_torch_default_device, torch2xp, xp2torch
from thinc.layers.pytorchwrapper import convert_pytorch_default_outputs
from thinc.types import ArgsKwargs, Floats3d, Ints1d

from ..nn.bfloat16 import BFloat16Settings, use_bfloat16
from ..nn.cuda_graphs import GraphedGridNetwork, attach_graphs
from ..nn.shim import FusedPyTorchShim, fuse_updates, grad_scaler, torch_module
from ..nn.network import GridNetwork, saved_bytes_per_cell
from .types import no_backprop

GRID_SCORER_NAME = "w2ner_grid_scorer"


def grid_scorer_layer(
    nO: Optional[int],
    hyper: Dict[str, Any],
    mixed_precision: bool,
    mixed_precision_dtype: str,
    grad_scaler_config: dict,
    bfloat16: BFloat16Settings = BFloat16Settings(),
) -> Model:
    """The grid scorer's Thinc node; its torch module is built at initialize (``build_grid_scorer``).
    ``bfloat16``: its training and inference dtypes (``nn.bfloat16``), an attr Thinc does not save
    (the config says it on every load)."""
    return Model(
        GRID_SCORER_NAME,
        _grid_scorer_forward,
        dims={"nI": None, "nO": nO},
        attrs={
            "hyper": hyper,
            "mixed_precision": mixed_precision,
            "mixed_precision_dtype": mixed_precision_dtype,
            "grad_scaler_config": dict(grad_scaler_config),
            # Prediction passes on a GPU replayed from CUDA graphs (``nn/cuda_graphs.py``); off
            # until a GPU's figures decide, the GPU bench turns it on.
            "cuda_graphs": False,
            "bfloat16": bfloat16,
        },
    )


def _grid_scorer_forward(model: Model, X: Tuple[Floats3d, Ints1d], is_train: bool):
    if not model.layers:
        raise ValueError("The w2ner grid scorer was used before initialization")
    if not is_train:
        attach_graphs(model.layers[0].shims, model.attrs.get("cuda_graphs", False), GraphedGridNetwork)
    return model.layers[0](X, is_train)


def drop_grid_network(grid_scorer: Model) -> None:
    """Let go of the built torch module: initializing again builds a fresh one (as spaCy's own
    components start over with fresh weights), for the labels read then."""
    grid_scorer.layers.clear()


def build_grid_scorer(grid_scorer: Model) -> None:
    """Create the torch module for the grid scorer's dims, once."""
    if grid_scorer.layers:
        return
    _single_threaded_torch_in_forked_children()
    attrs = grid_scorer.attrs
    module = GridNetwork(grid_scorer.get_dim("nI"), grid_scorer.get_dim("nO"), **attrs["hyper"])
    scaler = grad_scaler_settings(
        attrs["grad_scaler_config"],
        attrs["mixed_precision"],
        get_torch_default_device().type,
        attrs.get("mixed_precision_dtype", "float16"),
    )
    wrapper = PyTorchWrapper_v2(
        module,
        convert_inputs=_convert_padded_inputs,
        convert_outputs=_convert_outputs,
        mixed_precision=attrs["mixed_precision"],
        grad_scaler=PyTorchGradScaler(**scaler),
    )
    fuse_updates(wrapper.shims[0], FusedPyTorchShim, attrs.get("mixed_precision_dtype", "float16"))
    use_bfloat16(wrapper.shims, attrs.get("bfloat16") or BFloat16Settings(), attrs, "grid network")  # nn/bfloat16.py
    grid_scorer.layers.append(wrapper)  # Thinc: "you can append to it to add layers"


def grad_scaler_settings(
    config: dict, mixed_precision: bool, device_type: str, dtype: str = "float16"
) -> dict:
    """The grad scaler's settings: on by default when mixed precision trains on CUDA in float16.

    Without loss scaling, float16 gradients of small losses underflow to zero; bfloat16
    has float32's range and needs none. Thinc's scaler only works on CUDA tensors, and
    autocast does nothing elsewhere, so on a CPU it stays off. ``enabled`` in
    ``grad_scaler_config`` wins, as in spacy-transformers.
    """
    settings = dict(config)
    settings.setdefault("enabled", bool(mixed_precision) and device_type == "cuda" and dtype == "float16")
    return settings


_FORK_HOOK_REGISTERED = False


def _single_threaded_torch_in_forked_children() -> None:
    """Let forked workers (``nlp.pipe(n_process=...)``) run torch on one thread.

    A child forked after torch used its OpenMP thread pool deadlocks in its first
    parallel op; with one thread per child no pool is touched. The processes
    already give the parallelism.
    """
    global _FORK_HOOK_REGISTERED
    if _FORK_HOOK_REGISTERED or not hasattr(os, "register_at_fork"):
        return
    os.register_at_fork(after_in_child=lambda: torch.set_num_threads(1))
    _FORK_HOOK_REGISTERED = True


def _convert_padded_inputs(model: Model, X: Tuple[Floats3d, Ints1d], is_train: bool):
    vectors, lengths = X
    vectors_torch = xp2torch(vectors, requires_grad=is_train)
    # On the host: the LSTM's packing reads them there (no copy back from the device).
    lengths_torch = torch.as_tensor(model.ops.to_numpy(lengths), dtype=torch.int64)

    def convert_back(d_inputs: ArgsKwargs) -> Floats3d:
        return torch2xp(d_inputs.args[0])

    return ArgsKwargs(args=(vectors_torch, lengths_torch), kwargs={}), convert_back


def _convert_outputs(model: Model, inputs_outputs, is_train: bool):
    """Thinc's conversion of the logits in training; when predicting, the torch tensor itself
    (``HostGrids`` reduces it on its device, with no round trip through CuPy)."""
    if is_train:
        return convert_pytorch_default_outputs(model, inputs_outputs, is_train)
    return inputs_outputs[1], no_backprop


def grid_overflowed(grid_scorer: Model) -> bool:
    """Whether the grid network's float16 loss scaling met an overflow in this step's backward
    passes so far (``nn.shim.FusedUpdate``): the step is then skipped."""
    shim = grid_scorer.layers[0].shims[0] if grid_scorer.layers else None
    return bool(shim is not None and grad_scaler(shim).found_inf)


def grid_bytes_per_cell(model: Model) -> float:
    """The bytes the grid network keeps per grid cell for a training backward pass (measured:
    ``nn.network.saved_bytes_per_cell``)."""
    grid_scorer = model.get_ref("grid_scorer")
    return saved_bytes_per_cell(torch_module(grid_scorer.layers[0].shims[0]), grid_scorer.get_dim("nI"))


def grid_device(model: Model) -> torch.device:
    """The device the grid network's weights are on."""
    return next(torch_module(model.get_ref("grid_scorer").layers[0].shims[0]).parameters()).device


def grid_scorer_dims(model: Model) -> Dict[str, int]:
    """The dims the torch module is built from (``nI``: word vector width, ``nO``: relations)."""
    grid_scorer = model.get_ref("grid_scorer")
    return {dim: grid_scorer.get_dim(dim) for dim in ("nI", "nO")}


def build_for_loading(model: Model, cfg: dict, model_bytes: Callable[[], bytes]) -> Dict[str, int]:
    """Set the grid scorer's dims (the component's saved ``cfg``'s; in the model's bytes for
    pipelines saved by 0.1.0, ``legacy_grid_scorer_dims``) and build its torch module, so saved
    weights can load into it; the dims."""
    dims = {"nI": cfg["nI"], "nO": cfg["nO"]} if "nI" in cfg and "nO" in cfg else legacy_grid_scorer_dims(model, model_bytes())
    grid_scorer = model.get_ref("grid_scorer")
    for dim, value in dims.items():
        grid_scorer.set_dim(dim, value, force=True)
    build_grid_scorer(grid_scorer)
    return dims


def legacy_grid_scorer_dims(model: Model, model_bytes: bytes) -> Dict[str, int]:
    """The grid scorer's dims stored inside the model bytes of a pipeline saved by 0.1.0.

    Version 0.1.0 kept them in the model only; later versions keep them in the
    component's cfg. Reads Thinc's serialized node list, for those pipelines alone.
    """
    node_ids = [node.id for node in model.walk()]
    index = node_ids.index(model.get_ref("grid_scorer").id)
    dims = srsly.msgpack_loads(model_bytes)["nodes"][index]["dims"]
    return {dim: dims[dim] for dim in ("nI", "nO")}
