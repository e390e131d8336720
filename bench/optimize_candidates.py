"""Fast CPU inference: the candidates side by side, before one is chosen (issue 30, step 2).

    python bench/optimize_candidates.py MODEL_DIR ../shared/corpora/cadec/w2ner-json/test.json \
        --output bench/results/cpu-optimize-candidates.json

MODEL_DIR is a trained transformer + w2ner pipeline (the demo's, or the CADEC recipe's). Each
candidate is the same saved pipeline, loaded afresh, with its torch modules swapped in place:

* ``float32``: as saved (the reference);
* ``torch-int8-encoder``: torch's dynamic int8 (``torch.ao.quantization.quantize_dynamic``) of the
  encoder's Linear layers;
* ``torch-int8-encoder+grid``: also the grid network's BiLSTM and the Linear layers it calls as
  modules (conditional layer norm's gamma/beta, the biaffine's head/tail projections, the cell
  MLP's hidden layer); the grid projection (its weight is used directly), the convolutions, the
  biaffine weight and the output layer stay float32;
* ``onnx-encoder``: the encoder exported to ONNX and run by ONNX Runtime (its graph optimizations on);
* ``onnx-int8-encoder``: that graph with ONNX Runtime's dynamic int8 quantization.

For each: documents/s through ``nlp.pipe`` over the test sentences (pre-tokenized, 2 threads,
interleaved rounds, the best round counts), and what it changes: the candidate's entities scored
against float32's (P/R/F, documents whose entities differ). Ratios against float32 are what
count (one run, a noisy machine).
"""
import argparse
import copy
import json
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List

import torch

from spacy_w2ner.release.measure import agreement, entity_sets

ROOT = Path(__file__).resolve().parents[1]


def encoder_shim(nlp):
    """The shim whose ``_model`` is the HF transformer (spacy-transformers' HFShim)."""
    for node in nlp.get_pipe("transformer").model.walk():
        if node.name == "hf-pytorch":
            return node.shims[0]
    raise ValueError("no transformer encoder in the pipeline")


def grid_shim(nlp):
    return nlp.get_pipe("w2ner").model.get_ref("grid_scorer").layers[0].shims[0]


def torch_int8_encoder(nlp, work: Path) -> None:
    shim = encoder_shim(nlp)
    shim._model = torch.ao.quantization.quantize_dynamic(shim._model, {torch.nn.Linear}, dtype=torch.qint8)


def torch_int8_encoder_and_grid(nlp, work: Path) -> None:
    torch_int8_encoder(nlp, work)
    shim = grid_shim(nlp)
    shim._model = torch.ao.quantization.quantize_dynamic(shim._model, GRID_INT8_LAYERS, dtype=torch.qint8)


GRID_INT8_LAYERS = {"lstm", "grid_builder.gamma", "grid_builder.beta", "co_predictor.head", "co_predictor.tail",
                    "co_predictor.cell_hidden"}  # fmt: skip


class OrtEncoder(torch.nn.Module):
    """Stands in for the HF transformer when predicting: the same keyword inputs, an output with
    ``last_hidden_state`` and (when asked) ``hidden_states``, computed by ONNX Runtime."""

    def __init__(self, path: Path, threads: int):
        super().__init__()
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.inputs = [i.name for i in self.session.get_inputs()]

    def forward(self, output_hidden_states: bool = False, **kwargs):
        from transformers.modeling_outputs import BaseModelOutput

        feed = {name: kwargs[name].to(torch.int64).numpy() for name in self.inputs}  # the mask comes as floats
        outputs = [torch.from_numpy(array) for array in self.session.run(None, feed)]
        hidden = tuple(outputs[1:]) if output_hidden_states else None
        return BaseModelOutput(last_hidden_state=outputs[0], hidden_states=hidden)



