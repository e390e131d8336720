"""The host's share of GPU inference, measured on a CPU: what the Python side of ``nlp.pipe`` costs.

    bench/gpu/bench.py make-encoder NARROW --like MPNET_CONFIG_DIR --width 64
    cd TREE && PYTHONPATH=. python /path/to/bench/gpu/host_calls.py TRAIN.spacy TEST.spacy --encoder NARROW

On a GPU the CADEC test set's arithmetic is a small part of inference: the host's Python and
its calls into torch are most of it. This builds the GPU recipe (``w2ner_mpnet_gpu.cfg``) with the
encoder in ``--encoder`` (``make-encoder --width 64``: MPNet's 12 layers and torch calls, 64
wide, so little arithmetic) and a grid network as narrow, whose output layer always prefers
NONE (as the speed bench's model, trained 150 steps on a random encoder, predicts no entity),
without a grid padding limit (a GPU's rule; a CPU's is 1.25), initialized on 20 training
sentences, and times ``nlp.pipe`` over the test sentences on one thread: the whole pipeline and
the encoder alone (w2ner disabled), each the median of ``--repeats`` runs, and cProfile's count
of Python calls of one run, which unlike the seconds does not depend on the machine (cProfile's
own times overstate cheap calls many times over: time a change, do not read it off a profile).
``TREE`` is a git worktree of another commit, or this one: the same script times both, one
after the other, on one machine.

``--graphs`` also times both with the encoder's passes from CUDA graphs (``nn/cuda_graphs.py``)
whose replay does nothing here (``ReplayingNothing``): what the host still does for a pass with
graphs. Narrow the encoder further for it (``--width 16``: the eager passes' arithmetic then
costs little on the CPU too, and the two compare host with host). ``all_graphs_pipeline`` replays
the grid network's passes so too: what the host does for a batch with no pass of either network
run eagerly (the grid network's eager arithmetic is not small on a CPU, even this narrow, so
the difference from ``graphs_pipeline`` is that arithmetic and its host work together).

``--stages`` (with ``--graphs``) times ``all_graphs_pipeline`` by stage (``stage_seconds``):
where the host's time goes once neither network runs a pass eagerly.

Before the 28th, this script timed the MiniLM CPU recipe's encoder alone (its version at
commit dd8331d).
"""
import argparse
import cProfile
import functools
import json
import pstats
import statistics
import time
from typing import Dict

import spacy
import torch
from spacy.tokens import DocBin
from spacy.training import Example

from spacy_w2ner.encoders.transformer import node_named

NARROW_GRID = {"lstm_size": 32, "conv_size": 16, "biaffine_size": 32, "ffnn_size": 16, "dist_emb_size": 8, "region_emb_size": 8}  # fmt: skip


def build_pipeline(train_path: str, encoder: str):
    config = spacy.util.load_config("project/configs/w2ner_mpnet_gpu.cfg", interpolate=False)
    config["components"]["transformer"]["model"]["name"] = encoder
    config["components"]["w2ner"]["model"].update(NARROW_GRID, max_grid_padding=1e9)  # a GPU's rule: no limit
    config["paths"].update(train=train_path, dev=train_path)
    nlp = spacy.util.load_model_from_config(config, auto_fill=True, validate=True)
    train = list(DocBin().from_disk(train_path).get_docs(nlp.vocab))[:20]
    nlp.initialize(lambda: [Example(nlp.make_doc(doc.text), doc) for doc in train])
    predict_none(nlp.get_pipe("w2ner").model)
    return nlp


class ReplayingNothing:
    """A CUDA graph recorder for the CPU whose replay does nothing: with it, a pass costs what the
    host still does around a graph's replay (padding in, copying out), without the device's
    arithmetic, which a GPU does behind the host."""

    device_type = "cpu"

    def __call__(self, run):
        return (lambda: None), run()


