"""``python -m spacy_w2ner tune-decoding MODEL DEV``: the decoding settings of the w2ner
component (its link thresholds ``nnw_threshold`` and ``thw_threshold``, and ``best_path_only``)
that score best on dev, and a copy of the pipeline that decodes with them.

The network runs once: every dev grid's relation probabilities are kept
(``model.predictions.grid_probabilities``), then read under each setting with the component's
own rule (``decided_relations``), decoded and written as the component does
(``W2NER.entities_from_grids``, ``set_annotations``) and scored by its scorer. So a setting's dev
figures are what the pipeline predicts with it (tests/release/test_decoding.py checks that), and
two hundred settings cost one pass of the network and two hundred decodes.

The chosen setting is the one with the best overall dev F (``metric="f"``), or the best dev
discontinuous F among the settings whose overall F is no lower than the default's (the arg-max,
every path: ``metric="discontinuous_f"``); a tie keeps the setting listed first, the default
first of all. Choose on dev only: the figures of the chosen setting on the same dev data are
optimistic.
"""
import dataclasses
import json
import shutil
from dataclasses import asdict, dataclass
from itertools import product
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

import numpy as np
import torch
from spacy.language import Language
from spacy.tokens import Doc, DocBin
from spacy.training import Example
from thinc.api import Config

from ..component import W2NER, first_w2ner
from ..files import write_directory
from ..grid.segments import Segment
from ..messages import missing_spans_key
from ..model.predictions import decided_relations, grid_probabilities
from ..model.types import LinkThresholds, check_link_threshold

