"""Why two processes do not train what one process trains, to the bit, on the shipped CNN recipe.

    python bench/data_parallel_divergence.py run OUT [--sgd]   # one process and torchrun's two, each step checkpointed
    python bench/data_parallel_divergence.py steps OUT         # per step: the largest difference, maxout winners that differ
    python bench/data_parallel_divergence.py same-weights      # per step, from the same weights: the two gradients, Adam's two steps

``run`` trains ``project/configs/w2ner_cnn_cpu.cfg`` on the sample corpus, every dropout 0, 30
steps, as users run it (``python -m spacy_w2ner train`` and ``torchrun --standalone
--nproc-per-node 2 -m spacy_w2ner train``), one thread a process; ``--sgd`` swaps Adam for
Thinc's SGD (the same schedule). ``steps`` compares the two runs' checkpoints step by step and,
on every training sentence, which piece of each of tok2vec's maxout units wins. ``same-weights``
follows the one process's trajectory and at each step computes the whole batch's gradient and
the sum of the two processes' shares' (what the all-reduce gives), from the same weights, and
Thinc's Adam step on each from the same optimizer state. The figures and what they show:
docs/distributed.md, "What is exact and what is not".
"""
import argparse
import copy
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
CONFIG = ROOT / "project" / "configs" / "w2ner_cnn_cpu.cfg"
NO_DROPOUT = {"training.dropout": "0.0", "components.w2ner.model.input_dropout": "0.0",
              "components.w2ner.model.conv_dropout": "0.0", "components.w2ner.model.output_dropout": "0.0"}  # fmt: skip
SGD = '[training.optimizer]\n@optimizers = "SGD.v1"\nL2_is_weight_decay = true\nL2 = 0.01\ngrad_clip = 1.0\nuse_averages = false\n\n'


def corpus(out: Path) -> dict:
    for split in ("train", "dev"):
        if not (out / "corpus" / f"{split}.spacy").exists():
            subprocess.run([sys.executable, "-m", "spacy_w2ner", "convert", "w2ner-json", f"corpora/sample/{split}.json", str(out / "corpus")],
                           cwd=ROOT, check=True, capture_output=True)  # fmt: skip
    return {split: out / "corpus" / f"{split}.spacy" for split in ("train", "dev")}


def run(out: Path, sgd: bool) -> None:
    paths, config = corpus(out), CONFIG
    if sgd:
        text = CONFIG.read_text(encoding="utf8")
        start, end = text.index("[training.optimizer]"), text.index("[training.score_weights]")
        config = out / "sgd.cfg"
        config.write_text(text[:start] + SGD + text[end:], encoding="utf8")
    overrides = {**NO_DROPOUT, "paths.train": paths["train"], "paths.dev": paths["dev"], "training.max_steps": "29",
                 "training.logger.progress_bar": "false"}  # fmt: skip
    arguments = [str(config), *[item for key, value in overrides.items() for item in (f"--{key}", str(value))],
                 "--checkpoint-every", "1", "--keep", "40"]  # fmt: skip
    torchrun = shutil.which("torchrun") or f"{sys.executable} -m torch.distributed.run"
    environment = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}
    for name, launcher in (("one", [sys.executable]), ("two", [*torchrun.split(), "--standalone", "--nproc-per-node", "2"])):
        shutil.rmtree(out / name, ignore_errors=True)
        command = [*launcher, "-m", "spacy_w2ner", "train", *arguments, "--output", str(out / name)]
        with (out / f"{name}.log").open("w") as log:
            subprocess.run(command, cwd=ROOT, env=environment, stdout=log, stderr=subprocess.STDOUT, check=True)


def maxout_pieces(nlp, texts) -> list:
    """Each of tok2vec's maxout layers' pieces (tokens, units, pieces) on ``texts``."""
    recorded = []
    for node in nlp.get_pipe("tok2vec").model.walk():
        if node.name == "maxout":
            def recording(model, X, is_train, forward=node._func):
                nO, nP = model.get_dim("nO"), model.get_dim("nP")
                pieces = model.ops.gemm(X, model.get_param("W").reshape((nO * nP, -1)), trans2=True) + model.get_param("b").reshape(-1)
                recorded.append(pieces.reshape((-1, nO, nP)))
                return forward(model, X, is_train)

            node._func = recording
    nlp.get_pipe("tok2vec").model.predict([nlp.make_doc(text) for text in texts])
    return recorded


