"""``python -m spacy_w2ner optimize MODEL OUTPUT``: a copy of a trained pipeline for fast CPU
inference, whose encoder has int8 Linear layers (``nn.int8``) or whose networks have bfloat16
weights (``release.bfloat16``), loaded by ``spacy.load`` like any other pipeline, written only
where it pays on this CPU.

It measures before it writes (``measure``): the float32 pipeline and each candidate (the int8
presets, or the layers ``--int8`` names; the bfloat16 candidates, on a CPU with bfloat16
instructions, or only them with ``--bfloat16``) on a sample of documents, on this CPU. It writes
the fastest candidate that runs >= 1.1x float32 with entities agreeing with float32's at F >= 98
(bfloat16: 99); where none does it writes nothing and raises ``NothingFaster`` (the command exits
3), unless ``force``, and at once where this CPU can run none (``--bfloat16`` without bfloat16
instructions), ``force`` or not. An int8 copy's config names ``spacy_w2ner.ChunkedTransformerModel.v2`` with
``int8_layers``, a bfloat16 one's sets ``inference_dtype = "bfloat16"``, so it rebuilds itself on
load; its encoder state is saved int8 or bfloat16; its meta.json says what was done and what was
measured on which CPU (``meta["spacy_w2ner"]["optimized"]``).
The output is written to a temporary directory beside it, loaded back and run once, then
renamed (``files.write_directory``): a failure leaves nothing half-written, and a kill between
the renames of ``--force`` leaves the old output aside, put back by the next ``optimize``.
"""
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Union

from spacy.language import Language

from ..component import first_w2ner
from ..encoders.torch_module import encoder_torch_module
from ..files import restore_replaced, write_directory
from ..nn import int8
from ..nn.cpu import describe_cpu
from ..nn.int8 import INT8_PRESETS, check_patterns, default_preset, int8_layer_names, linear_layer_names
from . import bfloat16
from .bfloat16 import BFloat16Candidate
from .measure import Measurement, apply_candidate, measure_candidates, rule, sample_texts

TRANSFORMER_ARCHITECTURES = ("spacy_w2ner.ChunkedTransformerModel.v1", "spacy_w2ner.ChunkedTransformerModel.v2")
INT8_ARCHITECTURE = "spacy_w2ner.ChunkedTransformerModel.v2"
CUSTOM = "--int8 layers"  # the candidate's name when --int8 gives regular expressions, not a preset


class OptimizeError(ValueError):
    """What ``optimize`` cannot do, in one line for the user."""


class NothingFaster(OptimizeError):
    """No candidate qualified on this CPU: nothing was written (the figures in one line)."""


@dataclass
class OptimizeReport:
    """What ``optimize`` did: the component whose encoder it changed, the layers, the runtime,
    what it measured on which CPU, the sizes."""

    source: str
    output: str
    component: str
    preset: str
    int8_layers: List[str]
    linear_layers: int
    int8_linear_layers: int
    runtime: str
    measured_on: str
    speedup: float
    agreement_f: float
    forced: bool
    measurement: Optional[Measurement] = None
    bytes_before: Dict[str, int] = field(default_factory=dict)
    bytes_after: Dict[str, int] = field(default_factory=dict)
    bfloat16: List[str] = field(default_factory=list)  # the networks with bfloat16 weights (a bfloat16 candidate)

    def lines(self) -> List[str]:
        before, after = sum(self.bytes_before.values()), sum(self.bytes_after.values())
        why = "--force: none qualifies, written anyway" if self.forced else f"the fastest that qualifies ({rule()})"
        return (self.measurement.lines() if self.measurement else []) + [
            f"wrote {self.preset}, {why}: {self.speedup:.2f}x float32, entities F {self.agreement_f:.2f} against "
            f"float32's, on {self.measured_on}",
            f"{self.source} -> {self.output}",
            f"{self.component}: {BFloat16Candidate(tuple(self.bfloat16)).describe()}" if self.bfloat16 else
            f"{self.component}: {self.int8_linear_layers} of the encoder's {self.linear_layers} Linear layers "
            f"int8 (int8_layers = {self.int8_layers}); everything else float32",
            f"runtime: {self.runtime}; CPU only",
            f"size on disk: {before / 2**20:.1f} MiB -> {after / 2**20:.1f} MiB",
        ]


