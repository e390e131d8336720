"""What this CPU can do, asked in one place: its model name, AVX-512 and its VNNI (int8 layers'
activation bits, ``nn.int8``), and the instructions that multiply bfloat16 matrices
(``nn.bfloat16``, the shim's autocast warning).

torch answers the feature questions only through private probes (``torch.cpu._is_*_supported``);
this module owns that use: a probe that is missing or fails says "no". Where Linux lists the CPU's
flags (/proc/cpuinfo), the bfloat16 answer is read there.
"""
import platform
from functools import lru_cache
from typing import Dict, List

import torch

# /proc/cpuinfo's flags for the instructions that multiply bfloat16 matrices, and their names.
BFLOAT16_FLAGS = {"avx512_bf16": "AVX512-BF16", "amx_bf16": "AMX-BF16"}
_BFLOAT16_PROBES = {"avx512_bf16": "_is_avx512_bf16_supported", "amx_bf16": "_is_amx_tile_supported"}


def probe(name: str) -> bool:
    """torch's own answer to ``torch.cpu.<name>()``; False where the probe is missing or fails."""
    found = getattr(torch.cpu, name, None)
    try:
        return bool(found()) if found is not None else False
    except Exception:  # a probe that fails says nothing: keep the safe answer
        return False


def has_vnni() -> bool:
    """Whether this CPU has AVX-512 VNNI (int8 dot products accumulated in int32)."""
    return probe("_is_vnni_supported")


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo's, else the platform's)."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf8") as cpuinfo:
            return next((line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")), model)
    except OSError:
        return model


def cpu_flags() -> List[str]:
    """The CPU's flags as /proc/cpuinfo lists them; [] where there is none (not Linux)."""
    try:
        with open("/proc/cpuinfo", encoding="utf8") as cpuinfo:
            return next((line for line in cpuinfo if line.startswith("flags")), "").split(":", 1)[-1].split()
    except OSError:
        return []


@lru_cache(maxsize=1)
def bfloat16_instructions() -> List[str]:
    """The names of this CPU's bfloat16 matrix instructions ("AVX512-BF16", "AMX-BF16"), from
    /proc/cpuinfo's flags, else torch's probes; [] where it has none."""
    flags = set(cpu_flags())
    if not flags:  # not Linux
        flags = {flag for flag, name in _BFLOAT16_PROBES.items() if probe(name)}
    return [name for flag, name in BFLOAT16_FLAGS.items() if flag in flags]


def bfloat16_is_native() -> bool:
    """Whether bfloat16 is not emulated here: x86 with AVX512-BF16 or AMX; other CPUs count as
    able (neither torch nor their flags say, so they are not warned)."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return True
    return bool(bfloat16_instructions())


def cpu_features(activation_bits: int) -> Dict[str, object]:
    """This CPU as ``optimize`` records it: model, AVX-512, VNNI, bfloat16 instructions and the
    bits int8 layers give activations on it."""
    return {"model": cpu_model(), "avx512": probe("_is_avx512_supported"), "vnni": has_vnni(),
            "bfloat16": bfloat16_instructions(), "activation_bits": activation_bits}  # fmt: skip


def describe_cpu(features: Dict[str, object]) -> str:
    """``cpu_features()`` in words: "AMD EPYC (AVX-512: yes, VNNI: yes, bfloat16: AVX512-BF16)"
    (a record without the bfloat16 entry, as optimize wrote before it, says nothing of it)."""
    yes = {True: "yes", False: "no"}
    bfloat16 = features.get("bfloat16")
    said = "" if bfloat16 is None else f", bfloat16: {', '.join(bfloat16) or 'no'}"
    return f"{features['model']} (AVX-512: {yes[bool(features['avx512'])]}, VNNI: {yes[bool(features['vnni'])]}{said})"
