"""The service's parts that need no server: a batch the model fails on reaches only the requests
whose documents fail (``serve.batching``), and the options a loaded pipeline settles (its own
threshold, its ``max_length``)."""
import asyncio
from concurrent.futures import ThreadPoolExecutor

import pytest

pytest.importorskip("fastapi")

from spacy_w2ner.serve.batching import DynamicBatcher  # noqa: E402
from spacy_w2ner.serve.options import ServeOptions  # noqa: E402


def test_a_document_the_model_fails_on_fails_alone_not_its_whole_batch():
    calls = []

    def run_batch(payloads):
        calls.append(list(payloads))
        if "poison" in payloads:
            raise ValueError("cannot read 'poison'")
        return [payload.upper() for payload in payloads]

    async def main():
        batcher = DynamicBatcher(run_batch, ThreadPoolExecutor(1), max_batch_size=8, max_wait_s=0.05, max_queue=16)
        batcher.start()
        futures = batcher.submit(["pain", "poison", "knees"])
        results = await asyncio.gather(*futures, return_exceptions=True)
        await batcher.stop()
        return results

    pain, poison, knees = asyncio.run(main())
    assert (pain, knees) == ("PAIN", "KNEES")
    assert isinstance(poison, ValueError) and "poison" in str(poison)
    assert calls == [["pain", "poison", "knees"], ["pain"], ["poison"], ["knees"]]


def test_a_loaded_pipeline_settles_the_lowest_threshold_and_the_longest_text(trained_nlp):
    pipe = trained_nlp.get_pipe("w2ner")
    before = (pipe.threshold, trained_nlp.max_length)
    try:
        pipe.threshold, trained_nlp.max_length = 0.9, 1500
        options = ServeOptions(max_text_chars=100_000)
        options.settle(trained_nlp)
        assert (options.threshold, options.min_threshold, options.max_text_chars) == (0.9, 0.9, 1500)
        given = ServeOptions(threshold=0.2, max_text_chars=1000)  # --threshold set it on the pipeline
        given.settle(trained_nlp)
        assert (given.threshold, given.max_text_chars) == (0.2, 1000)
    finally:
        pipe.threshold, trained_nlp.max_length = before
