"""The sentences of a corpus of documents, one Doc each: the baseline of issue 48's memory checks.

    python bench/sentence_docs.py corpora/teamtat/train.spacy corpora/teamtat-sentences/train.spacy

Each sentence of each document (its gold sentence boundaries, as the converters set them)
becomes one Doc with the entities inside it. Sentences that an entity crosses stay together as
one Doc (the way training grids them), so no entity is lost; the counts are printed as JSON.
"""
import argparse
import json
from pathlib import Path

import spacy
from spacy.tokens import Doc, DocBin

from spacy_w2ner import get_entities, set_entities
from spacy_w2ner.grid.segments import regions_joined_for, sentence_regions


def split_sentences(doc: Doc) -> list:
    """One Doc per sentence group, with its entities."""
    entities = get_entities(doc)
    docs = []
    for start, end in regions_joined_for(sentence_regions(doc), entities)[0]:  # as training grids them
        words = [token.text for token in doc[start:end]]
        spaces = [bool(token.whitespace_) for token in doc[start:end]][:-1] + [False]  # no space after the last
        sentence = Doc(doc.vocab, words=words, spaces=spaces)
        inside = [(e.label, [t - start for t in e.tokens]) for e in entities if start <= min(e.tokens) < end]
        set_entities(sentence, inside)
        docs.append(sentence)
    return docs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("input", help="a .spacy DocBin of documents with sentence boundaries")
    parser.add_argument("output", help="the .spacy DocBin to write")
    parser.add_argument("--lang", default="en")
    args = parser.parse_args()
    nlp = spacy.blank(args.lang)
    documents = list(DocBin().from_disk(args.input).get_docs(nlp.vocab))
    sentences = [sentence for doc in documents for sentence in split_sentences(doc)]
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    DocBin(store_user_data=True, docs=sentences).to_disk(args.output)
    counts = {
        "documents": len(documents), "sentence_docs": len(sentences),
        "tokens": sum(len(d) for d in documents), "sentence_tokens": sum(len(d) for d in sentences),
        "entities": sum(len(get_entities(d)) for d in documents),
        "sentence_entities": sum(len(get_entities(d)) for d in sentences),
    }  # fmt: skip
    print(json.dumps(counts))


if __name__ == "__main__":
    main()
