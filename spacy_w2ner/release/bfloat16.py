"""``optimize``'s bfloat16 candidates: a pipeline that predicts with bfloat16 weights
(``nn.bfloat16``, ``inference_dtype = "bfloat16"``) where that measures faster on this CPU.

Two candidates, measured beside float32 and the int8 presets (``measure``): ``bfloat16`` (the
encoder's weights bfloat16, the grid network float32) and ``bfloat16+grid`` (both networks). A
candidate qualifies as an int8 one does (>= 1.1x float32 in steady rounds), with its entities
agreeing with float32's at F >= ``MIN_AGREEMENT_F`` (99: bfloat16 rounds the weights and
activations, it drops no bits of the arithmetic's range, so it is held to more than int8's 98).
On a CPU without bfloat16 instructions (AVX512-BF16, AMX-BF16) they are not measured, and
``optimize`` says so naming the CPU (bfloat16 is emulated there, slower than float32).

The written pipeline's config sets ``inference_dtype = "bfloat16"`` on the transformer's model
(and on w2ner's for ``bfloat16+grid``); its saved states are bfloat16 (half the size), and it
loads, predicts and is saved in bfloat16 with ``spacy.load`` alone; it does not train (train the
float32 pipeline it was made from).
"""
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from spacy.language import Language

from ..component import first_w2ner
from ..encoders.transformer import node_named
from ..nn import bfloat16 as nn_bfloat16
from ..nn.bfloat16 import BFloat16Settings, use_bfloat16, without_bfloat16_instructions

MIN_AGREEMENT_F = 99.0
ENCODER, GRID = "encoder", "grid network"


@dataclass(frozen=True)
class BFloat16Candidate:
    """Which networks predict with bfloat16 weights."""

    networks: Tuple[str, ...]

    @property
    def min_agreement_f(self) -> float:
        return MIN_AGREEMENT_F

    def apply(self, nlp: Language, component: str) -> None:
        """Make the networks of a loaded pipeline predict in bfloat16, in place (the encoder of
        ``component``, the grid network of the first w2ner component)."""
        for network, (shims, attrs) in _networks(nlp, component).items():
            if network in self.networks:
                use_bfloat16(shims, BFloat16Settings("float32", "bfloat16"), attrs, network)

    def configure(self, config, component: str, w2ner: str) -> None:
        """Say it in a pipeline's config (``config.cfg``, loaded uninterpolated)."""
        names = {ENCODER: component, GRID: w2ner}
        for network in self.networks:
            config["components"][names[network]]["model"]["inference_dtype"] = "bfloat16"

    def describe(self) -> str:
        kept = [network for network in (ENCODER, GRID) if network not in self.networks]
        return (f"{' and '.join(self.networks)} with bfloat16 weights (inference_dtype = \"bfloat16\")"
                + (f"; the {' and '.join(kept)} float32" if kept else ""))  # fmt: skip


CANDIDATES: Dict[str, BFloat16Candidate] = {
    "bfloat16": BFloat16Candidate((ENCODER,)),
    "bfloat16+grid": BFloat16Candidate((ENCODER, GRID)),
}
RUNTIME = "torch's bfloat16 kernels (oneDNN: {instructions}); float32 master weights not kept (inference only)"


def runtime() -> str:
    return RUNTIME.format(instructions=", ".join(nn_bfloat16.cpu_bfloat16_instructions()) or "none on this CPU: emulated")


def unavailable(cpu: str) -> Optional[str]:
    """Why the bfloat16 candidates are not measured on this CPU (named), or None where they are."""
    return None if nn_bfloat16.cpu_bfloat16_instructions() else f"not measured: {without_bfloat16_instructions(cpu)}"


def in_bfloat16(config, component: str, w2ner: str) -> List[str]:
    """The networks a pipeline's config already runs in bfloat16 for inference."""
    names = {ENCODER: component, GRID: w2ner}
    return [network for network, name in names.items()
            if config["components"].get(name, {}).get("model", {}).get("inference_dtype", "float32") != "float32"]  # fmt: skip


def _networks(nlp: Language, component: str) -> Dict[str, Tuple[list, dict]]:
    """Each network's shims and the node attrs they record in."""
    encoder = node_named(nlp.get_pipe(component).model, "hf-pytorch")
    grid_scorer = first_w2ner(nlp)[1].model.get_ref("grid_scorer")
    return {ENCODER: (encoder.shims, encoder.attrs), GRID: (grid_scorer.layers[0].shims, grid_scorer.attrs)}