def optimize_pipeline(source: Path, output: Path, int8_layers: Optional[Sequence[str]] = None, force: bool = False,
                      sample: Optional[Path] = None, bfloat16_only: bool = False) -> OptimizeReport:  # fmt: skip
    """Write ``source``'s pipeline to ``output`` with int8 encoder layers or bfloat16 weights where
    they measured faster on this CPU (see the module docstring): the candidates are
    ``int8_layers`` where given, else every preset of ``nn.int8.INT8_PRESETS``, and the bfloat16
    ones (``release.bfloat16``) unless ``int8_layers`` is given; ``bfloat16_only``: the bfloat16
    ones (and ``int8_layers`` where given); ``sample``: the documents to measure on (default:
    ``measure.sample_texts``'s). NothingFaster where none qualifies, unless ``force``, which then
    writes ``int8_layers``, or this CPU's ``default_preset()``, or bfloat16 where only that was
    measured, and replaces an ``output`` that exists once the new one is written; OptimizeError
    for what cannot be done."""
    import spacy

    candidates = _candidates(int8_layers, bfloat16_only)
    source, output = Path(source), Path(output)
    restore_replaced(output)
    _check_paths(source, output, force)
    nlp = spacy.load(source)
    name = encoder_component(nlp)
    module = _encoder_module(nlp, name)
    if int8_layer_names(module):
        raise OptimizeError(f"{source}: the encoder of '{name}' has int8 layers already")
    in_bfloat16 = bfloat16.in_bfloat16(nlp.config, name, first_w2ner(nlp)[0])
    if in_bfloat16:
        raise OptimizeError(f"{source}: its {' and '.join(in_bfloat16)} predict in bfloat16 already "
                            "(inference_dtype): optimize the float32 pipeline it was made from")  # fmt: skip
    for patterns in candidates.values():
        if not isinstance(patterns, BFloat16Candidate) and not linear_layer_names(module, patterns):
            raise OptimizeError(f"no Linear layer of the encoder of '{name}' matches int8_layers {patterns}")
    not_measured = _unavailable(candidates)
    if len(not_measured) == len(candidates):
        raise NothingFaster(f"nothing written: nothing to measure on {describe_cpu(int8.cpu_features())}: "
                            + "; ".join(f"{name} {why}" for name, why in not_measured.items()))  # fmt: skip
    try:
        texts = sample_texts(nlp, source, sample)
        measurement = measure_candidates(source, name, {key: value for key, value in candidates.items()
                                                        if key not in not_measured}, texts)  # fmt: skip
    except ValueError as err:
        raise OptimizeError(str(err)) from None
    measurement.not_measured = not_measured
    chosen = _choose(measurement, candidates, force)
    report = _report(source, output, nlp, module, name, chosen, candidates[chosen], measurement)
    _write_atomically(nlp, name, output, report)
    report.bytes_after = _sizes(output)
    return report


Candidate = Union[List[str], BFloat16Candidate]


def _candidates(int8_layers: Optional[Sequence[str]], bfloat16_only: bool = False) -> Dict[str, Candidate]:
    """The candidates by name: the layers asked for (named as their preset where they are one), else
    every preset unless ``bfloat16_only``; the bfloat16 candidates unless int8 layers are asked for
    alone."""
    candidates: Dict[str, Candidate] = {}
    if int8_layers is None and not bfloat16_only:
        candidates.update({name: list(patterns) for name, patterns in INT8_PRESETS.items()})
    elif int8_layers is not None:
        patterns = check_patterns(list(int8_layers))
        candidates[next((preset for preset, known in INT8_PRESETS.items() if known == patterns), CUSTOM)] = patterns
    if int8_layers is None or bfloat16_only:
        candidates.update(bfloat16.CANDIDATES)
    return candidates


def _unavailable(candidates: Dict[str, Candidate]) -> Dict[str, str]:
    """The candidates this CPU cannot run fast, and why (bfloat16 without its instructions)."""
    why = bfloat16.unavailable(str(int8.cpu_features()["model"]))
    return {name: why for name, candidate in candidates.items() if why and isinstance(candidate, BFloat16Candidate)}


def _choose(measurement: Measurement, candidates: Dict[str, Candidate], force: bool) -> str:
    """The candidate to write: the measurement's choice; with ``force`` and none, the one asked
    for or this CPU's default preset (or bfloat16, where only that was measured); else
    NothingFaster in one line with the figures. At least one candidate was measured
    (``optimize_pipeline`` stops before measuring where none can be)."""
    chosen = measurement.choice()
    measured = [name for name in candidates if name in measurement.candidates]
    fallback = default_preset() if default_preset() in measured else measured[0]
    kinds = sorted({"bfloat16 pipeline" if isinstance(c, BFloat16Candidate) else "int8 encoder" for c in candidates.values()})
    if chosen is None and not force:
        raise NothingFaster(f"nothing written: no {' or '.join(kinds)} runs {rule()} on {measurement.where()}: "
                            f"{measurement.figures()} (--force writes {fallback} anyway)")  # fmt: skip
    return chosen or fallback