def steps(out: Path) -> None:
    import spacy
    from spacy.tokens import DocBin

    from tests.training.helpers import weights

    texts = [doc.text for doc in DocBin().from_disk(corpus(out)["train"]).get_docs(spacy.blank("en").vocab)]
    for checkpoint in sorted((out / "one" / "checkpoints").iterdir()):
        one, two = checkpoint / "model", out / "two" / "checkpoints" / checkpoint.name / "model"
        a, b = weights(one), weights(two)
        name = max(a, key=lambda key: numpy.abs(a[key] - b[key]).max())
        pieces = list(zip(maxout_pieces(spacy.load(one), texts), maxout_pieces(spacy.load(two), texts)))
        flipped = [int((x.argmax(-1) != y.argmax(-1)).sum()) for x, y in pieces]
        margins = [float(numpy.diff(numpy.sort(x, -1)[..., -2:], axis=-1)[x.argmax(-1) != y.argmax(-1)].min()) for x, y in pieces if (x.argmax(-1) != y.argmax(-1)).any()]
        print(f"{checkpoint.name}: largest difference {float(numpy.abs(a[name] - b[name]).max()):.2e} ({name}); maxout winners "
              f"that differ, per layer: {flipped}" + (f", the closest by {min(margins):.1e}" if margins else ""), flush=True)


def same_weights() -> None:
    from spacy.schemas import ConfigSchemaTraining
    from spacy.training.initialize import init_nlp
    from spacy.training.loop import create_train_batches
    from spacy.util import load_config, registry, resolve_dot_names
    from thinc.api import fix_random_seed

    from spacy_w2ner.nn.shim import torch_module
    from spacy_w2ner.training.distributed import loss_denominators, share

    out = Path(os.environ.get("TMPDIR", "/tmp")) / "data_parallel_divergence"
    paths = corpus(out)
    overrides = {**{key: float(value) for key, value in NO_DROPOUT.items()}, "paths.train": str(paths["train"]), "paths.dev": str(paths["dev"])}
    config = load_config(CONFIG, overrides=overrides, interpolate=False)
    fix_random_seed(0)
    nlp = init_nlp(config)
    T = registry.resolve(nlp.config.interpolate()["training"], schema=ConfigSchemaTraining)
    (train,) = resolve_dot_names(nlp.config.interpolate(), [T["train_corpus"]])
    optimizer, tok2vec = T["optimizer"], nlp.get_pipe("tok2vec").model
    params = [(node, name) for node in tok2vec.walk() for name in node.param_names if node.has_param(name)]

    def gradients(examples, cfg=None) -> dict:
        for _, pipe in nlp.pipeline:
            for node in pipe.model.walk() if hasattr(getattr(pipe, "model", None), "walk") else ():
                for name in node.param_names:
                    if node.has_grad(name):
                        node.get_grad(name).fill(0)
                for shim in node.shims:
                    for tensor in torch_module(shim).parameters():
                        tensor.grad = None
        if examples:
            nlp.update(examples, sgd=False, losses={}, component_cfg=cfg or {})
        return {(node.id, name): node.get_grad(name).copy() for node, name in params}

    def adam_step(grads: dict) -> dict:
        state = copy.copy(optimizer)
        state.mom1, state.mom2 = ({k: v.copy() for k, v in store.items()} for store in (optimizer.mom1, optimizer.mom2))
        state.nr_update, state.last_seen = copy.copy(optimizer.nr_update), copy.copy(optimizer.last_seen)
        return {(node.id, name): state((node.id, name), node.get_param(name).copy(), grads[(node.id, name)].copy())[0] for node, name in params}

    for step, (_, batch) in enumerate(create_train_batches(nlp, train, T["batcher"], T["max_epochs"])):
        whole = gradients(batch)
        shares = [gradients(share(batch, rank, 2), loss_denominators(nlp, batch, [])) for rank in range(2)]
        summed = {key: shares[0][key] + shares[1][key] for key in whole}
        one, two = adam_step(whole), adam_step(summed)
        print(f"step {step:2d}: gradients differ by {max(float(numpy.abs(whole[k] - summed[k]).max()) for k in whole):.1e}, "
              f"Adam's steps by {max(float(numpy.abs(one[k] - two[k]).max()) for k in one):.1e} (lr {optimizer.learn_rate:.1e})", flush=True)
        gradients(batch)  # the one process's own step
        for _, pipe in nlp.pipeline:
            if getattr(pipe, "is_trainable", False) and pipe.model not in (True, False, None):
                pipe.finish_update(optimizer)
        optimizer.step_schedules()
        if step == 29:
            break


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["run", "steps", "same-weights"])
    parser.add_argument("out", type=Path, nargs="?")
    parser.add_argument("--sgd", action="store_true")
    args = parser.parse_args()
    if args.what == "same-weights":
        same_weights()
    elif args.what == "run":
        args.out.mkdir(parents=True, exist_ok=True)
        run(args.out, args.sgd)
    else:
        steps(args.out)


if __name__ == "__main__":
    main()
