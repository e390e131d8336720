"""Whether int8 pays on this CPU, measured before ``optimize`` writes anything.

int8 layers ran CADEC's model at 1.11x float32 on a CPU with AVX-512 VNNI and the demo's at 0.96x
on one with AVX2 only, their entities agreeing with float32's at F 97.3 and 96.8: what int8 gives
depends on the CPU and the pipeline, so it is measured on both. The float32 pipeline and each
candidate (its int8 layers) are loaded side by side and run over the same sample with
``nlp.pipe`` in ``ROUNDS`` interleaved rounds (the order reversed every other round), each
warmed up first; a pipeline's speed is its best round, a candidate's speed-up the ratio of the
two in the same run (a machine's speed moves from minute to minute; a ratio of rounds taken side
by side does not move as much). A candidate's entities are scored against float32's
(``agreement``). It qualifies at >= ``MIN_SPEEDUP`` and F >= ``MIN_AGREEMENT_F`` where its rounds
and float32's are steady (the slowest at most ``MAX_SPREAD`` times the fastest: on a CPU that
another process shares, one pipeline's rounds differed 5-fold, and no ratio of them means
anything); ``choice`` is the fastest that qualifies. A candidate is int8 layers (their patterns) or a
``release.bfloat16.BFloat16Candidate``, which must agree at F >= 99 (its ``min_agreement_f``);
candidates this CPU cannot run fast are left out with the reason (``not_measured``).

The sample (``sample_texts``): the user's documents (``--sample FILE``: a .txt file, one
document a line, a directory of .txt files, .jsonl or .spacy, as ``annotate`` reads them), else
the pipeline's own evaluation data where its config's ``paths.dev`` is found, else sentences made
of its vocabulary's words; at most ``SAMPLE_SIZE`` documents, repeated up to that many when
fewer, so that a round lasts long enough to be timed.
"""
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Union

import torch
from spacy.language import Language
from spacy.tokens import DocBin

from ..annotate.inputs import input_format_of, read_inputs
from ..encoders.torch_module import encoder_torch_module
from ..entities import get_entities
from ..nn.cpu import describe_cpu
from ..nn.int8 import cpu_features, quantize_linear_layers
from .bfloat16 import BFloat16Candidate

SAMPLE_SIZE = 300
ROUNDS = 2
MIN_SPEEDUP = 1.1
MIN_AGREEMENT_F = 98.0  # percent, as agreement gives it
MAX_SPREAD = 1.25  # a pipeline's slowest round over its fastest, for its figures to count
WARM_UP = 16  # documents each pipeline runs before it is timed


@dataclass
class Sample:
    """The texts timed, and where they came from, in words."""

    texts: List[str]
    source: str


# A sample where float32 finds nothing compares nothing: every candidate would "agree" at F 100.
NO_ENTITIES = ("float32 found no entities in the sample, so no candidate's entities could be compared with "
               "its: nothing qualifies; measure on documents where the pipeline finds entities (--sample)")


@dataclass
class Figures:
    """One pipeline's figures: each round's seconds, its best speed, against float32's."""

    seconds: List[float]
    docs_per_s: float
    speedup: float = 1.0
    agreement: Dict[str, float] = field(default_factory=dict)
    entities: int = 0
    min_agreement_f: float = MIN_AGREEMENT_F  # what it must agree at to qualify

    @property
    def steady(self) -> bool:
        return max(self.seconds) <= MAX_SPREAD * min(self.seconds)

    def rounds(self) -> str:
        return ", ".join(f"{seconds:.1f}" for seconds in self.seconds) + " s"