def export_encoder(nlp, path: Path) -> int:
    """The HF encoder as ONNX (dynamic batch and length), every layer's output too; its layers."""
    transformer = encoder_shim(nlp)._model
    names = ["input_ids", "attention_mask"]
    if "token_type_ids" in transformer.forward.__code__.co_varnames and transformer.config.type_vocab_size > 1:
        names.append("token_type_ids")
    n_layers = transformer.config.num_hidden_layers

    class Exported(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.transformer = transformer

        def forward(self, *inputs):
            out = self.transformer(**dict(zip(names, inputs)), output_hidden_states=True)
            return (out.last_hidden_state, *out.hidden_states)

    sample = tuple(torch.ones((2, 16), dtype=torch.int64) for _ in names)
    outputs = ["last_hidden_state"] + [f"hidden_{k}" for k in range(n_layers + 1)]
    axes = {name: {0: "batch", 1: "length"} for name in names + outputs}
    torch.onnx.export(Exported().eval(), sample, str(path), input_names=names, output_names=outputs,
                      dynamic_axes=axes, opset_version=17, dynamo=False)  # fmt: skip
    return n_layers


def onnx_encoder(nlp, work: Path, quantize: bool = False, threads: int = 2) -> None:
    path = work / "encoder.onnx"
    if not path.exists():
        export_encoder(copy.deepcopy(nlp), path)
    if quantize:
        from onnxruntime.quantization import QuantType, quantize_dynamic

        quantized = work / "encoder-int8.onnx"
        if not quantized.exists():
            quantize_dynamic(str(path), str(quantized), weight_type=QuantType.QInt8)
        path = quantized
    shim = encoder_shim(nlp)
    shim._model = OrtEncoder(path, threads)


CANDIDATES: Dict[str, Callable] = {
    "float32": lambda nlp, work: None,
    "torch-int8-encoder": torch_int8_encoder,
    "torch-int8-encoder+grid": torch_int8_encoder_and_grid,
    "onnx-encoder": lambda nlp, work: onnx_encoder(nlp, work),
    "onnx-int8-encoder": lambda nlp, work: onnx_encoder(nlp, work, quantize=True),
}


def predicted_entities(nlp, docs) -> List[set]:
    return entity_sets(nlp, docs, batch_size=64)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("test", help="W2NER JSON test file (pre-tokenized sentences)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--candidates", nargs="*", default=list(CANDIDATES))
    parser.add_argument("--limit", type=int, default=0, help="Only the first N test sentences (0: all)")
    parser.add_argument("--output")
    args = parser.parse_args()

    import spacy

    from spacy_w2ner.formats import read_w2ner_json

    torch.set_num_threads(args.threads)
    base = spacy.load(args.model)
    docs = list(read_w2ner_json(args.test, base.vocab))
    docs = docs[: args.limit] if args.limit else docs
    words = sum(len(doc) for doc in docs)
    pipelines = {}
    with tempfile.TemporaryDirectory() as work:
        for name in args.candidates:
            nlp = spacy.load(args.model)
            CANDIDATES[name](nlp, Path(work))
            pipelines[name] = nlp
        reference = predicted_entities(pipelines["float32"], docs)
        results = {name: {"seconds": []} for name in pipelines}
        for _ in range(args.rounds):
            for name, nlp in pipelines.items():
                start = time.perf_counter()
                found = predicted_entities(nlp, docs)
                results[name]["seconds"].append(time.perf_counter() - start)
                results[name]["agreement"] = agreement(reference, found)
    base_time = min(results["float32"]["seconds"])
    for name, result in results.items():
        best = min(result["seconds"])
        result.update(docs_per_s=round(len(docs) / best, 1), words_per_s=round(words / best, 1),
                      vs_float32=round(base_time / best, 3))  # fmt: skip
        print(f"{name:26} {result['docs_per_s']:8.1f} docs/s  {result['vs_float32']:.3f}x  "
              f"F vs float32 {result['agreement']['f']:.2f}  docs differing {result['agreement']['docs_differing']}")
    report = {"model": args.model, "test": args.test, "documents": len(docs), "words": words, "threads": args.threads,
              "rounds": args.rounds, "torch": torch.__version__, "python": platform.python_version(),
              "candidates": results}  # fmt: skip
    if args.output:
        Path(args.output).write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    sys.exit(main())
