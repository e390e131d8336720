"""What every command shares: options that become command-line flags, the engines, and loading
the trained pipeline they all run (``annotate``, ``serve``, Ray actors and replicas, ``show``).

An options type is a dataclass whose fields are made with ``option`` (a default and a help
text); ``cli_fields`` lists what the command line gets from it (``cli.with_options``). Every
command that runs a pipeline takes ``PipelineOptions`` (or a subclass) and loads with
``load_pipeline``.
"""
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, List, Optional, Union

from spacy.language import Language

from .component import first_w2ner, w2ner_components
from .entities import check_threshold

ENGINES = ("local", "ray")
SENTENCE_SETTERS = ("sentencizer", "senter", "parser")
PathLike = Union[str, Path]


def option(default: Any, help: str, cli: bool = True):
    """A dataclass field with its help text (``cli``: whether the command line has it)."""
    return field(default=default, metadata={"help": help, "cli": cli})


def cli_fields(options_type) -> List[tuple]:
    """(name, default, help) of each option of ``options_type`` the command line has, in order."""
    return [(f.name, f.default, f.metadata["help"]) for f in fields(options_type) if f.metadata.get("cli", True)]


def check_engine(engine: str) -> None:
    if engine not in ENGINES:
        raise ValueError(f"engine must be {' or '.join(ENGINES)}, got {engine!r}")


@dataclass
class PipelineOptions:
    """How the trained pipeline is loaded and run (``load_pipeline``)."""

    threshold: Optional[float] = option(None, "Leave out entities scoring below this (default: the pipeline's setting, 0 keeps all)")
    sentencizer: bool = option(False, "Add spaCy's sentencizer before w2ner when no component sets sentence boundaries")
    max_length: Optional[int] = option(None, "Raise nlp.max_length for longer documents")
    gpu_id: int = option(-1, "GPU to run on (-1: CPU)")

    def check(self) -> None:
        if self.threshold is not None:
            check_threshold(self.threshold)
        if self.max_length is not None and self.max_length < 1:
            raise ValueError(f"max_length must be positive, got {self.max_length}")

    def on_engine(self, engine: str, gpus_per_worker: float) -> "PipelineOptions":
        """The options a worker of ``engine`` loads with: a Ray worker's GPU is its own device 0."""
        gpu_id = (0 if gpus_per_worker > 0 else -1) if engine == "ray" else self.gpu_id
        return PipelineOptions(self.threshold, self.sentencizer, self.max_length, gpu_id)


def load_pipeline(model: Union[PathLike, Language], options: Optional[PipelineOptions] = None, **overrides) -> Language:
    """The pipeline to run (a name, a path or a loaded ``Language``).

    ``threshold`` is set on every w2ner component; ``sentencizer`` adds spaCy's sentencizer
    before the first w2ner component when no component sets sentence boundaries;
    ``max_length`` raises ``nlp.max_length`` (w2ner's memory does not grow with a document's
    length; other components' may). Options come as ``PipelineOptions`` or keywords.
    """
    import spacy

    options = options or PipelineOptions(**overrides)
    options.check()
    if options.gpu_id >= 0:
        spacy.require_gpu(options.gpu_id)
    nlp = model if isinstance(model, Language) else spacy.load(model)
    first_name, _ = first_w2ner(nlp)
    if options.threshold is not None:
        for _, pipe in w2ner_components(nlp):
            pipe.threshold = options.threshold
    if options.sentencizer and not sets_sentences(nlp):
        nlp.add_pipe("sentencizer", before=first_name)
    if options.max_length is not None:
        nlp.max_length = options.max_length
    return nlp


def sets_sentences(nlp: Language) -> bool:
    """Whether a component of the pipeline sets sentence boundaries."""
    return bool(sentence_setters(nlp))


def sentence_setters(nlp: Language) -> List[str]:
    """The names of the pipeline's components that set sentence boundaries."""
    names = []
    for name in nlp.pipe_names:
        meta = nlp.get_pipe_meta(name)
        if meta.factory in SENTENCE_SETTERS or "token.is_sent_start" in meta.assigns or "doc.sents" in meta.assigns:
            names.append(name)
    return names


def spans_key_of(nlp: Language) -> str:
    """The doc.spans key of the pipeline's (first) w2ner component."""
    return first_w2ner(nlp)[1].spans_key
