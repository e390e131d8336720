"""Annotation on Ray Data: the same records as the local engine, across processes and machines.

Needs the ``ray`` extra (``pip install spacy-w2ner[ray]``); nothing here is imported by the
package itself. Two entry points:

* ``annotate_dataset(ds, model, ...)`` takes a ``ray.data.Dataset`` with a text column and
  returns one whose rows are records (``id``, ``source``, ``meta``, ``entities`` as in
  ``records.RECORD_SCHEMA``, plus ``problem``: why a row is no document, else null), to
  compose with Ray's own readers and writers (``read_json``, ``read_parquet``, ``write_json``...).
* ``annotate_with_ray(model, input, output, options)``: the ``annotate`` command with
  ``--engine ray`` (the same ``AnnotateOptions`` and run preparation as the local engine). The
  input is read by Ray read tasks with the same readers (ranges of documents in input order),
  annotated by an actor pool, and streamed back in order to the same writers (errors file,
  checkpoints, ``--resume``).

Each actor loads the pipeline once (a callable class in ``map_batches`` with ``concurrency``
actors); nothing but documents and records travels through the object store. An actor that
dies is restarted and its batch retried (``max_restarts``, ``max_task_retries``).
"""
import json
import logging
import math
import os
from pathlib import Path
from typing import Any, Dict, Optional, Union

import torch

from ..common import PipelineOptions, load_pipeline, spans_key_of
from ..extras import connect_ray, require_ray
from .inputs import Item, read_inputs, record_item
from .local import annotate_items, prepare_run
from .options import AnnotateOptions
from .outputs import AnnotationError, model_version, write_in_order

RETRIES = 3  # restarts of a dead actor, and retries of its batch
ACTOR_PIDS_ENV = "SPACY_W2NER_ACTOR_PIDS"


def start_ray(address: Optional[str] = None, num_cpus: Optional[int] = None) -> None:
    """Connect to Ray (``extras.connect_ray``) with Ray Data set up for the engine: results in
    input order, no progress bars of its own (the command shows one), warnings only."""
    ray = connect_ray(address, num_cpus)
    context = ray.data.DataContext.get_current()
    context.execution_options.preserve_order = True
    context.enable_progress_bars = False  # the command shows its own
    logging.getLogger("ray.data").setLevel(logging.WARNING)


def default_cpus_per_worker(workers: int) -> float:
    """One CPU per actor, or less on a small cluster: Ray's read tasks need a CPU too, and
    actors holding every CPU would wait for reads that never run (torch threads: see _PipelineActor)."""
    total = require_ray().cluster_resources().get("CPU", 1.0)
    return min(1.0, max(0.1, (total - 1.0) / workers))


class _PipelineActor:
    """Loads the pipeline once per actor; torch uses the actor's CPUs, not the machine's.

    With ``$SPACY_W2NER_ACTOR_PIDS`` set (to a directory) when Ray starts, each actor writes
    its process id there (``ROLE-PID.pid``, ROLE its class's name): to watch the actors'
    resources, or signal one.
    """

    role = "PipelineActor"  # Ray Data runs the class under a wrapper's name: the file says which it is

    def __init__(self, model: str, options: PipelineOptions, cpus: float):
        torch.set_num_threads(max(1, int(cpus)))
        self.nlp = load_pipeline(model, options)
        self.spans_key = spans_key_of(self.nlp)
        if os.environ.get(ACTOR_PIDS_ENV):
            pid = os.getpid()
            (Path(os.environ[ACTOR_PIDS_ENV]) / f"{self.role}-{pid}.pid").write_text(str(pid))


class ItemAnnotator(_PipelineActor):
    """map_batches class of the command's path: rows of serialized ``Item``s -> rows of records."""

    role = "ItemAnnotator"

    def __init__(self, model: str, options: PipelineOptions, cpus: float, with_docs: bool):
        super().__init__(model, options, cpus)
        self.with_docs = with_docs

    def __call__(self, batch):
        import pyarrow as pa

        items = [_item_from_row(row) for row in batch.to_pylist()]
        rows = []
        for item, record, doc in annotate_items(self.nlp, items, spans_key=self.spans_key, batch_size=len(items) or 1):
            rows.append({
                "position": item.position,
                "item": json.dumps(_item_to_row(item), ensure_ascii=False),
                "record": None if record is None else json.dumps(record, ensure_ascii=False),
                "doc_bytes": doc.to_bytes(exclude=["tensor", "user_data"]) if self.with_docs and doc is not None else None,
            })
        return pa.Table.from_pylist(rows, schema=annotated_schema())


