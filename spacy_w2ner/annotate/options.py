"""The options of an annotation run: one type for the command, the local engine and Ray.

``AnnotateOptions`` lists every setting once, with its default and its help; the ``annotate``
command's options are made from it (``cli/``), ``annotate()`` and the Ray engine take it.
Its pipeline part is ``common.PipelineOptions``, which ``serve`` takes too. ``check`` says
what is wrong with a setting before anything runs.
"""
from dataclasses import dataclass, fields
from typing import Any, Dict, Optional

from ..common import PipelineOptions, check_engine, option
from .inputs import INPUT_FORMATS


@dataclass
class AnnotateOptions(PipelineOptions):
    """Every setting of ``annotate``: reading, the pipeline, the engine, the output."""

    input_format: Optional[str] = option(None, "txt, jsonl or spacy (default: from INPUT's name; txt for -)")
    text_key: str = option("text", "jsonl: the key of the document's text")
    id_key: str = option("id", "jsonl: the key of the document's id (default id: the line number)")
    doc_per_file: bool = option(False, "INPUT is a directory of .txt files, one document each")
    limit: int = option(0, "Read at most this many input documents (0: all)")
    batch_size: int = option(1000, "Documents per nlp.pipe batch at most (w2ner also caps a batch at 20,000 tokens)")
    strict: bool = option(False, "Stop at the first input that is not a document (exit 1) instead of skipping it")
    resume: bool = option(False, "Continue an interrupted run after its last checkpoint")
    errors: Optional[str] = option(None, "Where skipped inputs are written (default: OUTPUT.errors.jsonl)")
    output_format: Optional[str] = option(
        None, "jsonl, spacy, brat, bioc (BioC XML or JSON by OUTPUT's name: .xml, .json) or label-studio (tasks with "
        "the entities as predictions, .json); default: from OUTPUT's name"
    )
    progress: bool = option(True, "Show a progress bar on stderr")
    engine: str = option("local", "local (this machine) or ray (Ray Data: processes and machines)")
    n_process: int = option(1, "local: processes (nlp.pipe n_process)")
    address: Optional[str] = option(None, "ray: the cluster's address (default: a local Ray)")
    workers: int = option(2, "ray: pipeline copies (actors)")
    gpus_per_worker: float = option(0.0, "ray: GPUs per actor")
    documents_per_task: int = option(2000, "ray: input documents per read task", cli=False)

    @classmethod
    def of(cls, options: Optional["AnnotateOptions"] = None, **overrides) -> "AnnotateOptions":
        """``options`` (or the defaults) with keyword overrides; TypeError naming an unknown one."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise TypeError(f"unknown annotate option(s): {', '.join(unknown)}")
        values = {f.name: getattr(options, f.name) for f in fields(cls)} if options else {}
        return cls(**{**values, **overrides})

    def check(self) -> None:
        super().check()
        if self.input_format is not None and self.input_format not in INPUT_FORMATS:
            raise ValueError(f"unknown input format {self.input_format!r}; choose from {', '.join(INPUT_FORMATS)}")
        check_engine(self.engine)
        for name in ("batch_size", "n_process", "workers", "documents_per_task"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.limit < 0:
            raise ValueError(f"limit must be 0 (all) or more, got {self.limit}")

    def pipeline(self) -> PipelineOptions:
        """The options each worker loads the pipeline with (``common.load_pipeline``)."""
        return self.on_engine(self.engine, self.gpus_per_worker)

    def reader(self) -> Dict[str, Any]:
        """The options ``read_inputs`` takes besides the path and format."""
        return dict(text_key=self.text_key, id_key=self.id_key, doc_per_file=self.doc_per_file)
