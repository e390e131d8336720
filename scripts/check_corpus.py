"""Before the project's train command: the training and dev corpora it reads exist, or one line
each saying which command makes it (spaCy's project runner would only say a dependency is missing).

    python scripts/check_corpus.py corpora/converted/mine/train.spacy corpora/converted/mine/dev.spacy
"""
import sys
from pathlib import Path

FORMATS = "w2ner-json, dai, conll, bmes, brat, bioc, pubtator or label-studio"


def what_makes(path: Path) -> str:
    """How to make the corpus file ``path`` (NAME.spacy in a dataset's directory)."""
    convert = f"python -m spacy_w2ner convert FORMAT INPUT {path.parent} --name {path.stem} (FORMAT: {FORMATS})"
    if path.stem != "dev":
        return f"convert your corpus: {convert}"
    whole = next((p for p in (path.parent / "all.spacy", path.parent / "train.spacy") if p.exists()), path.parent / "all.spacy")
    return (f"a dev set selects the model: convert held-out documents ({convert}), or split a corpus into train and "
            f"dev: python -m spacy_w2ner split {whole} {path.parent} --every 10 (every 10th document to dev)")


def main(paths) -> int:
    missing = [Path(p) for p in paths if not Path(p).exists()]
    for path in missing:
        print(f"{path} does not exist: {what_makes(path)}", file=sys.stderr)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
