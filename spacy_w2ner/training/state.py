"""The optimizer's state, as files a new process can read back, and the pipeline's parameters
walked in one order under names that do not change between processes.

Thinc's ``Optimizer`` keys its moments, averages and update counts by ``(node or shim id,
parameter name)``; ids come from process-wide counters, so a new process gives the same node
another id. The state is saved under names that do not change between processes (the
component, the node's place in ``Model.walk()`` and its name, the shim's place, the parameter)
and mapped back to the new process's keys on loading. The learning-rate (and other) schedules
are generators and cannot be saved: a resumed run advances them step by step while it replays
its steps (``replay.py``), and the values they had are checked against the saved ones.
"""
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Optional, Tuple

import numpy
from thinc.api import Model, Optimizer, get_current_ops

from ..nn.shim import torch_module
from .checkpoints import OPTIMIZER_ARRAYS, OPTIMIZER_STATE

Key = Tuple[int, str]

# Scalars an optimizer holds, which its schedules may set.
HYPERPARAMETERS = ("learn_rate", "b1", "b2", "eps", "L2", "grad_clip")
# Its per-parameter arrays, each a dict keyed like the update counts.
ARRAY_STORES = ("mom1", "mom2", "averages")


class StateError(ValueError):
    """A checkpoint's state does not fit this pipeline or optimizer."""


@dataclass(frozen=True)
class PipelineParameter:
    """One trainable parameter: the optimizer's key, a stable name, and where it lives (a Thinc
    node's ``param_name``, or a torch ``tensor`` of one of its shims)."""

    key: Key
    name: str
    node: Model
    param_name: str
    tensor: Optional[object] = None  # torch.nn.Parameter for a shim's parameter


def walk_parameters(nlp, exclude: Iterable[str] = ()) -> Iterator[PipelineParameter]:
    """Every parameter of the pipeline's components (but ``exclude``), once each, in pipeline
    order, then ``Model.walk()`` order: the same order in every process that builds the pipeline
    from the same config. Names: ``component/walk index:node name[/shim index]#parameter``."""
    seen = set()
    for component, pipe in nlp.components:
        model = getattr(pipe, "model", None)
        if component in exclude or not isinstance(model, Model):
            continue
        for index, node in enumerate(model.walk()):
            place = f"{component}/{index}:{node.name}"
            found = [((node.id, name), f"{place}#{name}", name, None) for name in node.param_names]
            for shim_index, shim in enumerate(node.shims):
                module = torch_module(shim)
                for name, tensor in module.named_parameters() if hasattr(module, "named_parameters") else ():
                    found.append(((shim.id, name), f"{place}/shim{shim_index}#{name}", name, tensor))
            for key, name, param_name, tensor in found:
                if key not in seen:
                    seen.add(key)
                    yield PipelineParameter(key, name, node, param_name, tensor)


def parameter_names(nlp) -> Dict[Key, str]:
    """Every optimizer key the pipeline's parameters can have -> a name stable across processes."""
    return {parameter.key: parameter.name for parameter in walk_parameters(nlp)}


def _stable(names: Dict[Key, str], key: Key) -> str:
    if key not in names:
        raise StateError(f"the optimizer holds state for a parameter the pipeline does not have: {key[1]!r} of node {key[0]}")
    return names[key]


def save_optimizer(optimizer: Optimizer, nlp, directory: Path) -> List[Path]:
    """Write the optimizer's state to ``OPTIMIZER_ARRAYS`` (its arrays) and ``OPTIMIZER_STATE``
    (the rest); return the files written."""
    names = parameter_names(nlp)
    ops = get_current_ops()
    arrays, entries = {}, []
    for store_name in ARRAY_STORES:
        store = getattr(optimizer, store_name) or {}
        for key, array in store.items():
            arrays[f"a{len(entries)}"] = ops.to_numpy(array)
            entries.append([store_name, _stable(names, key)])
    counts = {kind: {_stable(names, key): int(n) for key, n in getattr(optimizer, kind).items()} for kind in ("nr_update", "last_seen")}
    meta = {
        "arrays": entries,
        "counts": counts,
        "hyperparameters": {name: getattr(optimizer, name) for name in HYPERPARAMETERS},
        "uses_averages": optimizer.averages is not None,
    }
    with (directory / OPTIMIZER_ARRAYS).open("wb") as file:
        numpy.savez(file, **arrays)
    (directory / OPTIMIZER_STATE).write_text(json.dumps(meta), encoding="utf8")
    return [directory / OPTIMIZER_ARRAYS, directory / OPTIMIZER_STATE]


def load_optimizer(optimizer: Optimizer, nlp, directory: Path, check_schedules: bool = True) -> None:
    """Give ``optimizer`` (made from the same config, its schedules already advanced to the
    checkpoint's step) the saved moments, averages and update counts; StateError when they do not
    fit, or (``check_schedules``) when its scheduled values differ from the saved ones."""
    meta = json.loads((directory / OPTIMIZER_STATE).read_text(encoding="utf8"))
    keys = {name: key for key, name in parameter_names(nlp).items()}
    if meta["uses_averages"] != (optimizer.averages is not None):
        raise StateError("the checkpoint's optimizer and this one differ in use_averages")
    for store_name, key, array in _saved_arrays(meta, keys, directory):
        getattr(optimizer, store_name)[key] = array
    for kind, counts in meta["counts"].items():
        store = getattr(optimizer, kind)
        store.clear()
        store.update({_key(keys, name): n for name, n in counts.items()})
    for name, saved in meta["hyperparameters"].items():
        if check_schedules and getattr(optimizer, name) != saved:
            raise StateError(f"the optimizer's {name} is {getattr(optimizer, name)!r} at this step, the checkpoint's {saved!r}")


def load_averages(nlp, directory: Path) -> Dict[Key, object]:
    """The moving averages a checkpoint's optimizer kept (empty without ``use_averages``), keyed
    for ``nlp``, a pipeline loaded from that checkpoint: ``nlp.use_params`` takes them."""
    meta = json.loads((directory / OPTIMIZER_STATE).read_text(encoding="utf8"))
    keys = {name: key for key, name in parameter_names(nlp).items()}
    return {key: array for store_name, key, array in _saved_arrays(meta, keys, directory) if store_name == "averages"}


def _saved_arrays(meta: dict, keys: Dict[str, Key], directory: Path) -> List[Tuple[str, Key, object]]:
    """``(store name, key, array)`` for each array ``OPTIMIZER_ARRAYS`` holds, keyed for this process."""
    ops = get_current_ops()
    with numpy.load(directory / OPTIMIZER_ARRAYS, allow_pickle=False) as arrays:
        return [(store_name, _key(keys, name), ops.asarray(arrays[f"a{index}"])) for index, (store_name, name) in enumerate(meta["arrays"])]


def _key(keys: Dict[str, Key], name: str) -> Key:
    if name not in keys:
        raise StateError(f"the checkpoint has optimizer state for {name}, which this pipeline does not have")
    return keys[name]
