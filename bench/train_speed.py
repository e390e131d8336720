"""Training speed on CADEC: w2ner's MPNet and MiniLM recipes (this code and an older checkout),
against a plain fine-tuning loop of the same encoder and spaCy's spancat with it; and where
the time of one w2ner step goes.

    python bench/train_speed.py ../shared/corpora/cadec/w2ner-json/train.json \\
        --old-code /tmp/w2ner-0.3.0 --output bench/results/cpu-train-speed.json

Every case runs in a fresh process with --threads torch threads on the same batches: --steps
timed training steps of --batch-size random CADEC train sentences after --warmup untimed ones,
each step what ``spacy train`` does (``nlp.update`` with the config's optimizer, its dropout).
Cases, for each encoder (MPNet: ``w2ner_mpnet_gpu.cfg``, the reference code's CADEC settings;
MiniLM: ``w2ner_minilm_cpu.cfg`` with ``train-cadec``'s recipe):

* ``w2ner``: this code; ``w2ner (old)``: the same config with the checkout's code (--old-code);
* ``plain``: the encoder fine-tuned with a linear token head over its wordpieces (torch's AdamW,
  the recipe's encoder rate, batches padded to their longest, as a fine-tuning script does);
* ``spancat``: spaCy's spancat with the same encoder (``spancat_minilm_cpu.cfg``);
* ``w2ner-bf16``: this code with the encoder trained in bfloat16 on bfloat16 copies of its float32
  weights (``training_dtype = "bfloat16"``, ``nn.bfloat16``; the grid network float32);
  ``w2ner-bf16-grid``: both networks so; ``w2ner-autocast``: the encoder under torch's CPU
  autocast to bfloat16 (``mixed_precision``; what ``w2ner-bf16`` meant before issue 71, in
  bench/results/cpu-train-speed-bf16.json) (``--systems``).

``--interleave``: the w2ner systems of ``--systems`` in one process instead, on the same batches,
their steps interleaved one by one (the order reversed every other step), each step timed on its
own: on a machine that other work keeps busy (``cpu_stalled`` near 1) the load changes from minute
to minute, and only ratios of steps taken side by side mean anything.

--rounds interleaved rounds, the best of each case counts (these machines are noisy), with the
share of its time some task of the machine waited for a CPU (``cpu_stalled``, from
/proc/pressure/cpu: near 0 on a quiet machine); peak RSS is the process's (VmHWM). ``--profile`` adds, for w2ner (both codes),
the seconds a step spends in each part: the encoder's forward and backward passes, the
tokenizer and alignment, pooling wordpieces into words, the grid network's forward and
backward, the loss, the optimizer's step, and the rest (spaCy's and w2ner's Python, copies).
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

from memory import cpu_stall_us, peak_rss_mb  # bench/ is on sys.path

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "project" / "configs"
# The encoder under the CPU's bfloat16 autocast (``nn.shim``; the grid network in float32).
ENCODER_AUTOCAST = {"components.transformer.model.mixed_precision": True, "components.transformer.model.mixed_precision_dtype": "bfloat16"}
# Training on bfloat16 copies of the float32 weights (``nn.bfloat16``): the encoder, and both networks.
ENCODER_BF16 = {"components.transformer.model.training_dtype": "bfloat16"}
BOTH_BF16 = {**ENCODER_BF16, "components.w2ner.model.training_dtype": "bfloat16"}
MINILM_RECIPE = {"components.transformer.model.last_layers": 4, "components.w2ner.learn_rate_scale": 20.0}
ENCODERS = {
    "mpnet": {
        "w2ner": ("w2ner_mpnet_gpu.cfg", {}),
        "w2ner-bf16": ("w2ner_mpnet_gpu.cfg", ENCODER_BF16),
        "w2ner-bf16-grid": ("w2ner_mpnet_gpu.cfg", BOTH_BF16),
        "w2ner-autocast": ("w2ner_mpnet_gpu.cfg", ENCODER_AUTOCAST),
        "spancat": ("spancat_minilm_cpu.cfg", {
            "components.transformer.model.name": {"@misc": "spacy_w2ner.encoder_path.v1", "name": "all-mpnet-base-v2"}}),
    },
    "minilm": {
        "w2ner": ("w2ner_minilm_cpu.cfg", MINILM_RECIPE),
        "w2ner-bf16": ("w2ner_minilm_cpu.cfg", {**MINILM_RECIPE, **ENCODER_BF16}),
        "w2ner-bf16-grid": ("w2ner_minilm_cpu.cfg", {**MINILM_RECIPE, **BOTH_BF16}),
        "w2ner-autocast": ("w2ner_minilm_cpu.cfg", {**MINILM_RECIPE, **ENCODER_AUTOCAST}),
        "spancat": ("spancat_minilm_cpu.cfg", {}),
    },
}  # fmt: skip
SYSTEMS = ["w2ner", "plain", "spancat", "w2ner-bf16", "w2ner-bf16-grid", "w2ner-autocast"]
BFLOAT16_SYSTEMS = [system for system in SYSTEMS if system.startswith("w2ner-")]


def batches_of(path: Path, vocab, batch_size: int, count: int) -> List[list]:
    """``count`` batches of random training sentences (the same in every process)."""
    import random

    from spacy_w2ner.formats import read_w2ner_json

    docs = list(read_w2ner_json(path, vocab))
    order = list(range(len(docs)))
    random.Random(0).shuffle(order)
    return [[docs[i] for i in order[k : k + batch_size]] for k in range(0, count * batch_size, batch_size)]


def build_pipeline(system: str, encoder: str, train_docs: list):
    import spacy
    from spacy.training import Example
    from spacy.tokens import Doc

    name, overrides = ENCODERS[encoder][system]
    config = spacy.util.load_config(CONFIGS / name, overrides=overrides, interpolate=True)
    nlp = spacy.util.load_model_from_config(config, auto_fill=True, validate=True)
    examples = [Example(Doc(nlp.vocab, words=[t.text for t in doc], spaces=[bool(t.whitespace_) for t in doc]), doc) for doc in train_docs]
    spacy.util.fix_random_seed(0)
    optimizer = nlp.initialize(lambda: examples[:300])
    return nlp, optimizer, config["training"]["dropout"]


def spacy_steps(args, system: str) -> Dict:
    """Time ``nlp.update`` steps (and profile them with ``--profile``)."""
    import spacy

    vocab = spacy.blank("en").vocab
    batches = batches_of(Path(args.train), vocab, args.batch_size, args.warmup + args.steps + 1)
    nlp, optimizer, dropout = build_pipeline(system, args.encoder, [d for b in batches for d in b])
    examples = [[_example(nlp, doc) for doc in batch] for batch in batches[: args.warmup + args.steps]]
    for batch in examples[: args.warmup]:
        nlp.update(batch, drop=dropout, sgd=optimizer)
        optimizer.step_schedules()
    profile = Profile(nlp) if args.profile else None
    start = time.perf_counter()
    for batch in examples[args.warmup :]:
        nlp.update(batch, drop=dropout, sgd=optimizer)
        optimizer.step_schedules()
    seconds = time.perf_counter() - start
    result = _speed(examples[args.warmup :], seconds)
    if profile is not None:
        result["profile_s_per_step"] = profile.per_step(seconds, args.steps)
    return result


def interleaved_steps(args, systems: List[str]) -> Dict[str, Dict]:
    """``spacy_steps`` of several systems in this process, their steps interleaved (``--interleave``)."""
    import spacy

    vocab = spacy.blank("en").vocab
    batches = batches_of(Path(args.train), vocab, args.batch_size, args.warmup + args.steps + 1)
    built = {}
    for system in systems:
        nlp, optimizer, dropout = build_pipeline(system, args.encoder, [d for b in batches for d in b])
        built[system] = (nlp, optimizer, dropout, [[_example(nlp, doc) for doc in b] for b in batches[: args.warmup + args.steps]])
    seconds = {system: [] for system in systems}
    for step in range(args.warmup + args.steps):
        for system in systems if step % 2 == 0 else list(reversed(systems)):
            nlp, optimizer, dropout, examples = built[system]
            start = time.perf_counter()
            nlp.update(examples[step], drop=dropout, sgd=optimizer)
            optimizer.step_schedules()
            if step >= args.warmup:
                seconds[system].append(time.perf_counter() - start)
    timed = [examples for examples in next(iter(built.values()))[3][args.warmup :]]
    return {system: {**_speed(timed, sum(times)), "step_seconds": [round(t, 3) for t in times]} for system, times in seconds.items()}


def _example(nlp, doc):
    from spacy.tokens import Doc
    from spacy.training import Example

    return Example(Doc(nlp.vocab, words=[t.text for t in doc], spaces=[bool(t.whitespace_) for t in doc]), doc)


def _speed(batches: list, seconds: float) -> Dict:
    sentences = sum(len(batch) for batch in batches)
    return {"steps": len(batches), "seconds": round(seconds, 2), "sentences_per_s": round(sentences / seconds, 3)}


def plain_steps(args) -> Dict:
    """A plain fine-tuning loop of the encoder: a linear head over its wordpieces, AdamW."""
    import spacy
    import torch
    from transformers import AutoModel, AutoTokenizer

    from spacy_w2ner.encoders.assets import bundled_encoder_path, encoder_path

    path = encoder_path("all-mpnet-base-v2") if args.encoder == "mpnet" else bundled_encoder_path()
    tokenizer, encoder = AutoTokenizer.from_pretrained(str(path)), AutoModel.from_pretrained(str(path))
    head = torch.nn.Linear(encoder.config.hidden_size, 3)
    torch.manual_seed(0)
    adamw = torch.optim.AdamW(list(encoder.parameters()) + list(head.parameters()), lr=5e-6, eps=1e-6)
    batches = batches_of(Path(args.train), spacy.blank("en").vocab, args.batch_size, args.warmup + args.steps)
    encoder.train()

    def step(batch) -> None:
        inputs = tokenizer([doc.text for doc in batch], padding="longest", return_tensors="pt")
        hidden = encoder(**inputs).last_hidden_state
        labels = (inputs["input_ids"] % 3).masked_fill(inputs["attention_mask"] == 0, -100)
        loss = torch.nn.functional.cross_entropy(head(hidden).flatten(0, 1), labels.flatten())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(encoder.parameters(), 5.0)
        adamw.step()
        adamw.zero_grad(set_to_none=True)

    for batch in batches[: args.warmup]:
        step(batch)
    start = time.perf_counter()
    for batch in batches[args.warmup :]:
        step(batch)
    return _speed(batches[args.warmup :], time.perf_counter() - start)


class Profile:
    """Seconds spent in the parts of a step, from timers wrapped around the pipeline's nodes
    and methods (forward and backward separately)."""

    def __init__(self, nlp):
        from spacy_w2ner.component import first_w2ner

        self.seconds: Dict[str, float] = {}
        transformer = nlp.get_pipe("transformer").model
        w2ner = first_w2ner(nlp)[1]
        self._wrap_node(transformer, "transformer (all)")
        self._wrap_node(_node(transformer, "hf-pytorch"), "encoder")
        self._wrap_node(_node(w2ner.model.get_ref("tok2vec"), "trfs2arrays"), "pooling")
        self._wrap_node(w2ner.model.get_ref("grid_scorer"), "grid network")
        self._wrap_method(w2ner, "get_loss", "loss")
        for _, pipe in nlp.pipeline:
            if hasattr(pipe, "finish_update"):
                self._wrap_method(pipe, "finish_update", "optimizer step")

    def _add(self, key: str, seconds: float) -> None:
        self.seconds[key] = self.seconds.get(key, 0.0) + seconds

    def _wrap_node(self, node, label: str) -> None:
        forward = node._func

        def timed(model, X, is_train):
            start = time.perf_counter()
            Y, backprop = forward(model, X, is_train)
            self._add(f"{label} forward", time.perf_counter() - start)

            def timed_backprop(dY):
                start = time.perf_counter()
                dX = backprop(dY)
                self._add(f"{label} backward", time.perf_counter() - start)
                return dX

            return Y, timed_backprop

        node._func = timed

    def _wrap_method(self, owner, name: str, label: str) -> None:
        method = getattr(owner, name)

        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                self._add(label, time.perf_counter() - start)

        setattr(owner, name, timed)

    def per_step(self, seconds: float, steps: int) -> Dict[str, float]:
        s = {key: value / steps for key, value in self.seconds.items()}
        parts = {
            "encoder forward": s.get("encoder forward", 0.0),
            "encoder backward": s.get("encoder backward", 0.0),
            "tokenizer and alignment": s.get("transformer (all) forward", 0.0) - s.get("encoder forward", 0.0),
            "pooling forward": s.get("pooling forward", 0.0),
            "pooling backward": s.get("pooling backward", 0.0),
            "grid network forward": s.get("grid network forward", 0.0),
            "grid network backward": s.get("grid network backward", 0.0),
            "loss": s.get("loss", 0.0),
            "optimizer step": s.get("optimizer step", 0.0),
        }
        parts["rest (Python, copies)"] = seconds / steps - sum(parts.values())
        parts["step"] = seconds / steps
        return {key: round(value, 4) for key, value in parts.items()}


def _node(model, name: str):
    return next(node for node in model.walk() if node.name == name)


def run_case(args, system: str, encoder: str, code: Optional[Path]) -> Dict:
    # The code compared first on the path; the rest of the caller's path kept after it.
    path = os.pathsep.join(part for part in (str(code or ROOT), os.environ.get("PYTHONPATH", "")) if part)
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), PYTHONPATH=path)
    command = [sys.executable, str(Path(__file__).resolve()), args.train, "--case", system, "--encoder", encoder,
               "--batch-size", str(args.batch_size), "--warmup", str(args.warmup), "--steps", str(args.steps),
               "--threads", str(args.threads)] + (["--profile"] if args.profile and system.startswith("w2ner") else [])  # fmt: skip
    stalled, start = cpu_stall_us(), time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=str(code or ROOT))
    if done.returncode:
        raise RuntimeError(f"{system} {encoder} ({code or 'this code'}): {done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if stalled is not None:  # how much of the time other work kept a task of this machine waiting
        result["cpu_stalled"] = round((cpu_stall_us() - stalled) / 1e6 / (time.perf_counter() - start), 3)
    return result


def compare(args) -> Dict:
    cases = [(system, encoder, None) for encoder in args.encoders for system in args.systems]
    if args.old_code:
        cases += [("w2ner", encoder, args.old_code) for encoder in args.encoders]
    results: Dict[str, Dict] = {}
    for round_number in range(args.rounds):
        for system, encoder, code in cases:
            name = f"{system} {encoder}" + (" (old)" if code else "")
            result = run_case(args, system, encoder, code)
            print(f"round {round_number + 1}: {name}: {result['sentences_per_s']} sentences/s", file=sys.stderr, flush=True)
            best = results.get(name)
            seen = (best or {}).get("rounds", []) + [[result["sentences_per_s"], result.get("cpu_stalled")]]
            if best is None or result["sentences_per_s"] > best["sentences_per_s"]:
                results[name] = best = dict(result)
            best["rounds"] = seen
    return results


def interleave(args) -> Dict[str, Dict]:
    """--interleave: per encoder, one process running the w2ner systems' steps in turn."""
    results: Dict[str, Dict] = {}
    systems = [system for system in args.systems if system.startswith("w2ner")]
    for encoder in args.encoders:
        path = os.pathsep.join(part for part in (str(ROOT), os.environ.get("PYTHONPATH", "")) if part)
        env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), PYTHONPATH=path)
        command = [sys.executable, str(Path(__file__).resolve()), args.train, "--encoder", encoder, "--cases", *systems,
                   "--batch-size", str(args.batch_size), "--warmup", str(args.warmup), "--steps", str(args.steps),
                   "--threads", str(args.threads)]  # fmt: skip
        stalled, start = cpu_stall_us(), time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=str(ROOT))
        if done.returncode:
            raise RuntimeError(f"{encoder} interleaved: {done.stderr[-3000:]}")
        found = json.loads(done.stdout.strip().splitlines()[-1])
        share = None if stalled is None else round((cpu_stall_us() - stalled) / 1e6 / (time.perf_counter() - start), 3)
        for system, result in found["results"].items():
            results[f"{system} {encoder}"] = {**result, "cpu_stalled": share, "process_peak_rss_mb": found["peak_rss_mb"]}
            print(f"{system} {encoder}: {result['sentences_per_s']} sentences/s", file=sys.stderr, flush=True)
    return results


