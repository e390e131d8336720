"""int8 Linear layers for CPU inference: weights int8 per output channel, activations
quantized per call (dynamic quantization), everything else float32.

The runtime is torch's own eager dynamic quantization (``torch.ao.quantization``): on this
project's CPUs it ran MiniLM's Linear layers 2.1-2.3x faster than float32, where torchao's
eager int8 configurations (the maintained path, which relies on ``torch.compile`` for speed)
ran 0.74x and 0.96x; ONNX Runtime's int8 encoder ran slower than torch's (bench/README.md,
"Fast CPU inference"). torch says ``torch.ao.quantization`` is deprecated; it is kept behind
this module, so that another runtime replaces one function.

Activations get all 8 bits where the CPU has AVX-512 VNNI (its int8 dot products accumulate in
int32), and 7 where it does not: torch's dynamic Linear always uses 7 (``reduce_range``), which
guards the older AVX2 kernels' 16-bit sums against overflow, and the lost bit cost the CADEC
model 0.3-1.1 F (bench/README.md, "Fast CPU inference").

Which layers become int8 is a list of regular expressions over the module's layer names
(``re.search``), so that a saved pipeline says exactly what it quantized: ``INT8_PRESETS``.
"""
import re
import warnings
from typing import Dict, List, Optional, Sequence

import torch

from . import cpu

# The encoder's Linear layers by role, for BERT-like names (BERT, MiniLM, RoBERTa: "attention.self.query",
# "attention.output.dense", "intermediate.dense", "output.dense"; MPNet: "attention.attn.q", ...;
# DistilBERT: "attention.q_lin", "ffn.lin1", "ffn.lin2"). The feed-forward input layers read the
# layer norms' outlier channels, which per-call activation scales round away (CADEC: -0.4 F); the
# output layers read the GELU's outputs and keep the accuracy (bench/README.md, "Fast CPU inference").
FFN_OUTPUT = r"layer\.\d+\.output\.dense|ffn\.lin2"  # no "$": a config writes it "$$"
INT8_PRESETS: Dict[str, List[str]] = {
    "all": [r"."],
    "attention": [r"attention|attn"],
    "attention+ffn-out": [r"attention|attn", FFN_OUTPUT],
    "attention+ffn-in": [r"attention|attn", r"intermediate|ffn\.lin1"],
}


ACTIVATION_BITS = 8 if cpu.has_vnni() else 7


def cpu_features() -> Dict[str, object]:
    """This CPU as ``optimize`` records it (``nn.cpu``), with the bits int8 layers give activations."""
    return cpu.cpu_features(ACTIVATION_BITS)


def default_preset() -> str:
    """What ``optimize --force`` writes where no preset measured faster with the same entities
    (``optimize`` measures every preset first): the fastest preset that kept CADEC's F within 0.3
    of float32's with this CPU's activation bits (bench/results/cpu-int8-layers.json: with 8 bits the attention and
    feed-forward output layers, dev -0.14, test -0.10; with 7 bits those lost 0.76 on test, the
    attention layers alone 0.25)."""
    return "attention+ffn-out" if ACTIVATION_BITS >= 8 else "attention"


def fewer_bits_warning(layer_names: Sequence[str]) -> Optional[str]:
    """Why int8 layers beyond the attention ones may lose accuracy on this CPU (7-bit
    activations, no AVX-512 VNNI), or None where they get 8 bits or are all attention layers."""
    beyond = [name for name in layer_names if not any(re.search(p, name) for p in INT8_PRESETS["attention"])]
    if ACTIVATION_BITS >= 8 or not beyond:
        return None
    return (
        f"{len(beyond)} int8 layers beyond the attention ones (e.g. {beyond[0]}): this CPU has no AVX-512 VNNI, "
        "so int8 activations get 7 bits, not 8, and there that cost accuracy (CADEC: attention+ffn-out -0.76 F, "
        "attention -0.25). On this CPU, optimize the float32 pipeline with --int8 attention"
    )


class Int8Linear(torch.ao.nn.quantized.dynamic.Linear):
    """torch's dynamic int8 Linear whose activations use ``ACTIVATION_BITS`` (8 with VNNI).

    Its forward is the parent's with ``reduce_range`` chosen: it reads the packed weights as the
    parent does (``_packed_params``, which torch has no public name for; this class is the
    package's one reader, and ``tests/nn/test_int8.py`` fails where a torch moves them)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        packed = self._packed_params._packed_params
        reduce_range = ACTIVATION_BITS < 8
        return torch.ops.quantized.linear_dynamic(x, packed, reduce_range=reduce_range).to(x.dtype)


def int8_option(text: str) -> List[str]:
    """``--int8``'s value as patterns: a preset's name, or comma-separated regular expressions."""
    return INT8_PRESETS.get(text) or check_patterns([p.strip() for p in text.split(",") if p.strip()])


def check_patterns(patterns: Sequence[str]) -> List[str]:
    """The patterns as a list, each a valid regular expression (ValueError naming a bad one)."""
    checked = []
    for pattern in patterns:
        try:
            re.compile(pattern)
        except (re.error, TypeError) as err:
            raise ValueError(f"int8_layers: {pattern!r} is not a regular expression ({err})") from None
        checked.append(pattern)
    return checked


def linear_layer_names(module: torch.nn.Module, patterns: Sequence[str]) -> List[str]:
    """The names of ``module``'s Linear layers that a pattern matches (``re.search``)."""
    return [
        name
        for name, layer in module.named_modules()
        if isinstance(layer, torch.nn.Linear) and any(re.search(p, name) for p in patterns)
    ]


def quantize_linear_layers(module: torch.nn.Module, patterns: Sequence[str]) -> List[str]:
    """Make the Linear layers that ``patterns`` match int8, in place; their names."""
    names = linear_layer_names(module, patterns)
    if names:
        qconfig = torch.ao.quantization.per_channel_dynamic_qconfig
        with warnings.catch_warnings():
            # torch.ao.quantization's deprecation notice and its quantized-tensor one: see the docstring.
            warnings.simplefilter("ignore", DeprecationWarning)
            warnings.filterwarnings("ignore", message=".*quantize_per_(tensor|channel).*")
            torch.ao.quantization.quantize_dynamic(
                module, {name: qconfig for name in names}, mapping={torch.nn.Linear: Int8Linear}, inplace=True
            )
    return names


def int8_layer_names(module: torch.nn.Module) -> List[str]:
    """The names of ``module``'s int8 (dynamically quantized) Linear layers."""
    quantized = torch.ao.nn.quantized.dynamic.Linear
    return [name for name, layer in module.named_modules() if isinstance(layer, quantized)]