class RowAnnotator(_PipelineActor):
    """map_batches class of ``annotate_dataset``: rows with a text column -> record rows."""

    role = "RowAnnotator"

    def __init__(self, model: str, options: PipelineOptions, cpus: float, text_key: str, id_key: str):
        super().__init__(model, options, cpus)
        self.text_key, self.id_key = text_key, id_key

    def __call__(self, batch: Dict[str, Any]) -> Dict[str, Any]:
        import pandas as pd

        rows = [{key: _plain(value) for key, value in row.items()} for row in batch.to_dict("records")]
        items = [record_item(k, None, row, None, self.text_key, self.id_key) for k, row in enumerate(rows)]
        out = []
        for item, record, _ in annotate_items(self.nlp, items, spans_key=self.spans_key, batch_size=len(items) or 1):
            record = record or {"id": item.id, "source": None, "meta": item.meta, "entities": []}
            out.append({**record, "problem": item.problem})
        return pd.DataFrame(out, columns=["id", "source", "meta", "entities", "problem"])


def annotate_dataset(
    ds,
    model: Union[str, Path],
    *,
    text_key: str = "text",
    id_key: str = "id",
    batch_size: int = 64,
    workers: int = 2,
    cpus_per_worker: Optional[float] = None,
    gpus_per_worker: float = 0.0,
    threshold: Optional[float] = None,
    sentencizer: bool = False,
    max_length: Optional[int] = None,
):
    """A Dataset of records, one per row of ``ds`` (its ``text_key`` column holds the text).

    ``model`` is a path every worker can read (or a package installed on every node). Rows
    without a text get a record with no entities and a ``problem``; every other column of a
    row goes to the record's ``meta``. ``cpus_per_worker`` defaults to one CPU per actor, less
    on a cluster with no CPU to spare for Ray's read tasks (``default_cpus_per_worker``).
    """
    if cpus_per_worker is None:
        cpus_per_worker = default_cpus_per_worker(workers)
    options = AnnotateOptions.of(engine="ray", gpus_per_worker=gpus_per_worker, threshold=threshold,
                                 sentencizer=sentencizer, max_length=max_length)
    return ds.map_batches(
        RowAnnotator,
        fn_constructor_args=(str(model), options.pipeline(), cpus_per_worker, text_key, id_key),
        batch_size=batch_size,
        batch_format="pandas",
        **_actor_pool(workers, cpus_per_worker, gpus_per_worker),
    )


def _actor_pool(workers: int, cpus: float, gpus: float) -> Dict[str, Any]:
    """map_batches' arguments for a pool of ``workers`` actors that are restarted when they die,
    their batch retried, ``RETRIES`` times (Ray's own default is without end: a document that
    kills every actor would hang the run). Ray 2.60 takes the two limits only as remote
    arguments, which it warns will go in 2.64: the ``ray`` extra stops below that."""
    return dict(concurrency=workers, num_cpus=cpus, num_gpus=gpus or None,
                max_restarts=RETRIES, max_task_retries=RETRIES)


# ---------------------------------------------------------------- the command's path


def item_schema():
    """The Arrow schema of the rows the read tasks give the actors: serialized ``Item``s."""
    import pyarrow as pa

    return pa.schema([("position", pa.int64()), ("item", pa.large_string())])


def annotated_schema():
    """The Arrow schema of the rows the actors give back: the item, its record, its Doc's bytes."""
    import pyarrow as pa

    return pa.schema([("position", pa.int64()), ("item", pa.large_string()), ("record", pa.large_string()),
                      ("doc_bytes", pa.large_binary())])


def _item_to_row(item: Item) -> Dict[str, Any]:
    return {"position": item.position, "source": item.source, "id": item.id, "text": item.text,
            "meta": item.meta, "problem": item.problem,
            "doc_bytes": None if item.doc_bytes is None else item.doc_bytes.hex()}


