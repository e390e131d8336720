"""Training and inference throughput of transformer + w2ner against transformer + spancat
and the transformer alone, on CADEC, in one run (ratios are what count: machines are noisy).

    python bench/throughput.py ../shared/corpora/cadec/w2ner-json --output bench/results/cpu.json

1. Training: for each system (w2ner_minilm_cpu.cfg, spancat_minilm_cpu.cfg: same MiniLM
   encoder, optimizer and batches of --batch-size train sentences; ``--encoder mpnet``:
   w2ner_mpnet_gpu.cfg and spancat with all-mpnet-base-v2), --warmup-steps untimed then
   --train-steps timed ``nlp.update`` steps; sentences/s. ``w2ner_bf16`` is w2ner with its
   encoder trained on bfloat16 copies of its float32 weights (``training_dtype = "bfloat16"``,
   ``nn.bfloat16``), the same batches, its steps interleaved with float32 w2ner's one by one
   (the ratio of the two is what counts on a shared machine).
2. Inference on the test sentences (pre-tokenized Docs, ``nlp.pipe``), with the weights
   from step 1: the transformer alone (w2ner disabled), transformer + spancat, transformer +
   w2ner (decoding included), and w2ner predicting with bfloat16 weights (``w2ner_bf16``: the
   encoder's, as ``optimize``'s ``bfloat16`` candidate; ``w2ner_bf16_grid``: the grid network's
   too), their entities scored against float32 w2ner's; --rounds interleaved rounds, the best
   round of each counts.
3. Peak RAM: a fresh process loads the saved w2ner pipeline and annotates the test set;
   its peak RSS (VmHWM) is reported whole, not as growth.
"""
import argparse
import json
import platform
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

from memory import peak_rss_mb, rss_mb  # noqa: E402  (bench/ is on sys.path)
from plots import THROUGHPUT_RUNS, plot_after_run, runs_beside  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = {"w2ner": "w2ner_minilm_cpu.cfg", "spancat": "spancat_minilm_cpu.cfg", "w2ner_bf16": "w2ner_minilm_cpu.cfg"}
MPNET = {"w2ner": "w2ner_mpnet_gpu.cfg", "w2ner_bf16": "w2ner_mpnet_gpu.cfg", "spancat": "spancat_minilm_cpu.cfg"}
MPNET_NAME = {"components.transformer.model.name": {"@misc": "spacy_w2ner.encoder_path.v1", "name": "all-mpnet-base-v2"}}
OVERRIDES = {"w2ner_bf16": {"components.transformer.model.training_dtype": "bfloat16"}}


def read_sentences(path: Path, vocab) -> List:
    from spacy_w2ner.formats import read_w2ner_json

    return list(read_w2ner_json(path, vocab))


def build(system: str, train_docs: List, threads: int, encoder: str = "minilm"):
    import spacy
    import torch
    from spacy.training import Example

    torch.set_num_threads(threads)
    overrides = dict(OVERRIDES.get(system, {}))
    if encoder == "mpnet" and system == "spancat":
        overrides.update(MPNET_NAME)
    name = (MPNET if encoder == "mpnet" else CONFIGS)[system]
    config = spacy.util.load_config(ROOT / "project" / "configs" / name, overrides=overrides, interpolate=True)
    nlp = spacy.util.load_model_from_config(config, auto_fill=True, validate=True)
    examples = [Example(blank_copy(doc, nlp.vocab), doc) for doc in train_docs]
    spacy.util.fix_random_seed(0)
    optimizer = nlp.initialize(lambda: examples[:500])
    return nlp, optimizer, examples


def blank_copy(doc, vocab):
    from spacy.tokens import Doc

    return Doc(vocab, words=[t.text for t in doc], spaces=[bool(t.whitespace_) for t in doc])


def time_training(nlp, optimizer, examples, batch_size: int, warmup: int, steps: int) -> Dict:
    rng = random.Random(0)
    order = list(range(len(examples)))
    rng.shuffle(order)
    batches = [
        [examples[i] for i in order[k : k + batch_size]] for k in range(0, (warmup + steps) * batch_size, batch_size)
    ]
    losses: Dict[str, float] = {}
    for batch in batches[:warmup]:
        nlp.update(batch, sgd=optimizer, losses=losses)
        optimizer.step_schedules()  # as spaCy's loop does: the learning rate moves on
    start = time.perf_counter()
    for batch in batches[warmup:]:
        nlp.update(batch, sgd=optimizer, losses=losses)
        optimizer.step_schedules()
    seconds = time.perf_counter() - start
    sentences = sum(len(b) for b in batches[warmup:])
    words = sum(len(e.reference) for b in batches[warmup:] for e in b)
    return {
        "steps": steps,
        "sentences": sentences,
        "seconds": round(seconds, 2),
        "sentences_per_s": round(sentences / seconds, 2),
        "words_per_s": round(words / seconds, 1),
    }


