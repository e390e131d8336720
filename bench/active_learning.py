"""Active learning, simulated on CADEC: which tasks should the annotator correct next?

    python bench/active_learning.py ../shared/corpora/cadec/w2ner-json --work ~/w2ner-runs/al-sim \\
        --output bench/results/cpu-active-learning.json

CADEC's training sentences are the unlabelled pool (a seeded sample of --pool of them), their gold
annotations play the annotator, and a seeded sample of --dev dev sentences measures each model.
Round 1 annotates --k random pool sentences and trains the MiniLM CADEC recipe
(project/configs/w2ner_minilm_cpu.cfg with project.yml's ``cadec_recipe`` settings of the model:
``CADEC_RECIPE``) on them for --first-steps steps. Each later round, for each
strategy, the strategy picks the next --k sentences from what is left of the pool with the model
of its previous round, and training goes on from that model for --steps steps on every sentence
annotated so far, with a new optimizer (the config's, its learning rate warmed up over a tenth of
the steps and decayed to 0), as the backend's runs go on from the serving model. Strategies:

* ``random``: K random sentences;
* ``entity``: the K whose most doubtful predicted entity has the lowest score (an entity's score
  is its weakest link's probability; a sentence without entities counts 1.0): what ``/predict``
  gives Label Studio as the task's ``score`` (``label_studio_backend.predictions.task_score``);
* ``cell``: the K whose least confident grid cell (the lowest arg-max probability over the word
  pairs of the sentence) is lowest: uncertainty about entities not predicted too.

Whatever the strategies trained, each scoring pass also measures both uncertainties against the
model's errors on the pool (``scoring``: ROC AUC of ranking the sentences it gets wrong first, the
gold entities and the errors among each measure's top K). After every round each strategy's
model is evaluated on the dev sample (entity F as the paper scores it, ``nlp.evaluate``).

Everything runs in this one process on --threads torch threads (1: on a shared, oversubscribed CPU
a second thread mostly waits), training with ``nlp.update`` on batches of the config's size drawn
from the annotated sentences shuffled each epoch (the config's dropout), so no round pays for
starting a process and loading the encoder again. Each round's model is saved under --work
(``round-N-STRATEGY/model``) and its result written to --output as soon as it is measured; a
round whose model and result are there is not redone (run the same command again after a kill).
The plot (``--plot``, bench/results/active-learning.png: ``bench/plots.py active-learning``) draws
the curves. CADEC is research-only: nothing of it is written outside --work.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Sequence

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
CONFIG = ROOT / "project" / "configs" / "w2ner_minilm_cpu.cfg"
# CADEC's recipe on that config (project.yml's cadec_recipe, tuned on dev): the mean of the
# encoder's top 4 layers, the grid network at 20 x the encoder's learning rate.
CADEC_RECIPE = {"components.transformer.model.last_layers": 4, "components.w2ner.learn_rate_scale": 20.0}
STRATEGIES = ("random", "entity", "cell")


def main() -> None:
    args = parse_args()
    import torch

    from spacy_w2ner.nn.cpu import cpu_model

    torch.set_num_threads(args.threads)
    work = Path(args.work).expanduser()
    work.mkdir(parents=True, exist_ok=True)
    output = Path(args.output)
    results = json.loads(output.read_text()) if output.exists() and args.resume_results else {}
    results.update(settings=settings(args), machine={"cpu": cpu_model(), "threads": args.threads})
    results.setdefault("rounds", {})
    pool, dev = corpus(Path(args.corpus), work, args)
    first = sorted(random.Random(args.seed).sample(range(len(pool)), args.k))
    labelled = {strategy: list(first) for strategy in args.strategies}
    model = run_round(work / "round-1", None, pool, first, dev, args, results, "all", 1, args.first_steps)
    write(output, results)
    models = {strategy: model for strategy in args.strategies}
    for number in range(2, args.rounds + 1):
        for strategy in args.strategies:
            directory = work / f"round-{number}-{strategy}"
            chosen = choose(strategy, models[strategy], pool, labelled[strategy], args, random.Random(args.seed + number), directory, results)
            labelled[strategy] = sorted(labelled[strategy] + chosen)
            models[strategy] = run_round(directory, models[strategy], pool, labelled[strategy], dev, args, results, strategy, number, args.steps)
            write(output, results)
    if args.plot:
        from plots import plot_after_run

        plot_after_run("active-learning", results=output, output=Path(args.plot))


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", help="CADEC's w2ner-json folder (train.json, dev.json)")
    parser.add_argument("--work", required=True, help="Where the data, models and logs go (outside the repository)")
    parser.add_argument("--output", default=str(ROOT / "bench" / "results" / "cpu-active-learning.json"))
    parser.add_argument("--plot", default=str(ROOT / "bench" / "results" / "active-learning.png"))
    parser.add_argument("--k", type=int, default=100, help="Sentences annotated per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--first-steps", type=int, default=150, help="Training steps of round 1 (from the MiniLM encoder)")
    parser.add_argument("--steps", type=int, default=100, help="Training steps of each later round (from the round before's model)")
    parser.add_argument("--pool", type=int, default=1500, help="Training sentences in the pool")
    parser.add_argument("--dev", type=int, default=400, help="Dev sentences the curves are measured on")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--strategies", type=lambda text: text.split(","), default=list(STRATEGIES))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--resume-results", action="store_true", help="Keep the rounds of an earlier --output")
    return parser.parse_args()


def settings(args) -> Dict:
    return {key: value for key, value in vars(args).items() if key not in ("work", "output", "plot", "resume_results")} | {
        "config": str(CONFIG.relative_to(ROOT)), "overrides": CADEC_RECIPE, "command": "python " + " ".join(sys.argv)}


def corpus(folder: Path, work: Path, args):
    """The pool and dev samples as Docs with their gold (converted once into ``work``)."""
    import spacy
    from spacy.tokens import DocBin

    for split in ("train", "dev"):
        if not (work / f"{split}.spacy").exists():
            subprocess.run([sys.executable, "-m", "spacy_w2ner", "convert", "w2ner-json", str(folder / f"{split}.json"), str(work)], check=True)
    vocab = spacy.blank("en").vocab
    train = list(DocBin().from_disk(work / "train.spacy").get_docs(vocab))
    dev = list(DocBin().from_disk(work / "dev.spacy").get_docs(vocab))
    pool = [train[k] for k in sorted(random.Random(args.seed).sample(range(len(train)), args.pool))]
    dev = [dev[k] for k in sorted(random.Random(args.seed + 1).sample(range(len(dev)), args.dev))]
    return pool, dev


def run_round(directory: Path, model, pool, labelled: List[int], dev, args, results, strategy: str, number: int, steps: int) -> Path:
    """Train (from the model at ``model``, or from the encoder) on the labelled pool sentences,
    save the model, evaluate it on dev; the saved model's path."""
    key = f"{number}-{strategy}"
    saved = directory / "model"
    if (saved / "meta.json").exists() and key in results["rounds"]:
        return saved
    start = time.monotonic()
    nlp, optimizer, training = pipeline_and_optimizer(model, steps)
    examples = [example_of(nlp, pool[k]) for k in labelled]
    if model is None:
        nlp.initialize(lambda: examples, sgd=optimizer)
    train_steps(nlp, optimizer, examples, steps, training, random.Random(args.seed + 1000 * number))
    directory.mkdir(parents=True, exist_ok=True)
    nlp.to_disk(saved)
    trained = time.monotonic() - start
    scores = nlp.evaluate([example_of(nlp, doc) for doc in dev])
    results["rounds"][key] = {
        "round": number, "strategy": strategy, "annotated": len(labelled), "steps": steps,
        **{name: round(scores[f"w2ner_{name}"] * 100, 2) for name in ("f", "p", "r", "discontinuous_f")},
        "entities_annotated": sum(len(pool[k].spans.get("w2ner", [])) for k in labelled),
        "train_seconds": round(trained, 1), "seconds": round(time.monotonic() - start, 1),
    }  # fmt: skip
    print(json.dumps(results["rounds"][key]), flush=True)
    return saved