def _report(source: Path, output: Path, nlp: Language, module, name: str, chosen: str, candidate: Candidate,
            measurement: Measurement) -> OptimizeReport:  # fmt: skip
    """Make the loaded pipeline the chosen candidate (``measure.apply_candidate``), and say what was done."""
    linear = len(linear_layer_names(module, ["."]))
    apply_candidate(nlp, name, candidate)
    figures = measurement.candidates[chosen]
    if isinstance(candidate, BFloat16Candidate):
        patterns, quantized, runtime, networks = [], [], bfloat16.runtime(), list(candidate.networks)
    else:
        patterns, quantized, networks = candidate, int8_layer_names(module), []
        runtime = (f"torch dynamic int8 (torch.ao.quantization, per-channel weights; activations per call, "
                   f"{int8.ACTIVATION_BITS}-bit on this CPU: 8 where it has AVX-512 VNNI)")  # fmt: skip
    return OptimizeReport(str(source), str(output), name, chosen, patterns, linear, len(quantized), runtime,
                          describe_cpu(measurement.cpu), figures.speedup, figures.agreement["f"],
                          measurement.choice() is None, measurement, _sizes(source), bfloat16=networks)  # fmt: skip


def _check_paths(source: Path, output: Path, force: bool) -> None:
    if not source.exists():
        raise OptimizeError(f"{source} does not exist")
    if not (source / "config.cfg").is_file():
        raise OptimizeError(f"{source} is not a saved pipeline (no config.cfg)")
    if output.exists() and not force:
        raise OptimizeError(f"{output} exists: give a new directory, or --force to replace it (nothing was written)")
    if output.resolve() == source.resolve():
        raise OptimizeError(f"{output} is the pipeline being optimized: give another directory")
    if output.resolve() in source.resolve().parents:
        raise OptimizeError(f"{output} holds the pipeline being optimized ({source}): give another directory")
    is_pipeline = (output / "config.cfg").is_file() and (output / "meta.json").is_file()  # what spacy.load reads
    if output.exists() and not (output.is_dir() and (not any(output.iterdir()) or is_pipeline)):
        raise OptimizeError(f"{output} is not a saved pipeline: --force replaces only a pipeline or an empty "
                            "directory (nothing was written)")  # fmt: skip
    if not output.parent.is_dir():
        raise OptimizeError(f"{output.parent} is not a directory")


def encoder_component(nlp: Language) -> str:
    """The name of the transformer component the first w2ner component listens to, whose model
    is a ``ChunkedTransformerModel``; OptimizeError otherwise."""
    try:
        w2ner_name, _ = first_w2ner(nlp)
    except ValueError as err:
        raise OptimizeError(f"optimize needs a w2ner pipeline: {err}") from None
    for name in nlp.pipe_names:
        architecture = nlp.config["components"][name].get("model", {}).get("@architectures")
        if architecture in TRANSFORMER_ARCHITECTURES:
            return name
    raise OptimizeError(
        f"'{w2ner_name}' has no transformer encoder to make int8 (a component whose model is one of "
        f"{', '.join(TRANSFORMER_ARCHITECTURES)}); its pipeline: {', '.join(nlp.pipe_names)}"
    )


def _encoder_module(nlp: Language, name: str):
    try:
        return encoder_torch_module(nlp, name)
    except ValueError as err:
        raise OptimizeError(str(err)) from None


def _write_atomically(nlp: Language, name: str, output: Path, report: OptimizeReport) -> None:
    """Save to a temporary directory beside ``output``, configure int8, load it back and run
    it once, then rename it to ``output`` (``--force``: the old output goes only once the new one
    is complete); nothing is left behind on a failure."""
    import spacy

    def write(work: Path) -> None:
        work.mkdir()
        nlp.meta.setdefault("spacy_w2ner", {})["optimized"] = {
            key: value for key, value in asdict(report).items() if key not in ("output", "bytes_after")
        }
        nlp.to_disk(work)
        _configure(work / "config.cfg", name, first_w2ner(nlp)[0], report)
        spacy.load(work)("A sentence to check that the optimized pipeline runs .")

    try:
        write_directory(output, write)
    except OSError as err:
        raise OptimizeError(f"could not write {output}: {err} (nothing was written)") from None


def _configure(config_path: Path, name: str, w2ner: str, report: OptimizeReport) -> None:
    """The written config says what was done: int8 layers, or bfloat16 inference."""
    from spacy.util import load_config

    config = load_config(config_path, interpolate=False)
    if report.bfloat16:
        BFloat16Candidate(tuple(report.bfloat16)).configure(config, name, w2ner)
    else:
        model = config["components"][name]["model"]
        model["@architectures"] = INT8_ARCHITECTURE
        model["int8_layers"] = report.int8_layers
    config.to_disk(config_path)


def _sizes(path: Path) -> Dict[str, int]:
    """Bytes on disk of each component's directory (and the other files, under "")."""
    sizes: Dict[str, int] = {}
    for item in Path(path).iterdir():
        files = [item] if item.is_file() else [f for f in item.rglob("*") if f.is_file()]
        key = "" if item.is_file() else item.name
        sizes[key] = sizes.get(key, 0) + sum(f.stat().st_size for f in files)
    return sizes
