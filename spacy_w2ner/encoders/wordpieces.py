"""Spans to word pieces and their alignment to spaCy's tokens: spacy-transformers'
``TransformerModel`` forward, with the host's work of a batch vectorized.

spacy-transformers tokenizes a batch's spans with the Hugging Face tokenizer, then converts
every row's ids back to strings one id at a time (``convert_ids_to_tokens``), and aligns word
pieces to tokens span by span, token by token (``get_alignment_via_offset_mapping``). On a GPU
whose passes are replayed from CUDA graphs those two steps were 44% of the host's work at
prediction (bench/README.md, "Overlapped batches"). Here a fast tokenizer's backend encodes
the batch unpadded, with the state the Hugging Face call would set, and numpy pads its ids and
offsets (the Hugging Face call made Python lists of every row's, padded); the strings are
looked up in a table of the vocabulary (one numpy call a batch), and the alignment is a few
numpy operations over the whole batch. All give exactly what spacy-transformers gives
(``tests/encoders/test_wordpieces.py`` compares them); a tokenizer without offsets (a slow
one) takes spacy-transformers' own path. One thing differs: a span over the encoder's length
is cut until it fits (``fitted_wordpieces``), where spacy-transformers drops its last word
pieces.
"""
import warnings
import weakref
from itertools import chain
from typing import Dict, List, Sequence, Tuple

import numpy
from spacy.attrs import IDX, LENGTH, SPACY
from spacy.tokens import Doc, Span
from spacy_transformers.align import get_alignment
from spacy_transformers.data_classes import FullTransformerBatch, WordpieceBatch
from spacy_transformers.layers.transformer_model import huggingface_tokenize
from spacy_transformers.truncate import truncate_oversize_splits
from spacy_transformers.util import log_batch_size, log_gpu_memory, maybe_flush_pytorch_cache
from thinc.api import Model
from thinc.types import Ragged
from transformers import PreTrainedTokenizerFast
from transformers.tokenization_utils_base import PaddingStrategy, TruncationStrategy


def transformer_forward(model: Model, docs: List[Doc], is_train: bool):
    """``TransformerModel``'s forward (spacy-transformers 1.4) with ``fitted_wordpieces`` in
    place of its tokenization, alignment and truncation of spans longer than the encoder takes;
    the rest (the cache flush, the logger's lines) as there."""
    logger = model.attrs.get("logger")
    maybe_flush_pytorch_cache(chance=model.attrs.get("flush_cache_chance", 0))
    if logger:
        log_gpu_memory(logger, "begin forward")
    tokenizer = model.tokenizer
    nested_spans, wordpieces, align = fitted_wordpieces(tokenizer, model.attrs["get_spans"](docs))
    if logger:
        log_batch_size(logger, wordpieces, is_train)
    if wordpieces.input_ids.shape[1] > tokenizer.model_max_length:  # a one-token span: warned
        wordpieces, align = truncate_oversize_splits(wordpieces, align, tokenizer.model_max_length)
    model_output, bp_tensors = model.layers[0](wordpieces, is_train)
    if logger:
        log_gpu_memory(logger, "after forward")
    output = FullTransformerBatch(spans=nested_spans, wordpieces=wordpieces, model_output=model_output, align=align)

    def backprop_transformer(d_output: FullTransformerBatch) -> List[Doc]:
        if logger:
            log_gpu_memory(logger, "Begin backprop")
        bp_tensors(d_output.model_output)
        if logger:
            log_gpu_memory(logger, "After backprop")
        return docs

    return output, backprop_transformer


def fitted_wordpieces(tokenizer, nested_spans: List[List[Span]]) -> Tuple[List[List[Span]], WordpieceBatch, Ragged]:
    """Each doc's spans, their word pieces and alignment (``wordpieces_and_alignment``), where a
    span of more word pieces than the encoder takes (the tokenizer's ``model_max_length``) is
    cut into halves by its tokens, and they again, until each fits. spacy-transformers drops
    the word pieces past the limit, so that the tokens at the end of such a span (a stretch of
    long words, sequences, URLs, another script) got no vector from it. A one-token span that
    does not fit keeps its first word pieces (that truncation), with a warning naming it."""
    limit = tokenizer.model_max_length
    while True:
        spans = [span for doc_spans in nested_spans for span in doc_spans]
        wordpieces, align = wordpieces_and_alignment(tokenizer, spans)
        if wordpieces.input_ids.shape[1] <= limit:
            return nested_spans, wordpieces, align
        lengths = wordpieces.attention_mask.sum(axis=1)
        each_length = iter(lengths.tolist())
        cut = [[part for span in doc_spans for part in _halves_if_over(span, next(each_length), limit)] for doc_spans in nested_spans]
        if sum(len(doc_spans) for doc_spans in cut) == len(spans):
            _warn_of_unfitting_tokens(spans, lengths, limit)
            return nested_spans, wordpieces, align
        nested_spans = cut


