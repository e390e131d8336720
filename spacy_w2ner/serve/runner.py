"""The pipeline a service answers with, on a thread of its own.

``PipelineRunner`` owns the loaded pipeline and turns a batch of request documents into the
records ``annotate`` writes (``annotate.records.make_record``; the request's threshold applied
as the component applies its own), draws a text for the page, and says what the pipeline is.
``model_thread`` loads it on the thread that runs it.
"""
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, List, Tuple

from ..annotate.records import make_record
from ..common import load_pipeline, spans_key_of
from ..component import first_w2ner
from ..entities import get_entities, scoring_at_least, set_entities
from ..grid.segments import segment_doc
from ..visualize import grid_figures, render_entities
from .options import ServeOptions
from .requests import RequestProblem

Payload = Tuple[Dict[str, Any], float]  # a request document (text, id, meta) and its threshold
WARM_UP_TEXT = "She had severe pain in her knees and ankles after two weeks on Lipitor ."
MAX_DRAWN_CELLS = 40_000  # the page's grids: 200 sentences of 14 words, or one of 200 words


class PipelineRunner:
    """The pipeline a service answers with."""

    def __init__(self, model: str, options: ServeOptions):
        self.options = options
        self.nlp = load_pipeline(model, options.pipeline())
        options.settle(self.nlp)  # the app reads the same options: its limits are the pipeline's
        self.spans_key = spans_key_of(self.nlp)
        self._lock = threading.Lock()  # one call into the pipeline at a time (spaCy is not thread-safe)

    def records(self, payloads: List[Payload]) -> List[Dict[str, Any]]:
        """The records of a batch of request documents, in order (one ``nlp.pipe`` call)."""
        with self._lock:
            docs = list(self.nlp.pipe((document["text"] for document, _ in payloads), batch_size=max(1, len(payloads))))
        return [
            make_record(document["id"], None, document["meta"], doc, self.spans_key, threshold)
            for (document, threshold), doc in zip(payloads, docs)
        ]

    def warm_up(self) -> None:
        """One document through the pipeline, so the first request pays no first-call costs."""
        self.records([({"text": WARM_UP_TEXT, "id": None, "meta": {}}, 0.0)])

    def render(self, text: str, threshold: float, grid: bool) -> Dict[str, Any]:
        """The page's answer: the text's entities drawn (the project's renderer), its record, and
        with ``grid`` each sentence's word-pair grid (SVG). Escaped by the renderers."""
        with self._lock:
            return self._render(text, threshold, grid)

    def _render(self, text: str, threshold: float, grid: bool) -> Dict[str, Any]:
        doc = self.nlp(text)
        if grid:
            self._check_drawable(doc)
        record = make_record(None, None, {}, doc, self.spans_key, threshold)
        if threshold > 0.0:  # draw what the record holds
            set_entities(doc, scoring_at_least(get_entities(doc, self.spans_key), threshold), self.spans_key)
        html = render_entities([doc], spans_key=self.spans_key, page=False, jupyter=False)
        grids = grid_figures(self.nlp, [self.nlp.make_doc(text)], self.spans_key) if grid else []
        return {"html": html, "record": record, "grids": grids}

    def _check_drawable(self, doc) -> None:
        """413 where the doc's grids (a sentence or window each) hold more than ``MAX_DRAWN_CELLS``
        cells: an SVG of each cell would take minutes and many megabytes, and hold the model."""
        _, pipe = first_w2ner(self.nlp)
        attrs = pipe.model.attrs
        cells = sum(segment.length**2 for segment in segment_doc(doc, 0, attrs["max_window"], attrs["window_overlap"]))
        if cells > MAX_DRAWN_CELLS:
            raise RequestProblem(
                413, f"the text's grids have {cells:,} cells, more than the page draws ({MAX_DRAWN_CELLS:,}): "
                "draw it without the grids, or a shorter text",
            )

    def metadata(self) -> Dict[str, Any]:
        meta = self.nlp.meta
        _, pipe = first_w2ner(self.nlp)
        return {
            "pipeline": {"name": f"{meta.get('lang')}_{meta.get('name')}", "version": meta.get("version"),
                         "components": self.nlp.pipe_names},
            "labels": list(pipe.labels),
            "spans_key": self.spans_key,
            "threshold": {"default": self.options.min_threshold, "min": self.options.min_threshold, "max": 1.0},
            "limits": self.options.limits(),
            "batching": {"max_batch_size": self.options.max_batch_size, "max_wait_ms": self.options.max_wait_ms},
        }  # fmt: skip


def model_thread(model: str, options: ServeOptions) -> Tuple[ThreadPoolExecutor, PipelineRunner]:
    """A thread of its own for the pipeline, which loads it there and runs it there: OpenMP keeps
    a team of threads per calling thread, and a pipeline loaded on one thread and run on another
    answers more slowly (bench/README.md, "The HTTP service")."""
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="w2ner-model")
    return executor, executor.submit(PipelineRunner, model, options).result()
