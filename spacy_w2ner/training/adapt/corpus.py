"""Raw texts -> the sequences a masked-LM step reads: a held-out part set aside, every text cut
into wordpiece sequences between words, and each phase's batches in a shuffled order that is a
function of the seed, the phase and the step alone (so a resumed run finds its place by
arithmetic, without replaying anything).

The held-out texts are the ones whose SHA-256 is among the smallest: the same texts whatever
their order in the input and whatever the seed (runs with other seeds are measured on the same
texts), and a text that occurs twice is held out (or trained on) every time it occurs, so
training never sees a held-out text.
"""
import hashlib
import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Dict, Iterator, List, Sequence, Tuple

import numpy

from .options import STREAMS, AdaptError

# The held-out part holds at most this many texts (its loss is measured at every checkpoint).
MAX_HELD_OUT = 1000
# Texts tokenized at a time (the fast tokenizer works on a batch in parallel).
TOKENIZE_BATCH = 1000


@dataclass
class Sequences:
    """Wordpiece sequences (special tokens included) and each wordpiece's word (-1: special):
    whole-word masking masks the wordpieces of a word together."""

    ids: List[numpy.ndarray] = field(default_factory=list)
    words: List[numpy.ndarray] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def wordpieces(self) -> int:
        return sum(len(ids) for ids in self.ids)


@dataclass
class Corpus:
    train: Sequences
    held_out: Sequences
    facts: Dict[str, int]


def texts_sha256(texts: Sequence[str]) -> str:
    """One SHA-256 of the texts in their order (what a resumed run must read again)."""
    digest = hashlib.sha256()
    for text in texts:
        digest.update(hashlib.sha256(text.encode("utf8")).digest())
    return digest.hexdigest()


def split_held_out(texts: Sequence[str], share: float) -> Tuple[List[str], List[str]]:
    """(training texts, held-out texts), each in input order: ``share`` of the distinct texts (at
    least 1, at most ``MAX_HELD_OUT``) held out, chosen by their SHA-256 (see the module docstring)."""
    digests = [hashlib.sha256(text.encode("utf8")).digest() for text in texts]
    distinct = sorted(set(digests))
    count = min(MAX_HELD_OUT, math.ceil(share * len(distinct))) if share > 0 else 0
    if count >= len(distinct):
        raise AdaptError(f"TEXTS holds {len(distinct)} distinct text(s): too few to hold {count} out and train on the rest")
    chosen = set(distinct[:count])
    train = [text for text, digest in zip(texts, digests) if digest not in chosen]
    held_out = [text for text, digest in zip(texts, digests) if digest in chosen]
    return train, held_out


def windows(words: numpy.ndarray, room: int) -> Iterator[Tuple[int, int]]:
    """(start, end) of consecutive windows of at most ``room`` wordpieces, each cut between two
    words (a word longer than ``room`` alone is cut inside)."""
    start, length = 0, len(words)
    while start < length:
        end = min(start + room, length)
        if end < length:
            boundary = end
            while boundary > start and words[boundary] == words[boundary - 1]:
                boundary -= 1
            end = boundary if boundary > start else end
        yield start, end
        start = end


def sequences_of(texts: Sequence[str], tokenizer, max_length: int) -> Sequences:
    """Every text's wordpieces in sequences of at most ``max_length`` (special tokens included),
    cut between words; a text without a wordpiece gives none."""
    room = max_length - tokenizer.num_special_tokens_to_add()
    sequences = Sequences()
    for first in range(0, len(texts), TOKENIZE_BATCH):
        encoded = tokenizer(list(texts[first : first + TOKENIZE_BATCH]), add_special_tokens=False, verbose=False)
        for index, ids in enumerate(encoded["input_ids"]):
            words = numpy.asarray([-1 if word is None else word for word in encoded.word_ids(index)], dtype="int64")
            for start, end in windows(words, room):
                _add_sequence(sequences, tokenizer, ids[start:end], words[start:end])
    return sequences


def _add_sequence(sequences: Sequences, tokenizer, ids: List[int], words: numpy.ndarray) -> None:
    """``ids`` with the tokenizer's special tokens around them, their words -1."""
    full = tokenizer.build_inputs_with_special_tokens(list(ids))
    special = numpy.asarray(tokenizer.get_special_tokens_mask(full, already_has_special_tokens=True), dtype=bool)
    full_words = numpy.full(len(full), -1, dtype="int64")
    full_words[~special] = words
    sequences.ids.append(numpy.asarray(full, dtype="int64"))
    sequences.words.append(full_words)


def build_corpus(texts: Sequence[str], tokenizer, max_length: int, held_out_share: float) -> Corpus:
    """The texts split (``split_held_out``) and cut into sequences; AdaptError when there is
    nothing to train on."""
    if not texts:
        raise AdaptError("TEXTS holds no text")
    train_texts, held_out_texts = split_held_out(texts, held_out_share)
    train, held_out = sequences_of(train_texts, tokenizer, max_length), sequences_of(held_out_texts, tokenizer, max_length)
    if not len(train):
        raise AdaptError("TEXTS' training texts give no wordpiece: nothing to train on")
    facts = {
        "texts": len(texts), "training_texts": len(train_texts), "held_out_texts": len(held_out_texts),
        "training_sequences": len(train), "held_out_sequences": len(held_out),
        "training_wordpieces": train.wordpieces, "held_out_wordpieces": held_out.wordpieces,
    }  # fmt: skip
    return Corpus(train, held_out, facts)


def batch_indices(seed: int, phase: str, phase_step: int, sequences: int, batch_size: int) -> numpy.ndarray:
    """The sequences of a phase's step ``phase_step``: its epoch's shuffled order (a function of
    the seed, the phase and the epoch), cut into batches (the last one of an epoch may be smaller)."""
    per_epoch = math.ceil(sequences / batch_size)
    epoch, place = divmod(phase_step, per_epoch)
    return _order(seed, STREAMS[phase], epoch, sequences)[place * batch_size : (place + 1) * batch_size]


@lru_cache(maxsize=2)
def _order(seed: int, stream: int, epoch: int, sequences: int) -> numpy.ndarray:
    return numpy.random.default_rng([seed, stream, epoch]).permutation(sequences)


def step_seed(seed: int, phase: str, phase_step: int) -> int:
    """The seed of a step's masks (a function of the run's seed, the phase and the step)."""
    return int(numpy.random.SeedSequence([seed, STREAMS[phase], phase_step]).generate_state(1)[0])
