"""Where a training step's time goes: ``nlp.update`` steps under cProfile, on a device.

    python bench/gpu/profile_steps.py ENCODER_DIR TRAIN.spacy [--config w2ner_trf_gpu.cfg]
        [--steps 30] [--gpu-id 0] [--mixed-precision] [--output profile.txt]

Prints the seconds per step (after a CUDA synchronisation) and cProfile's top functions by
own time and by cumulative time: a call that waits for the GPU shows as a long own time.
"""
import argparse
import cProfile
import io
import pstats
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("encoder")
    parser.add_argument("train")
    parser.add_argument("--config", default="w2ner_trf_gpu.cfg")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=12)
    parser.add_argument("--gpu-id", type=int, default=0)
    parser.add_argument("--mixed-precision", action="store_true")
    parser.add_argument("--output", default="")
    args = parser.parse_args()

    import spacy
    from spacy.training import Example

    from bench import CONFIGS, blank_copy, read_docs, use_device
    from hooks import synchronize

    device = use_device(args.gpu_id)
    config = spacy.util.load_config(CONFIGS / args.config)
    transformer = config["components"]["transformer"]["model"]
    transformer["name"] = str(Path(args.encoder).resolve())
    transformer["mixed_precision"] = args.mixed_precision
    config["components"]["w2ner"]["model"]["mixed_precision"] = args.mixed_precision
    nlp = spacy.util.load_model_from_config(config, auto_fill=True, validate=True)
    gold = read_docs(args.train, nlp.vocab)
    examples = [Example(blank_copy(doc, nlp.vocab), doc) for doc in gold]
    optimizer = nlp.initialize(lambda: examples[:200])
    batches = [examples[i : i + args.batch_size] for i in range(0, len(examples), args.batch_size)]
    for batch in batches[:5]:  # warm-up
        nlp.update(batch, sgd=optimizer)
    synchronize()
    profile = cProfile.Profile()
    start = time.perf_counter()
    profile.enable()
    for batch in batches[5 : 5 + args.steps]:
        nlp.update(batch, sgd=optimizer)
    synchronize()
    profile.disable()
    seconds = time.perf_counter() - start
    text = io.StringIO()
    text.write(f"{device}: {seconds / args.steps:.4f} s per step of {args.batch_size} sentences\n")
    for order in ("tottime", "cumulative"):
        pstats.Stats(profile, stream=text).sort_stats(order).print_stats(30)
    print(text.getvalue())
    if args.output:
        Path(args.output).write_text(text.getvalue(), encoding="utf8")


if __name__ == "__main__":
    main()
