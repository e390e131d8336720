"""Entities across sentence boundaries on raw multi-sentence text, with and without sentence
boundaries before w2ner (issue 11: the project's pipelines now set them by default).

    python bench/crossing.py training/sample-w2ner_minilm_cpu/model-best

Texts: the first 15 English sentences of corpora/sample/dev.json as one paragraph, and its
English sentences repeated into a document of about 17,000 tokens. "Without" runs the pipeline
with its sentence-setting components (sentencizer, senter, parser) disabled; "with" runs it with
its own, or with spaCy's sentencizer added before w2ner when it has none. A boundary is one of
spaCy's sentencizer on the same text.
"""
import argparse
import json
import warnings
from pathlib import Path

import spacy

from spacy_w2ner import get_entities
from spacy_w2ner.common import load_pipeline, sentence_setters

ROOT = Path(__file__).resolve().parents[1]


def texts():
    records = json.loads((ROOT / "corpora" / "sample" / "dev.json").read_text(encoding="utf8"))
    english = [" ".join(r["sentence"]) for r in records if r["sentence"][0].isascii()]
    return {"15-sentence paragraph": " ".join(english[:15]), "long document": " ".join((english * 40)[:1100])}


def count(nlp, text, with_sentences: bool) -> dict:
    with nlp.select_pipes(disable=[] if with_sentences else sentence_setters(nlp)):
        doc = nlp(text)
    reference = spacy.blank(nlp.lang).add_pipe("sentencizer")(nlp.make_doc(text))
    sentence_of = [token.sent.start for token in reference]
    entities = get_entities(doc)
    crossing = sum(sentence_of[e.tokens[0]] != sentence_of[e.tokens[-1]] for e in entities)
    return {"tokens": len(doc), "entities": len(entities), "crossing": crossing}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    nlp = load_pipeline(args.model, sentencizer=True)  # the pipeline's own sentence setter, else spaCy's sentencizer
    results = {
        name: {"without sentence boundaries": count(nlp, text, False), "with": count(nlp, text, True)}
        for name, text in texts().items()
    }
    print(json.dumps(results, indent=1))
    if args.output:
        args.output.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