def _item_from_row(row: Dict[str, Any]) -> Item:
    fields = json.loads(row["item"])
    doc_bytes = fields.pop("doc_bytes")
    return Item(**fields, doc_bytes=None if doc_bytes is None else bytes.fromhex(doc_bytes))


def _plain(value):
    """A value of a Ray row as plain Python (numpy scalars and arrays as numbers and lists; a
    missing value, NaN in pandas, as None)."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


class _InputDatasource:
    """Ray read tasks over ranges of the input's documents, read with ``annotate.read_inputs``."""

    def __new__(cls, *args, **kwargs):
        from ray.data import Datasource

        class InputDatasource(Datasource):
            def __init__(self, path, input_format, first, total, options, per_task):
                self.path, self.input_format, self.first, self.total = path, input_format, first, total
                self.options, self.per_task = options, per_task

            def estimate_inmemory_data_size(self):
                return None

            def get_read_tasks(self, parallelism, per_task_row_limit=None, data_context=None):
                from ray.data import ReadTask
                from ray.data.block import BlockMetadata

                tasks = []
                for start in range(self.first, self.total, self.per_task):
                    stop = min(start + self.per_task, self.total)
                    metadata = BlockMetadata(num_rows=stop - start, size_bytes=None, input_files=None, exec_stats=None)
                    tasks.append(ReadTask(self._reader(start, stop), metadata))
                return tasks

            def _reader(self, start, stop):
                path, input_format, options = self.path, self.input_format, self.options

                def read():
                    import pyarrow as pa

                    rows = [
                        {"position": item.position, "item": json.dumps(_item_to_row(item), ensure_ascii=False)}
                        for item in read_inputs(path, input_format, start=start, stop=stop, **options)
                    ]
                    yield pa.Table.from_pylist(rows, schema=item_schema())

                return read

        return InputDatasource(*args, **kwargs)


def annotate_with_ray(
    model: Union[str, Path],
    input_path: Union[str, Path],
    output: Union[str, Path],
    options: Optional[AnnotateOptions] = None,
    *,
    on_problem=None,
    **overrides,
):
    """The ``annotate`` command on Ray: the same records, errors, checkpoints and resume as the
    local engine (options as ``AnnotateOptions`` and/or keywords)."""
    ray = require_ray()  # before any file is created
    options = AnnotateOptions.of(options, **{"engine": "ray", **overrides})
    if str(input_path) == "-":
        raise AnnotationError("the Ray engine reads files, not standard input: write the input to a file first")
    prepared = prepare_run(input_path, output, options)
    run = prepared.run
    start_ray(options.address)
    pipeline = options.pipeline()
    nlp = load_pipeline(model, pipeline)  # fails here, not in every actor
    run.spans_key, run.model_version = spans_key_of(nlp), model_version(nlp)
    total = prepared.total
    source = _InputDatasource(str(input_path), prepared.input_format, run.skip, total, options.reader(), options.documents_per_task)
    # Reading is light: its tasks must not wait for the CPUs the actors hold.
    ds = ray.data.read_datasource(source, num_cpus=0)
    cpus = 1.0  # the read tasks take no CPU here
    annotated = ds.map_batches(
        ItemAnnotator,
        fn_constructor_args=(str(model), pipeline, cpus, run.needs_docs),
        batch_size=options.batch_size,
        batch_format="pyarrow",
        **_actor_pool(options.workers, cpus, options.gpus_per_worker),
    )
    results = (
        (_item_from_row(row), None if row["record"] is None else json.loads(row["record"]),
         None if row["doc_bytes"] is None else _doc_from_bytes(row["doc_bytes"]))
        for row in annotated.iter_rows()
    )
    return write_in_order(run, results, total=total, progress=options.progress, strict=options.strict, on_problem=on_problem)


_VOCAB = None


def _doc_from_bytes(data: bytes):
    """A Doc sent back by an actor (strings travel with it)."""
    global _VOCAB
    import spacy
    from spacy.tokens import Doc

    if _VOCAB is None:
        _VOCAB = spacy.blank("xx").vocab
    return Doc(_VOCAB).from_bytes(data)