def pipeline_and_optimizer(model, steps: int):
    """The MiniLM recipe's pipeline (or the model at ``model``), and a new optimizer of the
    recipe whose learning rate warms up over a tenth of ``steps`` and decays to 0 at ``steps``."""
    import spacy
    from spacy import util
    from spacy.schemas import ConfigSchemaTraining

    config = util.load_config(CONFIG, overrides=CADEC_RECIPE, interpolate=False)
    config["training"]["optimizer"]["learn_rate"].update({"total_steps": steps, "warmup_steps": max(1, steps // 10)})
    training = dict(util.registry.resolve(config.interpolate()["training"], schema=ConfigSchemaTraining))
    training["batcher_size"] = config["training"]["batcher"]["size"]
    if model is None:
        util.fix_random_seed(0)
        nlp = util.load_model_from_config(config, auto_fill=True)
    else:
        nlp = spacy.load(model)
    return nlp, training["optimizer"], training


def example_of(nlp, gold):
    """A training or evaluation example: the gold Doc's words, unannotated, and the gold."""
    from spacy.tokens import Doc
    from spacy.training import Example

    return Example(Doc(nlp.vocab, words=[t.text for t in gold], spaces=[bool(t.whitespace_) for t in gold]), gold)


def train_steps(nlp, optimizer, examples, steps: int, training, chooser: random.Random) -> None:
    """``steps`` updates on batches of the recipe's size, the examples shuffled each epoch."""
    size = training["batcher_size"]
    order: List[int] = []
    for _ in range(steps):
        batch = []
        while len(batch) < size:
            if not order:
                order = list(range(len(examples)))
                chooser.shuffle(order)
            batch.append(examples[order.pop()])
        nlp.update(batch, drop=training["dropout"], sgd=optimizer)
        optimizer.step_schedules()  # the learning rate's schedule moves on (spaCy's loop does this each step)


def choose(strategy: str, model: Path, pool, labelled: Sequence[int], args, chooser: random.Random, directory: Path, results: Dict) -> List[int]:
    """The next K pool sentences of ``strategy`` (kept in ``directory/chosen.json``). Scoring the
    pool for an uncertainty strategy also measures both uncertainties against the model's errors
    there (``results["scoring"]``)."""
    saved = directory / "chosen.json"
    if saved.exists():
        return json.loads(saved.read_text())
    left = sorted(set(range(len(pool))) - set(labelled))
    if strategy == "random":
        chosen = sorted(chooser.sample(left, args.k))
    else:
        measures, wrong = uncertainty(model, [pool[k] for k in left])
        chosen = sorted(left[k] for k in np.argsort(measures[strategy], kind="stable")[: args.k])
        results.setdefault("scoring", {})[directory.name] = scoring_figures(measures, wrong, [len(pool[k].spans.get("w2ner", [])) for k in left], args.k)
    directory.mkdir(parents=True, exist_ok=True)
    saved.write_text(json.dumps(chosen))
    return chosen


def uncertainty(model: Path, docs) -> tuple:
    """Per doc, from one pass of the network over the docs (their gold not shown to it): the
    measures ``entity`` (the lowest entity score, 1.0 without entities) and ``cell`` (the lowest
    arg-max probability of a grid cell); and whether the predicted entities differ from the gold."""
    import spacy
    from spacy.tokens import Doc

    from spacy_w2ner import get_entities
    from spacy_w2ner.component import first_w2ner
    from spacy_w2ner.release.decoding import dev_probabilities

    nlp = spacy.load(model)
    _, pipe = first_w2ner(nlp)
    plain = [Doc(nlp.vocab, words=[t.text for t in doc], spaces=[bool(t.whitespace_) for t in doc]) for doc in docs]
    cell = np.ones(len(plain))
    read = []
    for segment, probs in dev_probabilities(nlp, plain):
        confidences = probs.max(-1)
        cell[segment.doc_index] = min(cell[segment.doc_index], float(confidences.min()))
        read.append((segment, probs.argmax(-1).astype(np.uint8), confidences))
    entities = pipe.entities_from_grids(plain, read)
    entity = np.array([min((e.score for e in found), default=1.0) for found in entities])
    wrong = np.array([{(e.label, e.tokens) for e in found} != {(e.label, e.tokens) for e in get_entities(doc)} for found, doc in zip(entities, docs)])
    return {"entity": entity, "cell": cell}, wrong


def scoring_figures(measures: Dict[str, np.ndarray], wrong: np.ndarray, gold_counts: List[int], k: int) -> Dict:
    """How well each measure ranks the sentences the model gets wrong first (ROC AUC: the chance
    that a wrong sentence is ranked before a right one), and the gold entities in its top K."""
    figures = {"pool_left": int(len(wrong)), "wrong_share": round(float(wrong.mean()), 4)}
    counts = np.array(gold_counts)
    for name, values in measures.items():
        order = np.argsort(values, kind="stable")[:k]
        figures[f"{name}_auc_wrong_first"] = round(auc(-values, wrong), 4)
        figures[f"{name}_top_k_gold_entities"] = int(counts[order].sum())
        figures[f"{name}_top_k_wrong"] = int(wrong[order].sum())
    figures["random_k_expected_gold_entities"] = round(float(counts.mean() * k), 1)
    return figures


def auc(scores: np.ndarray, positive: np.ndarray) -> float:
    """ROC AUC of ``scores`` for ``positive`` (Mann-Whitney, ties counted half)."""
    n_pos, n_neg = int(positive.sum()), int((~positive).sum())
    if not n_pos or not n_neg:
        return float("nan")
    order = np.argsort(scores, kind="stable")
    ranks = np.empty(len(scores))
    ranks[order] = np.arange(1, len(scores) + 1)
    for value in np.unique(scores):  # ties: their mean rank
        tied = scores == value
        ranks[tied] = ranks[tied].mean()
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def write(output: Path, results: Dict) -> None:
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