DEFAULT_GRID: Tuple[Optional[float], ...] = (None, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
METRICS = ("f", "discontinuous_f")
ProbabilityGrid = Tuple[Segment, np.ndarray]  # a segment (doc index among all dev docs), its (n, n, relations)


@dataclass(frozen=True)
class DecodingSetting:
    """How the component reads and decodes grids: its link thresholds (``None``: the arg-max)
    and whether a THW cell gives only its best-scoring path."""

    nnw_threshold: Optional[float] = None
    thw_threshold: Optional[float] = None
    best_path_only: bool = False

    @property
    def thresholds(self) -> LinkThresholds:
        return LinkThresholds(self.nnw_threshold, self.thw_threshold)

    def describe(self) -> str:
        def shown(t: Optional[float]) -> str:
            return "arg-max" if t is None else f"{t:g}"

        paths = "best path" if self.best_path_only else "all paths"
        return f"nnw {shown(self.nnw_threshold):>7}  thw {shown(self.thw_threshold):>7}  {paths:>9}"


@dataclass
class SettingScores:
    """A setting's dev figures, in percent."""

    nnw_threshold: Optional[float]
    thw_threshold: Optional[float]
    best_path_only: bool
    p: float
    r: float
    f: float
    discontinuous_f: float
    overlapping_f: float

    @property
    def setting(self) -> DecodingSetting:
        return DecodingSetting(self.nnw_threshold, self.thw_threshold, self.best_path_only)

    def line(self) -> str:
        return (f"{self.setting.describe()}  P {self.p:6.2f}  R {self.r:6.2f}  F {self.f:6.2f}  "
                f"discontinuous F {self.discontinuous_f:6.2f}")  # fmt: skip


@dataclass
class DecodingReport:
    """Every setting's dev figures, the default's, the chosen one's and where the copy went."""

    model: str
    dev: str
    component: str
    metric: str
    settings: List[SettingScores]
    default: SettingScores
    chosen: SettingScores
    output: Optional[str] = None

    def to_json(self) -> dict:
        return asdict(self)

    def override(self) -> str:
        """The ``spacy`` command-line override that sets the chosen setting."""
        values = asdict(self.chosen.setting)
        return " ".join(f"--components.{self.component}.{key} {json.dumps(value)}" for key, value in values.items())


def decoding_settings(nnw: Sequence[Optional[float]] = DEFAULT_GRID, thw: Sequence[Optional[float]] = DEFAULT_GRID,
                      best_path_only: Sequence[bool] = (False, True)) -> List[DecodingSetting]:  # fmt: skip
    """Every combination of the values, the default (arg-max, every path) first; each threshold checked."""
    settings = [
        DecodingSetting(check_link_threshold("nnw_threshold", a), check_link_threshold("thw_threshold", b), bool(c))
        for c, a, b in product(best_path_only, nnw, thw)
    ]
    default = DecodingSetting()
    return [default] + [setting for setting in dict.fromkeys(settings) if setting != default]


def dev_probabilities(nlp: Language, docs: Sequence[Doc], batch_size: int = 64) -> List[ProbabilityGrid]:
    """Every relation's probability on each segment grid of ``docs``, from one pass of the network.

    ``docs`` are run through the components before the first w2ner component first (a
    transformer listener reads their output), ``batch_size`` at a time; segments are numbered
    by their doc's index in ``docs``.
    """
    name, pipe = first_w2ner(nlp)
    after = nlp.pipe_names[nlp.pipe_names.index(name):]
    grids: List[ProbabilityGrid] = []
    for start in range(0, len(docs), batch_size):
        chunk = list(nlp.pipe(docs[start : start + batch_size], disable=after))
        for segment, probs in grid_probabilities(pipe.model, chunk):
            grids.append((dataclasses.replace(segment, doc_index=segment.doc_index + start), probs))
    return grids


def score_setting(pipe: W2NER, docs: Sequence[Doc], gold: Sequence[Doc], grids: Sequence[ProbabilityGrid],
                  setting: DecodingSetting) -> SettingScores:  # fmt: skip
    """The pipe's dev figures with ``setting``: the grids read, decoded and written into ``docs``
    (their previous entities replaced) as the pipe does, then scored against ``gold``. The pipe's
    own ``best_path_only`` is set to the setting's while it decodes, then put back."""
    read = []
    for segment, probs in grids:
        confidences, relations = decided_relations(torch.from_numpy(probs), setting.thresholds)
        read.append((segment, relations.numpy(), confidences.numpy()))
    own, pipe.best_path_only = pipe.best_path_only, setting.best_path_only
    try:
        pipe.set_annotations(docs, pipe.entities_from_grids(docs, read))
    finally:
        pipe.best_path_only = own
    scores = pipe.score([Example(doc, reference) for doc, reference in zip(docs, gold)])

    def percent(name: str) -> float:
        return round(100 * float(scores[f"{pipe.spans_key}_{name}"]), 4)

    return SettingScores(setting.nnw_threshold, setting.thw_threshold, setting.best_path_only, percent("p"), percent("r"),
                         percent("f"), percent("discontinuous_f"), percent("overlapping_f"))  # fmt: skip


def choose(scored: Sequence[SettingScores], metric: str = "f") -> SettingScores:
    """The best setting by ``metric`` (see the module docstring); the first of equals. ``scored``
    starts with the default's figures (the arg-max, every path)."""
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {', '.join(METRICS)}, got {metric!r}")
    if metric == "f":
        return max(scored, key=lambda s: s.f)  # max keeps the first of equals
    floor = scored[0].f
    return max((s for s in scored if s.f >= floor), key=lambda s: s.discontinuous_f)


def words_only(nlp: Language, gold: Sequence[Doc]) -> List[Doc]:
    """The gold docs' words and spaces, without their annotations: what the pipeline is given."""
    return [Doc(nlp.vocab, words=[t.text for t in doc], spaces=[bool(t.whitespace_) for t in doc]) for doc in gold]


def tune_decoding(
    model: Path,
    dev: Path,
    output: Optional[Path] = None,
    nnw: Sequence[Optional[float]] = DEFAULT_GRID,
    thw: Sequence[Optional[float]] = DEFAULT_GRID,
    best_path_only: Sequence[bool] = (False, True),
    metric: str = "f",
    batch_size: int = 64,
) -> DecodingReport:
    """Score every setting on ``dev`` (a .spacy of gold docs) and choose one; with ``output``,
    write a copy of the pipeline that uses it (``write_with_setting``)."""
    import spacy

    if metric not in METRICS:
        raise ValueError(f"metric must be one of {', '.join(METRICS)}, got {metric!r}")
    if output is not None and output.exists():
        raise ValueError(f"{output} exists: give a new directory (nothing was written)")
    settings = decoding_settings(nnw, thw, best_path_only)
    nlp = spacy.load(model)
    name, pipe = first_w2ner(nlp)
    gold = list(DocBin().from_disk(dev).get_docs(nlp.vocab))
    if not gold:
        raise ValueError(f"{dev} holds no documents")
    if not any(pipe.spans_key in doc.spans for doc in gold):  # every setting would score 0 and one be "chosen"
        keys = {key for doc in gold for key in doc.spans}
        raise ValueError(f"{dev}: {missing_spans_key(pipe.spans_key, keys)}, and '{name}' writes its entities to the first (its spans_key)")
    docs = words_only(nlp, gold)
    grids = dev_probabilities(nlp, docs, batch_size)
    scored = [score_setting(pipe, docs, gold, grids, setting) for setting in settings]
    report = DecodingReport(str(model), str(dev), name, metric, scored, scored[0], choose(scored, metric))
    if output is not None:
        write_with_setting(model, output, name, report)
        report.output = str(output)
    return report


def write_with_setting(source: Path, output: Path, component: str, report: DecodingReport) -> None:
    """Copy the pipeline at ``source`` to ``output`` with the chosen setting in its config and
    the dev figures in its meta.json (``meta["spacy_w2ner"]["decoding"]``).

    Written to a temporary directory beside ``output``, loaded back and checked, then renamed
    (``files.write_directory``): a failure leaves nothing half-written.
    """
    import spacy

    def write(copy: Path) -> None:
        shutil.copytree(source, copy)
        config = Config().from_disk(copy / "config.cfg", interpolate=False)
        config["components"][component].update(asdict(report.chosen.setting))
        config.to_disk(copy / "config.cfg")
        _record_in_meta(copy / "meta.json", report)
        pipe = first_w2ner(spacy.load(copy))[1]
        loaded = DecodingSetting(pipe.link_thresholds.nnw, pipe.link_thresholds.thw, pipe.best_path_only)
        if loaded != report.chosen.setting:
            raise RuntimeError(f"the copy loads with {loaded}, not the chosen {report.chosen.setting}")

    output.parent.mkdir(parents=True, exist_ok=True)
    write_directory(output, write)


def _record_in_meta(path: Path, report: DecodingReport) -> None:
    meta = json.loads(path.read_text(encoding="utf8")) if path.exists() else {}
    meta.setdefault("spacy_w2ner", {})["decoding"] = {
        **asdict(report.chosen.setting),
        "chosen_on": report.dev,
        "metric": report.metric,
        "dev": asdict(report.chosen),
        "dev_default": asdict(report.default),
    }
    path.write_text(json.dumps(meta, indent=2), encoding="utf8")


def dev_table(report: DecodingReport, top: int = 10) -> List[str]:
    """The default's line, the ``top`` best settings by the report's metric and the choice."""
    ranked = sorted(report.settings, key=lambda s: getattr(s, report.metric), reverse=True)[:top]
    lines = [f"default:  {report.default.line()}", f"best {len(ranked)} of {len(report.settings)} by {report.metric}:"]
    lines += [f"          {s.line()}" for s in ranked]
    lines += [f"chosen:   {report.chosen.line()}", f"override: {report.override()}"]
    if report.output:
        lines.append(f"wrote {report.output}")
    return lines