@dataclass
class Measurement:
    """float32 and each candidate on this CPU (``cpu_features``), the same sample, one run."""

    cpu: Dict[str, object]
    threads: int
    sample: str
    documents: int
    rounds: int
    float32: Figures
    candidates: Dict[str, Figures]
    not_measured: Dict[str, str] = field(default_factory=dict)  # candidate -> why, in words

    def qualifies(self, name: str) -> bool:
        figures = self.candidates[name]
        fast_and_same = figures.speedup >= MIN_SPEEDUP and figures.agreement["f"] >= figures.min_agreement_f
        return fast_and_same and figures.steady and self.float32.steady and self.float32.entities > 0

    def unsteady(self) -> List[str]:
        """The pipelines whose rounds were not steady, with their rounds' seconds."""
        pipelines = {"float32": self.float32, **self.candidates}
        return [f"{name}'s {figures.rounds()}" for name, figures in pipelines.items() if not figures.steady]

    def choice(self) -> Optional[str]:
        """The fastest candidate that qualifies, or None."""
        qualifying = [name for name in self.candidates if self.qualifies(name)]
        return max(qualifying, key=lambda name: self.candidates[name].speedup, default=None)

    def where(self) -> str:
        return (f"{describe_cpu(self.cpu)}, {self.threads} torch threads, {self.sample}, "
                f"best of {self.rounds} interleaved rounds")  # fmt: skip

    def figures(self) -> str:
        """Each candidate's speed-up and agreement, in one line; the rounds that were not steady."""
        figures = "; ".join(
            f"{name} {figures.speedup:.2f}x F {figures.agreement['f']:.2f}" for name, figures in self.candidates.items()
        )
        figures += "".join(f"; {name} {why}" for name, why in self.not_measured.items())
        if not self.float32.entities:
            figures += f"; {NO_ENTITIES}"
        unsteady = self.unsteady()
        return figures + (f"; rounds not steady, another process using the CPU? ({', '.join(unsteady)}): "
                          "measure again when it is idle" if unsteady else "")  # fmt: skip

    def lines(self) -> List[str]:
        """The measurement as the summary prints it, a line per pipeline."""
        lines = [f"measured on {self.where()}:",
                 f"  {'float32':18} {self.float32.docs_per_s:8.1f} documents/s  ({self.float32.entities} entities; "
                 f"rounds {self.float32.rounds()}{'' if self.float32.steady else ', not steady'})"]  # fmt: skip
        for name, figures in self.candidates.items():
            verdict = "qualifies" if self.qualifies(name) else "does not qualify"
            lines.append(
                f"  {name:18} {figures.docs_per_s:8.1f} documents/s  {figures.speedup:.2f}x float32  entities F "
                f"{figures.agreement['f']:.2f} against float32's ({figures.agreement['docs_differing']} documents "
                f"differ; rounds {figures.rounds()}{'' if figures.steady else ', not steady'}): {verdict}"
            )
        for name, why in self.not_measured.items():
            lines.append(f"  {name:18} {why}")
        if self.unsteady():
            lines.append(f"  rounds not steady (another process using the CPU?): {', '.join(self.unsteady())}")
        if not self.float32.entities:
            lines.append(f"  {NO_ENTITIES}")
        return lines


def rule() -> str:
    return (f">= {MIN_SPEEDUP}x float32 and entities F >= {MIN_AGREEMENT_F:g} against float32's (bfloat16: >= "
            f"{BFloat16Candidate(()).min_agreement_f:g}), in steady rounds")  # fmt: skip


Candidate = Union[Sequence[str], BFloat16Candidate]  # int8 layers' patterns, or networks in bfloat16


def apply_candidate(nlp: Language, component: str, candidate: Candidate) -> None:
    """Make a loaded pipeline the candidate, in place: the encoder of ``component`` with those int8
    layers, or its networks in bfloat16."""
    if isinstance(candidate, BFloat16Candidate):
        candidate.apply(nlp, component)
    else:
        quantize_linear_layers(encoder_torch_module(nlp, component), candidate)


def measure_candidates(source: Path, component: str, candidates: Dict[str, Candidate], sample: Sample,
                       rounds: int = ROUNDS) -> Measurement:  # fmt: skip
    """float32 (``source`` as saved) against each candidate (``apply_candidate``) on ``sample``:
    see the module docstring."""
    import spacy

    pipelines = {"float32": spacy.load(source)}
    for name, candidate in candidates.items():
        pipelines[name] = spacy.load(source)
        apply_candidate(pipelines[name], component, candidate)
    for nlp in pipelines.values():
        list(nlp.pipe(sample.texts[:WARM_UP]))
    seconds: Dict[str, List[float]] = {name: [] for name in pipelines}
    found: Dict[str, List[set]] = {}
    for round_ in range(rounds):
        order = list(pipelines) if round_ % 2 == 0 else list(reversed(pipelines))
        for name in order:
            start = time.perf_counter()
            found[name] = entity_sets(pipelines[name], sample.texts)
            seconds[name].append(time.perf_counter() - start)
    best = {name: min(times) for name, times in seconds.items()}
    figures = {name: Figures(seconds[name], round(len(sample.texts) / best[name], 1),
                             round(best["float32"] / best[name], 3), agreement(found["float32"], found[name]),
                             sum(map(len, found[name])), getattr(candidates.get(name), "min_agreement_f", MIN_AGREEMENT_F))
               for name in pipelines}  # fmt: skip
    return Measurement(cpu_features(), torch.get_num_threads(), sample.source, len(sample.texts), rounds,
                       figures.pop("float32"), figures)  # fmt: skip