def _halves_if_over(span: Span, length: float, limit: int) -> List[Span]:
    """The span's two halves (by tokens) if its word pieces are over the limit, else the span."""
    if length <= limit or len(span) < 2:
        return [span]
    return [span[: len(span) // 2], span[len(span) // 2 :]]


def _warn_of_unfitting_tokens(spans: Sequence[Span], lengths: numpy.ndarray, limit: int) -> None:
    """A warning for each span (a single token) whose word pieces are over the limit."""
    for span, length in zip(spans, lengths):
        if length > limit:
            text = span.text if len(span.text) <= 40 else span.text[:40] + "..."
            warnings.warn(
                f"spacy_w2ner: the token {text!r} (characters {span.start_char}-{span.end_char} of its doc) "
                f"is {int(length)} word pieces with the special ones, more than the encoder's {limit}: "
                f"its vector comes from its first word pieces only"
            )


def wordpieces_and_alignment(tokenizer, spans: Sequence[Span]) -> Tuple[WordpieceBatch, Ragged]:
    """The spans' word pieces (padded to the longest) and, for every token of their docs, the
    indices of the word pieces it overlaps in the flattened batch: what spacy-transformers'
    ``huggingface_tokenize`` and ``get_alignment_via_offset_mapping`` give (a slow tokenizer,
    without offsets, takes their path: ``get_alignment`` by the strings)."""
    texts = [span.text for span in spans]
    if not isinstance(tokenizer, PreTrainedTokenizerFast):
        wordpieces = WordpieceBatch.from_batch_encoding(huggingface_tokenize(tokenizer, texts))
        return wordpieces, get_alignment(list(spans), wordpieces.strings, tokenizer.all_special_tokens)
    if not texts or tokenizer.pad_token_id is None or tokenizer.padding_side != "right":
        return _by_the_hugging_face_call(tokenizer, spans, texts)
    return _by_the_backend(tokenizer, spans, texts)


def _by_the_backend(tokenizer: PreTrainedTokenizerFast, spans: Sequence[Span], texts: List[str]):
    """``wordpieces_and_alignment`` from the backend's encodings, padded on the right with numpy:
    the arrays the Hugging Face call gives, without its Python lists of every row."""
    encodings = _backend_encodings(tokenizer, texts)
    rows = [encoding.ids for encoding in encodings]
    lengths = numpy.fromiter(map(len, rows), dtype=numpy.int64, count=len(rows))
    real = numpy.arange(int(lengths.max()))[None, :] < lengths[:, None]
    ids = _padded_rows(real, chain.from_iterable(rows), tokenizer.pad_token_id)
    offsets = _padded_rows(real, chain.from_iterable(chain.from_iterable(e.offsets for e in encodings)), 0, pair=True)
    type_ids = None
    if "token_type_ids" in tokenizer.model_input_names:  # the Hugging Face call's default
        type_ids = _padded_rows(real, chain.from_iterable(e.type_ids for e in encodings), tokenizer.pad_token_type_id)
    wordpieces = WordpieceBatch(
        strings=_strings(tokenizer, ids),
        input_ids=ids,
        attention_mask=real.astype(numpy.float32),
        lengths=(ids != tokenizer.pad_token_id).sum(axis=1).tolist(),  # spacy-transformers': strings not the pad token's
        token_type_ids=type_ids,
    )
    return wordpieces, align_by_offsets(spans, offsets)


def _backend_encodings(tokenizer: PreTrainedTokenizerFast, texts: List[str]) -> list:
    """The backend (Rust) tokenizer's encodings of ``texts``, unpadded and untruncated, with the
    special tokens, as the Hugging Face call makes them (it sets the same state on the backend
    before every call; only the padding differs, which ``_padded_rows`` adds)."""
    tokenizer.set_truncation_and_padding(
        padding_strategy=PaddingStrategy.DO_NOT_PAD,
        truncation_strategy=TruncationStrategy.DO_NOT_TRUNCATE,
        max_length=None,
        stride=0,
        pad_to_multiple_of=None,
        padding_side=None,
    )
    backend = tokenizer.backend_tokenizer
    if backend.encode_special_tokens != tokenizer.split_special_tokens:
        backend.encode_special_tokens = tokenizer.split_special_tokens
    return backend.encode_batch(texts, add_special_tokens=True)


def _padded_rows(real: numpy.ndarray, values, fill: int, pair: bool = False) -> numpy.ndarray:
    """The rows' ``values`` (every row's, flattened; pairs flattened too where ``pair``) in a
    (rows, longest row[, 2]) int64 array where ``real`` is true, ``fill`` elsewhere."""
    count = int(real.sum()) * (2 if pair else 1)
    flat = numpy.fromiter(values, dtype=numpy.int64, count=count)
    padded = numpy.full(real.shape + ((2,) if pair else ()), fill, dtype=numpy.int64)
    padded[real] = flat.reshape(-1, 2) if pair else flat
    return padded


def _by_the_hugging_face_call(tokenizer: PreTrainedTokenizerFast, spans: Sequence[Span], texts: List[str]):
    """``wordpieces_and_alignment`` through the Hugging Face call, as spacy-transformers makes it:
    for an empty batch, a tokenizer without a pad token or one that pads on the left."""
    encoding = tokenizer(
        texts,
        add_special_tokens=True,
        return_attention_mask=True,
        return_offsets_mapping=True,
        return_tensors="np",
        return_token_type_ids=None,
        padding="longest",
        verbose=False,  # spans over the encoder's length are cut (fitted_wordpieces)
    )
    encoding["input_texts"] = _strings(tokenizer, encoding["input_ids"])
    encoding["pad_token"] = tokenizer.pad_token
    return WordpieceBatch.from_batch_encoding(encoding), align_by_offsets(spans, encoding["offset_mapping"])


def _strings(tokenizer: PreTrainedTokenizerFast, ids: numpy.ndarray) -> List[List[str]]:
    """Each row's strings as ``convert_ids_to_tokens`` gives them (an encoding's own tokens can
    differ: a Unigram model's unknown piece keeps its text), from a table of the vocabulary made
    once for each tokenizer, again when an id is past it (tokens added since)."""
    table = _STRINGS.get(tokenizer)
    if table is None or (ids.size and int(ids.max()) >= len(table)):
        size = max(len(tokenizer), int(ids.max()) + 1 if ids.size else 0)
        table = numpy.empty(size, dtype=object)
        table[:] = tokenizer.convert_ids_to_tokens(list(range(size)))
        _STRINGS[tokenizer] = table
    return table[ids].tolist()


_STRINGS: "weakref.WeakKeyDictionary[PreTrainedTokenizerFast, numpy.ndarray]" = weakref.WeakKeyDictionary()


def align_by_offsets(spans: Sequence[Span], offset_mapping: numpy.ndarray) -> Ragged:
    """For every token of the spans' docs (the docs in the order they first come, all their
    tokens), the sorted indices of the word pieces whose characters it holds, in the batch's
    rows laid end to end (``offset_mapping``: span x word piece x (start, end), the characters
    relative to the span's text). A token holds its own characters and the one after it unless
    that begins the next token (spacy-transformers' rule), so a word piece that starts on the
    space after a token goes to that token."""
    if len(spans) != len(offset_mapping):
        raise ValueError(f"Cannot align {len(spans)} spans with {len(offset_mapping)} rows of word pieces")
    char_tokens, doc_starts, token_count = _characters_to_tokens(spans)
    offsets = numpy.asarray(offset_mapping, dtype=numpy.int64).reshape(len(spans), -1, 2)
    text_lengths = numpy.array([span.end_char - span.start_char for span in spans], dtype=numpy.int64)
    span_starts = numpy.array([doc_starts[id(span.doc)] + span.start_char for span in spans], dtype=numpy.int64)
    starts = offsets[:, :, 0].clip(0, text_lengths[:, None])
    ends = offsets[:, :, 1].clip(starts, text_lengths[:, None])
    piece, chars = _runs((starts + span_starts[:, None]).ravel(), (ends - starts).ravel())
    tokens = char_tokens[chars]
    held = tokens >= 0
    pieces = max(offsets.shape[0] * offsets.shape[1], 1)
    pairs = numpy.unique(tokens[held] * pieces + piece[held])  # by token, then piece
    return Ragged((pairs % pieces).astype("i"), numpy.bincount(pairs // pieces, minlength=token_count).astype("i"))


def _characters_to_tokens(spans: Sequence[Span]) -> Tuple[numpy.ndarray, Dict[int, int], int]:
    """The spans' docs' characters laid end to end (each doc's text and one more character),
    each mapped to the position of the token that holds it (-1 for none: the second and later
    spaces after a token), the tokens numbered across the docs in the order the docs first
    come; with each doc's first character's place (by ``id(doc)``) and the token count."""
    docs: Dict[int, Doc] = {}
    for span in spans:
        docs.setdefault(id(span.doc), span.doc)
    tables = [doc.to_array([IDX, LENGTH, SPACY]).astype(numpy.int64).reshape(-1, 3) for doc in docs.values()]
    text_lengths = numpy.array([int(table[-1].sum()) if len(table) else 0 for table in tables], dtype=numpy.int64)
    doc_starts = numpy.cumsum(text_lengths + 1) - (text_lengths + 1)
    table = numpy.concatenate(tables) if tables else numpy.zeros((0, 3), numpy.int64)
    token_starts = table[:, 0] + numpy.repeat(doc_starts, [len(table) for table in tables])
    lengths = table[:, 1]
    chars = numpy.full(int((text_lengths + 1).sum()), -1, dtype=numpy.int64)
    chars[token_starts + lengths] = numpy.arange(len(table))  # the character after each token
    token, inside = _runs(token_starts, lengths)
    chars[inside] = token  # its own, over the one after the token before it
    return chars, dict(zip(docs, doc_starts.tolist())), len(table)


def _runs(starts: numpy.ndarray, counts: numpy.ndarray) -> Tuple[numpy.ndarray, numpy.ndarray]:
    """Every integer of the runs ``[start, start + count)``, with the index of its run."""
    run = numpy.repeat(numpy.arange(len(counts), dtype=numpy.int64), counts)
    first_of_run = numpy.cumsum(counts) - counts
    return run, starts[run] + numpy.arange(len(run), dtype=numpy.int64) - first_of_run[run]