def ratios(results: Dict, encoders: List[str]) -> Dict[str, float]:
    found = {}
    for encoder in encoders:
        new = results[f"w2ner {encoder}"]
        for other in ("plain", "spancat", "w2ner"):
            key = f"{other} {encoder}" + (" (old)" if other == "w2ner" else "")
            if key in results:
                found[f"w2ner {encoder} / {key}"] = round(new["sentences_per_s"] / results[key]["sentences_per_s"], 3)
        for system in BFLOAT16_SYSTEMS:
            if f"{system} {encoder}" in results:
                found[f"{system} {encoder} / w2ner {encoder}"] = round(results[f"{system} {encoder}"]["sentences_per_s"] / new["sentences_per_s"], 3)
        if f"w2ner {encoder} (old)" in results:
            found[f"w2ner {encoder} peak RSS / old"] = round(new["peak_rss_mb"] / results[f"w2ner {encoder} (old)"]["peak_rss_mb"], 3)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("train", help="CADEC's train.json (W2NER JSON)")
    parser.add_argument("--old-code", type=Path, help="A checkout of the code to compare with (e.g. 0.3.0)")
    parser.add_argument("--encoders", nargs="+", default=["mpnet", "minilm"], choices=sorted(ENCODERS))
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--systems", nargs="+", default=["w2ner", "plain", "spancat"], choices=SYSTEMS)
    parser.add_argument("--profile", action="store_true", help="Also time the parts of a w2ner step")
    parser.add_argument("--interleave", action="store_true", help="The w2ner systems in one process, steps interleaved")
    parser.add_argument("--output", type=Path, help="Write the figures as JSON here")
    parser.add_argument("--case", choices=SYSTEMS, help=argparse.SUPPRESS)
    parser.add_argument("--encoder", choices=sorted(ENCODERS), help=argparse.SUPPRESS)
    parser.add_argument("--cases", nargs="+", help=argparse.SUPPRESS)  # --interleave's, in one process
    args = parser.parse_args()
    args.train = str(Path(args.train).resolve())
    if args.cases:
        import torch

        torch.set_num_threads(args.threads)
        print(json.dumps({"results": interleaved_steps(args, args.cases), "peak_rss_mb": round(peak_rss_mb(), 1)}))
        return
    if args.case:
        import torch

        torch.set_num_threads(args.threads)
        result = plain_steps(args) if args.case == "plain" else spacy_steps(args, args.case)
        print(json.dumps({**result, "peak_rss_mb": round(peak_rss_mb(), 1)}))
        return
    from spacy_w2ner.nn.cpu import bfloat16_instructions, cpu_model

    results = interleave(args) if args.interleave else compare(args)
    report = {
        "machine": {"processor": platform.processor() or platform.machine(), "cpu": cpu_model(), "threads": args.threads,
                    "bfloat16_instructions": bfloat16_instructions()},
        "command": " ".join(sys.argv),
        "settings": {key: getattr(args, key) for key in ("batch_size", "warmup", "steps", "rounds")},
        "results": results,
        "ratios": ratios(results, args.encoders),
    }
    print(json.dumps(report, indent=1))
    if args.output:
        args.output.write_text(json.dumps(report, indent=1) + "\n", encoding="utf8")


if __name__ == "__main__":
    main()
