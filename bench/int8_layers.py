"""Which encoder layers to make int8, and with how many activation bits: CADEC dev and test F of
each choice against float32, one saved pipeline (the choice of ``optimize``'s default).

    python bench/int8_layers.py training/cadec-w2ner_minilm_cpu/model-best \
        corpora/converted/cadec/dev.spacy corpora/converted/cadec/test.spacy \
        --output bench/results/cpu-int8-layers.json

Each case loads the pipeline afresh, makes the layers that a preset of ``nn.int8.INT8_PRESETS``
names int8 in memory (``quantize_linear_layers``), at 7-bit activations (torch's own dynamic
Linear, ``reduce_range``) and at 8 (``nn.int8.Int8Linear`` on a CPU with AVX-512 VNNI), and
scores its predictions on the gold DocBins (batches of 1000, like ``annotate``; spaCy's ``Scorer``): F, discontinuous
and overlapping F, and the entities' agreement with float32's on test. Choose on dev; test says
how the choice holds up.
"""
import argparse
import json
import platform
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from spacy_w2ner.encoders.torch_module import encoder_torch_module  # noqa: E402
from spacy_w2ner.nn import int8  # noqa: E402
from spacy_w2ner.release.measure import agreement  # noqa: E402

BATCH = 1000


def load_gold(nlp, path: Path) -> List:
    from spacy.tokens import DocBin

    return list(DocBin().from_disk(path).get_docs(nlp.vocab))


def case(model: Path, dev: Path, test: Path, patterns: Optional[List[str]], bits: int) -> Dict:
    """F on dev and test, and test entities, of the pipeline with ``patterns``' layers int8: each
    split predicted once (batches of ``BATCH``), then scored by the pipeline's own scorer."""
    import spacy
    from spacy.scorer import Scorer
    from spacy.tokens import Doc
    from spacy.training import Example

    from spacy_w2ner import get_entities

    int8.ACTIVATION_BITS = bits
    nlp = spacy.load(model)
    if patterns:
        int8.quantize_linear_layers(encoder_torch_module(nlp, "transformer"), patterns)
    scores, entities = {}, []
    for split, path in (("dev", dev), ("test", test)):
        gold = load_gold(nlp, path)
        words = (Doc(nlp.vocab, words=[t.text for t in d], spaces=[bool(t.whitespace_) for t in d]) for d in gold)
        predicted = list(nlp.pipe(words, batch_size=BATCH))
        metrics = Scorer(nlp).score([Example(p, g) for p, g in zip(predicted, gold)])
        scores[split] = {key: round(100 * metrics[f"w2ner_{key}"], 2) for key in ("f", "discontinuous_f", "overlapping_f")}
        if split == "test":
            entities = [{(e.label, e.tokens) for e in get_entities(doc)} for doc in predicted]
    return {"scores": scores, "_entities": entities}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("dev", type=Path)
    parser.add_argument("test", type=Path)
    parser.add_argument("--presets", nargs="+", default=list(int8.INT8_PRESETS))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    if int8.ACTIVATION_BITS < 8:
        sys.exit("this CPU has no AVX-512 VNNI: 8-bit activations cannot be measured here")
    start = time.perf_counter()
    reference = case(args.model, args.dev, args.test, None, 8)
    float32_entities = reference.pop("_entities")
    cases: Dict[str, Dict] = {"float32": reference["scores"]}
    for preset in args.presets:
        for bits in (7, 8):
            result = case(args.model, args.dev, args.test, int8.INT8_PRESETS[preset], bits)
            entry = result["scores"]
            for split in ("dev", "test"):
                entry[split]["f_minus_float32"] = round(entry[split]["f"] - reference["scores"][split]["f"], 2)
            entry["test_entities_vs_float32"] = agreement(float32_entities, result["_entities"])
            cases[f"{preset}, {bits}-bit activations"] = entry
            print(preset, bits, json.dumps(entry), file=sys.stderr, flush=True)
    report = {"model": str(args.model), "dev": str(args.dev), "test": str(args.test), "batch_size": BATCH,
              "threads": args.threads, "cases": cases, "seconds": round(time.perf_counter() - start),
              "torch": torch.__version__, "python": platform.python_version()}  # fmt: skip
    text = json.dumps(report, indent=2) + "\n"
    print(text)
    if args.output:
        args.output.write_text(text)


if __name__ == "__main__":
    sys.exit(main())