def time_training_interleaved(pipelines: Dict[str, tuple], batch_size: int, warmup: int, steps: int) -> Dict[str, Dict]:
    """``time_training`` of several pipelines on the same batches, their steps interleaved one by
    one (the order reversed every other step), each timed on its own."""
    rng = random.Random(0)
    first = next(iter(pipelines.values()))[2]
    order = list(range(len(first)))
    rng.shuffle(order)
    batches = [order[k : k + batch_size] for k in range(0, (warmup + steps) * batch_size, batch_size)]
    seconds = {name: 0.0 for name in pipelines}
    for step, batch in enumerate(batches):
        names = list(pipelines) if step % 2 == 0 else list(reversed(pipelines))
        for name in names:
            nlp, optimizer, examples = pipelines[name]
            start = time.perf_counter()
            nlp.update([examples[i] for i in batch], sgd=optimizer, losses={})
            optimizer.step_schedules()
            if step >= warmup:
                seconds[name] += time.perf_counter() - start
    sentences = sum(len(batch) for batch in batches[warmup:])
    words = sum(len(first[i].reference) for batch in batches[warmup:] for i in batch)
    return {name: {"steps": steps, "sentences": sentences, "seconds": round(total, 2),
                   "sentences_per_s": round(sentences / total, 2), "words_per_s": round(words / total, 1)}
            for name, total in seconds.items()}  # fmt: skip


def time_inference(nlp, docs: List, batch_size: int, disable: List[str]) -> Dict:
    inputs = [blank_copy(doc, nlp.vocab) for doc in docs]
    with nlp.select_pipes(disable=disable):
        start = time.perf_counter()
        outputs = list(nlp.pipe(inputs, batch_size=batch_size))
        seconds = time.perf_counter() - start
    words = sum(len(doc) for doc in docs)
    spans = sum(len(doc.spans.get("w2ner", [])) for doc in outputs)
    return {
        "sentences": len(docs),
        "seconds": round(seconds, 2),
        "sentences_per_s": round(len(docs) / seconds, 2),
        "words_per_s": round(words / seconds, 1),
        "spans_predicted": spans,
    }


