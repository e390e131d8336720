"""Peak memory of training against document length, with and without sentence boundaries (issue 48).

Each case trains a few steps of a project config in a fresh process (``python -m spacy_w2ner
train``'s loop, in-process) and reports that process's peak RSS (VmHWM) and the RSS once the
pipeline is initialized:

    python bench/train_memory.py ~/w2ner-runs/cadec/train.spacy \\
        --configs project/configs/w2ner_minilm_cpu.cfg project/configs/w2ner_mpnet_gpu.cfg \\
        --lengths 100 500 1000 2000 5000 --output bench/results/cpu-train-memory.json

The documents are CADEC's training sentences (a .spacy file with entities) put end to end until
each has LENGTH tokens, their entities kept: "sentences" cases keep each sentence's boundary,
"no sentences" cases have none (windows of max_window tokens). Each batch is the config's
(16 documents for MiniLM's batch_by_sequence, 12 for MPNet's); ``--steps`` steps, dev = two
documents. A "sentence documents" case trains on the same sentences, one Doc each: the memory
of the sentence corpora the project was built on, for comparison.
"""
import argparse
import itertools
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from memory import peak_rss_mb, rss_mb  # noqa: E402  (bench/ is on sys.path)


def make_documents(sentences_path: str, length: int, n_docs: int, with_sentences: bool, as_sentences: bool = False) -> list:
    """``n_docs`` docs of about ``length`` tokens from consecutive sentences (entities kept); or,
    with ``as_sentences``, those same sentences one Doc each."""
    import spacy
    from spacy.tokens import Doc, DocBin

    from spacy_w2ner import get_entities, set_entities

    nlp = spacy.blank("en")
    source = itertools.cycle(list(DocBin().from_disk(sentences_path).get_docs(nlp.vocab)))  # 90,000 tokens at 5,000 x 18
    docs = []
    for _ in range(n_docs):
        parts, tokens = [], 0
        while tokens < length:
            sentence = next(source)
            parts.append(sentence)
            tokens += len(sentence)
        if as_sentences:
            docs.extend(parts)
            continue
        words = [token.text for part in parts for token in part]
        starts = [i == 0 for part in parts for i in range(len(part))] if with_sentences else None
        doc = Doc(nlp.vocab, words=words, sent_starts=starts)
        entities, offset = [], 0
        for part in parts:
            entities.extend((e.label, [t + offset for t in e.tokens], None) for e in get_entities(part))
            offset += len(part)
        set_entities(doc, entities)
        docs.append(doc)
    return docs


def run_case(args, config: str, length: int, kind: str) -> dict:
    """Train ``args.steps`` steps in this process; its peak RSS."""
    from spacy.tokens import DocBin

    from spacy_w2ner.training import train

    # The case's corpus and pipelines (gigabytes a case with MPNet) are removed when it ends.
    with tempfile.TemporaryDirectory(prefix="train-memory-") as directory:
        work = Path(directory)
        docs = make_documents(args.sentences, length, args.docs + 2, kind == "sentences", kind == "sentence-docs")
        split = len(docs) - (10 if kind == "sentence-docs" else 2)
        DocBin(store_user_data=True, docs=docs[:split]).to_disk(work / "train.spacy")
        DocBin(store_user_data=True, docs=docs[split:]).to_disk(work / "dev.spacy")
        overrides = {
            "paths.train": str(work / "train.spacy"), "paths.dev": str(work / "dev.spacy"),
            "training.max_steps": args.steps, "training.max_epochs": 0, "training.eval_frequency": 10**6,
            "training.logger.progress_bar": False, **settings(args.set),
        }  # fmt: skip
        start = time.perf_counter()
        train(Path(config), work / "run", overrides=overrides, use_gpu=-1)
    return {
        "config": Path(config).name,
        **set_field(args),
        "tokens_per_doc": length,
        "kind": kind,
        "documents": split,
        "steps": args.steps,
        "seconds": round(time.perf_counter() - start, 1),
        "rss_end_mb": round(rss_mb()),
        "rss_peak_mb": round(peak_rss_mb()),
    }


KINDS = ("no-sentences", "sentences", "sentence-docs")


def settings(pairs) -> dict:
    """``--set`` KEY=VALUE pairs as config overrides (VALUE read as JSON where it is JSON)."""
    overrides = {}
    for pair in pairs or []:
        key, _, value = pair.partition("=")
        try:
            overrides[key] = json.loads(value)
        except json.JSONDecodeError:
            overrides[key] = value
    return overrides


def set_field(args) -> dict:
    """A case's ``set`` field: its overrides, where it has any."""
    return {"set": settings(args.set)} if args.set else {}


def case_key(row: dict) -> tuple:
    """What makes a case: the config, its overrides, the length and the kind."""
    return row["config"], json.dumps(row.get("set", {}), sort_keys=True), row["tokens_per_doc"], row["kind"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sentences", help="a .spacy file of sentences with entities (CADEC's training split)")
    parser.add_argument("--configs", nargs="+", default=["project/configs/w2ner_minilm_cpu.cfg"])
    parser.add_argument("--lengths", type=int, nargs="+", default=[100, 500, 1000, 2000, 5000])
    parser.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS))
    parser.add_argument("--docs", type=int, default=16, help="training documents per case")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--output", help="a JSON file; cases it already has are not measured again")
    parser.add_argument("--set", action="append", metavar="KEY=VALUE",
                        help="a config override for every case, e.g. components.w2ner.model.max_grid_cells=32768")
    parser.add_argument("--case", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        print(json.dumps(run_case(args, args.case[0], int(args.case[1]), args.case[2])))
        return
    output = Path(args.output) if args.output else None
    earlier = json.loads(output.read_text()) if output and output.exists() else {"commands": [], "cases": []}
    commands = [c for c in earlier["commands"] if c != " ".join(sys.argv)] + [" ".join(sys.argv)]
    rows = earlier["cases"]
    rows = [row for row in rows if "failed" not in row and row["steps"] == args.steps]  # the others run again
    done = {case_key(row) for row in rows}
    for config in args.configs:
        for kind in args.kinds:
            for length in args.lengths:
                if case_key({"config": Path(config).name, **set_field(args), "tokens_per_doc": length, "kind": kind}) in done:
                    continue  # measured by an earlier run into the same --output
                rows.append(measure(args, config, length, kind))
                print(json.dumps(rows[-1]), flush=True)
                if output:  # after each case, so a stopped run keeps what it measured
                    output.write_text(json.dumps({"commands": commands, "cases": rows}, indent=2) + "\n")


def measure(args, config: str, length: int, kind: str) -> dict:
    """One case in a fresh process (so its peak RSS is its own)."""
    command = [sys.executable, __file__, args.sentences, "--docs", str(args.docs), "--steps", str(args.steps),
               "--case", config, str(length), kind] + [f"--set={pair}" for pair in args.set or []]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        return {"config": Path(config).name, **set_field(args), "tokens_per_doc": length,
                "kind": kind, "failed": done.returncode, "error": done.stderr.strip().splitlines()[-1:]}  # fmt: skip
    return json.loads(done.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
