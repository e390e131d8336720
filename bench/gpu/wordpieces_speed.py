"""The transformer's word-piece stages (``encoders/wordpieces.py``: tokenization and alignment)
of this tree against another commit's, in one process, on the sentences of a ``.spacy`` file:

    PYTHONPATH=. python bench/gpu/wordpieces_speed.py COMMIT TOKENIZER_DIR TEST.spacy [--batch-size 32]

The other commit's ``spacy_w2ner/encoders/wordpieces.py`` is loaded from git as a module of
its own; both modules' ``wordpieces_and_alignment`` run over the same spans (each sentence a
span, batches of ``--batch-size``), in ``--rounds`` interleaved rounds (the order alternating),
and the best round of each is printed with their ratio. Set ``OMP_NUM_THREADS=1`` for the host's
one thread. The outputs are checked equal first.
"""
import argparse
import importlib.util
import json
import subprocess
import tempfile
import time
from pathlib import Path

import numpy
import spacy
from spacy.tokens import DocBin
from transformers import AutoTokenizer

from spacy_w2ner.encoders import wordpieces as this_tree


def module_of_commit(commit: str):
    """``spacy_w2ner/encoders/wordpieces.py`` of ``commit``, imported under another name."""
    source = subprocess.run(["git", "show", f"{commit}:spacy_w2ner/encoders/wordpieces.py"], check=True, capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp()) / "wordpieces_of_commit.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("wordpieces_of_commit", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def seconds(module, tokenizer, batches) -> float:
    start = time.perf_counter()
    for spans in batches:
        module.wordpieces_and_alignment(tokenizer, spans)
    return time.perf_counter() - start


def assert_equal(first, second) -> None:
    (a, a_align), (b, b_align) = first, second
    assert a.strings == b.strings and a.lengths == b.lengths
    for x, y in ((a.input_ids, b.input_ids), (a.attention_mask, b.attention_mask), (a_align.data, b_align.data), (a_align.lengths, b_align.lengths)):
        numpy.testing.assert_array_equal(x, y, strict=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("commit")
    parser.add_argument("tokenizer")
    parser.add_argument("data")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    tokenizer = AutoTokenizer.from_pretrained(args.tokenizer)
    nlp = spacy.blank("en")
    docs = list(DocBin().from_disk(args.data).get_docs(nlp.vocab))
    batches = [[doc[:] for doc in docs[i : i + args.batch_size]] for i in range(0, len(docs), args.batch_size)]
    other = module_of_commit(args.commit)
    for spans in batches:
        assert_equal(other.wordpieces_and_alignment(tokenizer, spans), this_tree.wordpieces_and_alignment(tokenizer, spans))
    times = {"commit": [], "this_tree": []}
    for round_ in range(args.rounds):
        pair = [("commit", other), ("this_tree", this_tree)]
        for name, module in pair if round_ % 2 == 0 else reversed(pair):
            times[name].append(seconds(module, tokenizer, batches))
    best = {name: round(min(values), 4) for name, values in times.items()}
    print(json.dumps({"bench": "wordpieces-speed", "commit": args.commit, "tokenizer": args.tokenizer, "sentences": len(docs),
                      "batch_size": args.batch_size, "rounds": args.rounds, "best_seconds": best,
                      "commit_over_this_tree": round(best["commit"] / best["this_tree"], 2)}))  # fmt: skip


if __name__ == "__main__":
    main()
