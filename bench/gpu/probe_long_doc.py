"""Where a long document's time goes on a device: the encoder, w2ner's network, decoding.

    python bench/gpu/probe_long_doc.py MODEL DATA.spacy [--tokens 50000] [--gpu-id 0]

Runs one document of --tokens tokens (the data's sentences repeated) through the pipeline
three times with sentence boundaries (the first run meets every grid shape for the first
time) and once without, timing each stage after a CUDA synchronisation. Prints JSON lines.
"""
import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("model")
    parser.add_argument("data")
    parser.add_argument("--tokens", type=int, default=50000)
    parser.add_argument("--gpu-id", type=int, default=0)
    args = parser.parse_args()

    import spacy
    from spacy.tokens import Doc

    from bench import long_document, use_device
    from hooks import synchronize
    from spacy_w2ner.common import sentence_setters
    from spacy_w2ner.model.predictions import segment_grids
    from spacy_w2ner.grid.segments import batch_by_cells, segment_docs

    device = use_device(args.gpu_id)
    nlp = spacy.load(args.model)
    w2ner = nlp.get_pipe("w2ner")
    words, starts = long_document(args.data, nlp.vocab, args.tokens)
    nlp(Doc(nlp.vocab, words=words[:200], sent_starts=starts[:200]))  # warm-up
    model = w2ner.model
    setters = sentence_setters(nlp)
    for run, with_sentences in enumerate((True, True, False, True)):
        doc = Doc(nlp.vocab, words=words, sent_starts=starts if with_sentences else None)
        times = {}
        synchronize()
        start = time.perf_counter()
        for name, proc in nlp.pipeline:
            if name == "w2ner":
                break
            if with_sentences or name not in setters:
                doc = proc(doc)
        synchronize()
        times["before_w2ner_s"] = time.perf_counter() - start
        start = time.perf_counter()
        batches = model.predict([doc])
        synchronize()
        times["network_s"] = time.perf_counter() - start
        start = time.perf_counter()
        grids = list(segment_grids(batches))
        times["to_host_s"] = time.perf_counter() - start
        start = time.perf_counter()
        predictions = w2ner.predict([doc])  # network again + decoding
        synchronize()
        times["predict_again_s"] = time.perf_counter() - start
        segments = segment_docs([doc], model.attrs["max_window"], model.attrs["window_overlap"])
        shapes = {(len(b), max(s.length for s in b)) for b in batch_by_cells(segments, model.attrs["max_grid_cells"])}
        print(json.dumps({
            "run": run, "device": device, "sentence_boundaries": with_sentences,
            "segments": len(segments), "grid_batches": len(batches), "distinct_shapes": len(shapes),
            "entities": len(predictions[0]), "grids": len(grids),
            **{k: round(v, 3) for k, v in times.items()},
        }), flush=True)


if __name__ == "__main__":
    main()
