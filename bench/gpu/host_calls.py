"""Python calls of the encoder's inference path: did the host-side work change between two commits?

    cd TREE && PYTHONPATH=. python /path/to/bench/gpu/host_calls.py TRAIN.spacy TEST.spacy [--sentences 512]

Builds the MiniLM recipe's pipeline (project/configs/w2ner_minilm_cpu.cfg, initialized on 20
training sentences: speed needs no training) with the spacy_w2ner that ``TREE`` holds (a git
worktree of another commit, or this one), runs ``nlp.pipe`` over the test sentences at batch 128
with w2ner disabled, and prints the seconds (best of 3) and cProfile's count of Python calls, which
unlike the seconds does not depend on the machine.
"""
import argparse
import cProfile
import json
import pstats
import time

import spacy
from spacy.tokens import DocBin
from spacy.training import Example


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("train")
    parser.add_argument("test")
    parser.add_argument("--sentences", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=128)
    args = parser.parse_args()
    import spacy_w2ner

    config = spacy.util.load_config("project/configs/w2ner_minilm_cpu.cfg", interpolate=True)
    nlp = spacy.util.load_model_from_config(config, auto_fill=True, validate=True)
    train = list(DocBin().from_disk(args.train).get_docs(nlp.vocab))[:20]
    nlp.initialize(lambda: [Example(nlp.make_doc(doc.text), doc) for doc in train])
    texts = [doc.text for doc in DocBin().from_disk(args.test).get_docs(nlp.vocab)][: args.sentences]

    def run() -> float:
        start = time.perf_counter()
        for _ in nlp.pipe(texts, batch_size=args.batch_size, disable=["w2ner"]):
            pass
        return time.perf_counter() - start

    run()  # warm-up
    seconds = min(run() for _ in range(3))
    profile = cProfile.Profile()
    profile.enable()
    run()
    profile.disable()
    print(json.dumps({"bench": "host-calls", "code": spacy_w2ner.__file__, "sentences": len(texts), "batch_size": args.batch_size,
                      "encoder_only_seconds": round(seconds, 3), "python_calls": pstats.Stats(profile).total_calls}))  # fmt: skip


if __name__ == "__main__":
    main()