def peak_ram_case(model: str, test_path: str, batch_size: int, threads: int) -> Dict:
    import spacy
    import torch

    torch.set_num_threads(threads)
    nlp = spacy.load(model)
    docs = read_sentences(Path(test_path), nlp.vocab)
    loaded = rss_mb()
    start = time.perf_counter()
    for _ in nlp.pipe([blank_copy(doc, nlp.vocab) for doc in docs], batch_size=batch_size):
        pass
    seconds = time.perf_counter() - start
    peak = peak_rss_mb()
    return {
        "sentences": len(docs),
        "seconds": round(seconds, 2),
        "rss_after_load_mb": round(loaded),
        "peak_rss_mb": round(peak),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", help="Directory with W2NER JSON train.json and test.json (CADEC)")
    parser.add_argument("--batch-size", type=int, default=16, help="Training batch (sentences)")
    parser.add_argument("--pipe-batch-size", type=int, default=64, help="nlp.pipe batch (sentences)")
    parser.add_argument("--warmup-steps", type=int, default=5)
    parser.add_argument("--train-steps", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=2, help="Interleaved inference rounds")
    parser.add_argument("--threads", type=int, default=2, help="torch threads")
    parser.add_argument("--encoder", choices=["minilm", "mpnet"], default="minilm", help="mpnet: w2ner_mpnet_gpu.cfg")
    parser.add_argument("--output", help="Write the figures as JSON here")
    parser.add_argument("--peak-ram-case", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    corpus = Path(args.corpus)
    if args.peak_ram_case:
        print(json.dumps(peak_ram_case(*args.peak_ram_case, args.pipe_batch_size, args.threads)))
        return

    import spacy

    vocab = spacy.blank("en").vocab
    train_docs = read_sentences(corpus / "train.json", vocab)
    test_docs = read_sentences(corpus / "test.json", vocab)
    from spacy_w2ner.nn.bfloat16 import cpu_bfloat16_instructions
    from spacy_w2ner.nn.int8 import cpu_features
    from spacy_w2ner.release.bfloat16 import CANDIDATES
    from spacy_w2ner.release.measure import agreement, entity_sets

    result: Dict = {
        "machine": {"python": platform.python_version(), "cpu": platform.processor() or platform.machine(),
                    "model": cpu_features()["model"], "bfloat16_instructions": cpu_bfloat16_instructions()},
        "command": " ".join(sys.argv),
        "settings": vars(args),
    }
    built = {system: build(system, train_docs, args.threads, args.encoder) for system in ("w2ner", "w2ner_bf16")}
    for system, figures in time_training_interleaved(built, args.batch_size, args.warmup_steps, args.train_steps).items():
        result[f"train_{system}"] = figures
        print(system, "training", figures, flush=True)
    pipelines = {system: nlp for system, (nlp, _, _) in built.items()}
    nlp, optimizer, examples = build("spancat", train_docs, args.threads, args.encoder)
    result["train_spancat"] = time_training(nlp, optimizer, examples, args.batch_size, args.warmup_steps, args.train_steps)
    print("spancat training", result["train_spancat"], flush=True)
    pipelines["spancat"] = nlp
    with tempfile.TemporaryDirectory() as tmp:  # the float32 w2ner pipeline predicting in bfloat16
        pipelines["w2ner"].to_disk(tmp)
        for name, candidate in CANDIDATES.items():
            pipelines[name] = spacy.load(tmp)
            candidate.apply(pipelines[name], "transformer")

    cases = {
        "transformer": (pipelines["w2ner"], ["w2ner"]),
        "spancat": (pipelines["spancat"], []),
        "w2ner": (pipelines["w2ner"], []),
        "w2ner_bf16": (pipelines["bfloat16"], []),
        "w2ner_bf16_grid": (pipelines["bfloat16+grid"], []),
    }
    float32_entities = entity_sets(pipelines["w2ner"], [blank_copy(doc, vocab) for doc in test_docs], args.pipe_batch_size)
    for name in ("w2ner_bf16", "w2ner_bf16_grid"):
        found = entity_sets(cases[name][0], [blank_copy(doc, vocab) for doc in test_docs], args.pipe_batch_size)
        result[f"{name}_entities_vs_w2ner"] = agreement(float32_entities, found)
    for nlp, disable in cases.values():  # warm up caches and allocator
        time_inference(nlp, test_docs[:64], args.pipe_batch_size, disable)
    best: Dict[str, Dict] = {}
    for _ in range(args.rounds):
        for name, (nlp, disable) in cases.items():
            figures = time_inference(nlp, test_docs, args.pipe_batch_size, disable)
            print(name, "inference", figures, flush=True)
            if name not in best or figures["seconds"] < best[name]["seconds"]:
                best[name] = figures
    for name, figures in best.items():
        result[f"infer_{name}"] = figures

    with tempfile.TemporaryDirectory() as tmp:
        pipelines["w2ner"].to_disk(tmp)
        command = [sys.executable, __file__, str(corpus), "--peak-ram-case", tmp, str(corpus / "test.json")]
        command += ["--pipe-batch-size", str(args.pipe_batch_size), "--threads", str(args.threads)]
        output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        result["peak_ram_w2ner_test"] = json.loads(output.strip().splitlines()[-1])

    infer = {name: result[f"infer_{name}"]["sentences_per_s"] for name in cases}
    result["ratios"] = {
        "infer_w2ner_vs_transformer": round(infer["w2ner"] / infer["transformer"], 3),
        "infer_w2ner_vs_spancat": round(infer["w2ner"] / infer["spancat"], 3),
        "train_w2ner_vs_spancat": round(
            result["train_w2ner"]["sentences_per_s"] / result["train_spancat"]["sentences_per_s"], 3
        ),
        "train_w2ner_bf16_vs_w2ner": round(result["train_w2ner_bf16"]["sentences_per_s"] / result["train_w2ner"]["sentences_per_s"], 3),
        "infer_w2ner_bf16_vs_w2ner": round(infer["w2ner_bf16"] / infer["w2ner"], 3),
        "infer_w2ner_bf16_grid_vs_w2ner": round(infer["w2ner_bf16_grid"] / infer["w2ner"], 3),
        # The reference code on this machine kind (MiniLM, CADEC hyperparameters, batch 16):
        # 5.7 sentences/s training, 1160 test sentences in 78-85 s (about 14/s) inference.
        "train_w2ner_vs_reference": round(result["train_w2ner"]["sentences_per_s"] / 5.7, 2),
        "infer_w2ner_vs_reference": round(infer["w2ner"] / (1160 / 81.5), 2),
    }
    print(json.dumps(result["ratios"], indent=2))
    print("peak RAM (w2ner, CADEC test):", result["peak_ram_w2ner_test"])
    if args.output:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output).write_text(json.dumps(result, indent=2) + "\n")
        plot_after_run("speed", throughput=runs_beside(args.output, *THROUGHPUT_RUNS), output=Path(args.output).parent / "speed.png")


if __name__ == "__main__":
    main()