def entity_sets(nlp: Language, texts: Sequence, batch_size: Optional[int] = None) -> List[set]:
    """Each text's (or Doc's) entities as a set of (label, token indices)."""
    docs = nlp.pipe(texts, batch_size=batch_size)
    return [{(entity.label, entity.tokens) for entity in get_entities(doc)} for doc in docs]


def agreement(reference: List[set], candidate: List[set]) -> Dict[str, float]:
    """The candidate's entities scored against the reference's (P, R, F in percent), and the
    documents whose entities differ."""
    tp = sum(len(r & c) for r, c in zip(reference, candidate))
    predicted, gold = sum(map(len, candidate)), sum(map(len, reference))
    p = tp / predicted if predicted else 1.0
    r = tp / gold if gold else 1.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    return {"p": round(100 * p, 3), "r": round(100 * r, 3), "f": round(100 * f, 3),
            "docs_differing": sum(a != b for a, b in zip(reference, candidate))}  # fmt: skip


def sample_texts(nlp: Language, model: Path, sample: Optional[Path] = None) -> Sample:
    """The texts to measure on (see the module docstring); ValueError naming a sample file that
    holds no document."""
    found = _from_file(nlp, Path(sample)) if sample else _from_evaluation_data(nlp, Path(model))
    found = found or _generated(nlp)
    if len(found.texts) < SAMPLE_SIZE:
        copies = -(-SAMPLE_SIZE // len(found.texts))
        found = Sample((found.texts * copies)[:SAMPLE_SIZE], f"{found.source}, repeated to {SAMPLE_SIZE}")
    return found


def _from_file(nlp: Language, path: Path) -> Sample:
    if not path.exists():
        raise ValueError(f"{path}: no such file or directory (--sample)")
    items = read_inputs(path, input_format_of(path, path.is_dir()), doc_per_file=path.is_dir(), vocab=nlp.vocab,
                        stop=SAMPLE_SIZE)  # fmt: skip
    texts = [item.text for item in items if item.problem is None and item.text.strip()]
    if not texts:
        raise ValueError(f"{path}: no document to measure on (--sample takes what annotate reads)")
    return Sample(texts, f"{len(texts)} documents of {path}")


def _from_evaluation_data(nlp: Language, model: Path) -> Optional[Sample]:
    """Up to SAMPLE_SIZE sentences of the DocBin the config's ``paths.dev`` names, looked for
    from this directory and from the pipeline's directory up; None where it is not found."""
    dev = nlp.config.get("paths", {}).get("dev")
    if not dev or not str(dev).endswith(".spacy"):
        return None
    places = [Path(dev)] + [folder / dev for folder in model.resolve().parents]
    path = next((place for place in places if place.is_file()), None)
    if path is None:
        return None
    texts: List[str] = []
    for doc in DocBin().from_disk(path).get_docs(nlp.vocab):  # what spacy train reads whole too
        sentences = doc.sents if doc.has_annotation("SENT_START") else [doc]
        texts.extend(sentence.text for sentence in sentences if sentence.text.strip())
        if len(texts) >= SAMPLE_SIZE:
            break
    return Sample(texts[:SAMPLE_SIZE], f"{min(len(texts), SAMPLE_SIZE)} sentences of {dev}") if texts else None


# Words that join the vocabulary's into sentences when a pipeline's evaluation data is not found.
JOINING_WORDS = "the a of in and to with was is had after for on at my her his it".split()


def _generated(nlp: Language, seed: int = 0) -> Sample:
    """SAMPLE_SIZE sentences of 8-30 words: the pipeline's vocabulary (its training data's words,
    where it kept them) and JOINING_WORDS, drawn with a fixed seed."""
    words = sorted(s for s in nlp.vocab.strings if s.isalpha() and s.islower() and 1 < len(s) < 16)
    words = words + JOINING_WORDS * max(1, len(words) // (4 * len(JOINING_WORDS)))
    draw = random.Random(seed)
    texts = [" ".join(draw.choices(words, k=draw.randint(8, 30))) + " ." for _ in range(SAMPLE_SIZE)]
    return Sample(texts, f"{SAMPLE_SIZE} sentences made of the pipeline's vocabulary (no evaluation data found)")
