"""Annotate documents at any size: raw inputs -> entities with character offsets.

One module per stage of the data flow, used by the ``annotate`` command, the Ray engine and
the HTTP service alike:

1. ``inputs``: ``read_inputs`` streams a ``.txt`` file (one document per line), a directory of
   ``.txt`` files (one document each), a ``.jsonl`` file (``{"text": ..., other keys:
   metadata}``), a ``.spacy`` DocBin, a pipe or standard input (``.gz`` read transparently) as
   ``Item``s in input order. An input that cannot be a document (not UTF-8, not JSON, no text,
   empty) is an ``Item`` with a ``problem``, reported in order and never silently dropped.
2. ``options``: ``AnnotateOptions``, every setting once (the command's options are made from
   it); its pipeline part is ``common.PipelineOptions``.
3. ``records``: ``Record``, the schema of a record (``RECORD_SCHEMA`` is its JSON Schema), and
   ``make_record``.
4. ``outputs``: one writer per output (``.jsonl``, ``.spacy``, a brat directory, BioC, Label Studio, standard
   output) behind ``AnnotationRun``, which writes under temporary names with checkpoints,
   renames when the run completes, and continues an interrupted run (``resume``).
5. The engines: ``local`` (``annotate_items``: documents -> records through ``nlp.pipe``;
   ``prepare_run``: what every engine does first) and ``ray`` (the same on Ray Data, the
   ``[ray]`` extra, imported only when used); ``dispatch.annotate`` picks one.

Loading the pipeline is shared with every command: ``common.load_pipeline``.
"""
from .dispatch import annotate
from .inputs import INPUT_FORMATS, Item, count_inputs, input_format_of, read_inputs, record_item, text_problem
from .local import annotate_items, prepare_run
from .options import AnnotateOptions
from .outputs import WRITERS, AnnotationError, AnnotationRun, Summary, output_kind, write_in_order
from .records import RECORD_SCHEMA, EntityRecord, Record, entity_record, make_record, validate_record

__all__ = [
    "INPUT_FORMATS", "RECORD_SCHEMA", "WRITERS", "AnnotateOptions", "AnnotationError", "AnnotationRun", "EntityRecord",
    "Item", "Record", "Summary", "annotate", "annotate_items", "count_inputs", "entity_record", "input_format_of",
    "make_record", "output_kind", "prepare_run", "read_inputs", "record_item", "text_problem", "validate_record",
    "write_in_order",
]  # fmt: skip
