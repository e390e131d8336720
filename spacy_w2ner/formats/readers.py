"""Corpus readers for a training config's ``[corpora]``, straight from the corpus files.

Each ``spacy_w2ner.*Corpus.v1`` takes ``path`` (and the format's options) and
returns a callable ``(nlp) -> Iterator[Example]``. The reference Doc has the
corpus tokens and the entities in ``doc.spans[spans_key]``; the predicted Doc
has exactly the same tokens (words and trailing spaces), not ``nlp``'s
tokenization, so the gold grid aligns with the predicted tokens::

    [corpora.train]
    @readers = "spacy_w2ner.ConllCorpus.v1"
    path = ${paths.train}
    scheme = "BIO"

Malformed input raises ``FormatError`` (file:line) when the corpus is read.
"""
from pathlib import Path
from typing import Callable, Iterator, Optional, Union

from spacy.language import Language
from spacy.tokens import Doc
from spacy.training import Example
from spacy.util import registry
from spacy.vocab import Vocab

from . import FORMATS, read_corpus
from .base import NOT_A_DOCUMENT_KEY

PathLike = Union[str, Path]


class ConvertedCorpus:
    """Examples from a corpus file in one of the ``FORMATS``, read when the corpus is iterated."""

    def __init__(self, format_name: str, path: Optional[PathLike], spans_key: str, limit: int, **options):
        if path is None:
            raise ValueError("spacy_w2ner corpus reader: 'path' is not set (e.g. paths.train is null)")
        FORMATS[format_name].check(**{**FORMATS[format_name].options, **options})  # at config time
        self.format_name = format_name
        self.path = Path(path)
        self.spans_key = spans_key
        self.limit = limit
        self.options = options

    def __call__(self, nlp: Language) -> Iterator[Example]:
        if not self.path.exists():
            raise ValueError(f"spacy_w2ner corpus reader: {self.path} does not exist")
        docs = read_corpus(self.format_name, self.path, nlp, self.spans_key, **self.options)
        for i, reference in enumerate(doc for doc in docs if NOT_A_DOCUMENT_KEY not in doc.user_data):
            if self.limit and i >= self.limit:
                break
            yield Example(same_tokens(reference, nlp.vocab), reference)


def same_tokens(reference: Doc, vocab: Vocab) -> Doc:
    """A blank Doc with the reference's tokens (words and trailing spaces)."""
    return Doc(
        vocab,
        words=[token.text for token in reference],
        spaces=[bool(token.whitespace_) for token in reference],
    )


@registry.readers("spacy_w2ner.W2NERJsonCorpus.v1")
def create_w2ner_json_corpus(
    path: Optional[PathLike], spans_key: str = "w2ner", limit: int = 0
) -> Callable[[Language], Iterator[Example]]:
    """W2NER JSON records (``{"sentence": [...], "ner": [...]}``), one Example each."""
    return ConvertedCorpus("w2ner-json", path, spans_key, limit)


@registry.readers("spacy_w2ner.DaiCorpus.v1")
def create_dai_corpus(
    path: Optional[PathLike], spans_key: str = "w2ner", limit: int = 0
) -> Callable[[Language], Iterator[Example]]:
    """Dai et al.'s inline discontinuous-NER format, one Example per sentence."""
    return ConvertedCorpus("dai", path, spans_key, limit)


@registry.readers("spacy_w2ner.ConllCorpus.v1")
def create_conll_corpus(
    path: Optional[PathLike],
    tag_column: int = -1,
    scheme: str = "BIO",
    spans_key: str = "w2ner",
    limit: int = 0,
) -> Callable[[Language], Iterator[Example]]:
    """CoNLL columns (BIO, IOB1 or BIOES tags in ``tag_column``), one Example per sentence."""
    return ConvertedCorpus("conll", path, spans_key, limit, tag_column=tag_column, scheme=scheme)


@registry.readers("spacy_w2ner.BmesCorpus.v1")
def create_bmes_corpus(
    path: Optional[PathLike], spans_key: str = "w2ner", limit: int = 0
) -> Callable[[Language], Iterator[Example]]:
    """Character-level BMES (Chinese), one Example per sentence."""
    return ConvertedCorpus("bmes", path, spans_key, limit)


@registry.readers("spacy_w2ner.BratCorpus.v1")
def create_brat_corpus(
    path: Optional[PathLike],
    tokenizer: str = "spacy",
    spans_key: str = "w2ner",
    check_text: bool = True,
    limit: int = 0,
    sentencizer: bool = True,
    split_tokens: bool = True,
    strict: bool = False,
) -> Callable[[Language], Iterator[Example]]:
    """brat standoff (a directory of .txt/.ann pairs, or one .txt), one Example per document, as
    ``convert brat`` reads it.

    ``tokenizer`` is ``"spacy"`` (the pipeline's own tokenizer) or ``"whitespace"``; tokens are
    split where an annotation's boundary falls inside one (``split_tokens``); ``sentencizer`` sets
    sentence boundaries with spaCy's sentencizer, never inside an entity; ``strict`` stops at the
    first annotation that cannot be an entity.
    """
    options = {"tokenizer": tokenizer, "check_text": check_text, "sentencizer": sentencizer, "split_tokens": split_tokens, "strict": strict}
    return ConvertedCorpus("brat", path, spans_key, limit, **options)