def predict_none(model) -> None:
    """Make the grid network's output layer prefer NONE (label 0) in every cell."""
    for node in model.walk():
        for shim in node.shims:
            output = getattr(getattr(shim._model, "co_predictor", None), "cell_output", None)
            if output is not None:
                with torch.no_grad():
                    output.bias[0] = 1e4


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("train")
    parser.add_argument("test")
    parser.add_argument("--encoder", required=True, help="bench.py make-encoder's output (--width 64)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--sentences", type=int, default=0, help="the first N test sentences (0: all)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--pass-padding", type=float, default=1.25, help="the encoder's max_pass_padding")
    parser.add_argument("--graphs", action="store_true", help="also with CUDA graphs, whose replay here does nothing: the host's part of a pass with graphs")
    parser.add_argument("--stages", action="store_true", help="with --graphs: all_graphs_pipeline's time by stage (stage_seconds), timed by wrappers, the best of --repeats")
    args = parser.parse_args()
    import spacy_w2ner

    torch.set_num_threads(1)
    nlp = build_pipeline(args.train, args.encoder)
    encoder = node_named(nlp.get_pipe("transformer").model, "hf-pytorch")
    encoder.attrs["max_pass_padding"] = args.pass_padding
    texts = [doc.text for doc in DocBin().from_disk(args.test).get_docs(nlp.vocab)]
    texts = texts[: args.sentences] if args.sentences else texts

    def run(disable) -> int:
        return sum(len(doc.spans.get("w2ner", [])) for doc in nlp.pipe(texts, batch_size=args.batch_size, disable=disable))

    result = {"bench": "host-calls", "code": spacy_w2ner.__file__, "sentences": len(texts), "batch_size": args.batch_size, "max_pass_padding": args.pass_padding}  # fmt: skip
    runs = [("pipeline", []), ("encoder_only", ["w2ner"])]
    if args.graphs:  # imported here: the trees of older commits have no CUDA graphs
        from spacy_w2ner.nn import cuda_graphs

        cuda_graphs.CudaGraphRecorder = ReplayingNothing
        runs += [("graphs_pipeline", []), ("graphs_encoder_only", ["w2ner"]), ("all_graphs_pipeline", [])]
    grid_scorer = nlp.get_pipe("w2ner").model.get_ref("grid_scorer")
    for name, disable in runs:
        encoder.attrs["cuda_graphs"] = "graphs" in name
        grid_scorer.attrs["cuda_graphs"] = name.startswith("all_graphs")
        entities = run(disable)  # warm-up
        seconds = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            run(disable)
            seconds.append(time.perf_counter() - start)
        profile = cProfile.Profile()
        profile.enable()
        run(disable)
        profile.disable()
        result[f"{name}_seconds"] = round(statistics.median(seconds), 3)
        result[f"{name}_python_calls"] = pstats.Stats(profile).total_calls
        if name == "pipeline":
            result["entities"] = entities
    if args.graphs and args.stages:  # the graphs of the last run are on
        result["stage_seconds"] = stage_seconds(nlp, lambda: run([]), args.repeats)
    print(json.dumps(result))


def stage_seconds(nlp, run, repeats: int) -> dict:
    """Seconds of each stage of ``run`` (the best of ``repeats`` runs, by total), timed by
    wrappers around each stage's function (a timer call each, not a profiler's on every call);
    ``rest``: the total less the stages (the sentencizer, the doc cleaner, spaCy's pipe). On a
    GPU the device does ``host_grids``' softmax and reduction (on a CPU, here, the host)."""
    import spacy_transformers.pipeline_component as pipeline_component

    from spacy_w2ner.encoders import wordpieces
    from spacy_w2ner.model import predictions

    seconds: Dict[str, float] = {}

    def timed(name, function):
        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - start

        return wrapper

    w2ner = nlp.get_pipe("w2ner")
    encoder = node_named(nlp.get_pipe("transformer").model, "hf-pytorch")
    patches = [
        (nlp, "tokenizer", "spacy_tokenizer"),
        (wordpieces, "wordpieces_and_alignment", "wordpiece_tokenization"),
        (wordpieces, "align_by_offsets", "alignment"),
        (encoder, "_func", "encoder_passes"),
        (pipeline_component.Transformer, "set_annotations", "transformer_split_by_doc"),
        (w2ner.model.get_ref("tok2vec"), "_func", "listener_pooling"),
        (w2ner.model.get_ref("grid_scorer"), "_func", "grid_passes"),
        (predictions.HostGrids, "__init__", "host_grids"),
        (w2ner, "_start_predict", "w2ner_start"),
        (w2ner, "entities_from_grids", "w2ner_decoding"),
        (w2ner, "set_annotations", "w2ner_set_annotations"),
    ]
    # (owner, attr, its value, whether it is the class's method bound to the instance)
    originals = [(owner, attr, getattr(owner, attr), getattr(getattr(owner, attr), "__self__", None) is owner) for owner, attr, _ in patches]
    for owner, attr, name in patches:
        setattr(owner, attr, timed(name, getattr(owner, attr)))
    best: Dict[str, float] = {}
    try:
        for _ in range(repeats):
            seconds.clear()
            start = time.perf_counter()
            run()
            total = time.perf_counter() - start
            if not best or total < best["total"]:
                best = {"total": total, **seconds}
    finally:
        for owner, attr, original, bound in originals:
            if bound:
                delattr(owner, attr)  # the class's method again
            else:
                setattr(owner, attr, original)
    inner = ("listener_pooling", "grid_passes", "host_grids")  # within w2ner_start
    best["w2ner_start"] -= sum(best.get(name, 0.0) for name in inner)
    best["wordpiece_tokenization"] -= best.get("alignment", 0.0)  # within it
    best["rest"] = best["total"] - sum(value for name, value in best.items() if name != "total")
    return {name: round(value, 3) for name, value in best.items()}


if __name__ == "__main__":
    main()
