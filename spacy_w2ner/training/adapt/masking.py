"""A batch of sequences -> a masked-LM step's inputs: whole words masked, the sequences packed
into rows as the w2ner training packs an encoder's spans (``encoders/packing.py``).

transformers' ``DataCollatorForWholeWordMask`` finds words by BERT's "##" prefix, which
MPNet's and RoBERTa's vocabularies do not share; here the words are the fast tokenizer's word
ids (``corpus.py``), chosen the collator's way (a shuffled order of the words, taken while they
fit a budget of ``masking`` times the wordpieces), and the collator's own ``torch_mask_tokens``
replaces the chosen wordpieces (80% the mask token, 10% a random one, 10% kept). Every draw
comes from a generator seeded for the step, so a step's masks are a function of the seed and
the step alone.
"""
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import numpy
import torch
from spacy_transformers.data_classes import WordpieceBatch

from ...encoders.packing import pack
from .options import AdaptError

IGNORED = -100  # the label of a wordpiece the loss leaves out (transformers' convention)


@dataclass
class MaskedBatch:
    """A step's model inputs (``input_ids``, ``attention_mask`` and, packed, ``position_ids``)
    and the labels of the same shape (the original wordpiece where masked, else IGNORED)."""

    inputs: Dict[str, torch.Tensor]
    labels: Optional[torch.Tensor]

    def to(self, device) -> "MaskedBatch":
        labels = None if self.labels is None else self.labels.to(device)
        return MaskedBatch({key: value.to(device) for key, value in self.inputs.items()}, labels)


def words_to_mask(words: numpy.ndarray, share: float, generator: torch.Generator) -> numpy.ndarray:
    """1 for each wordpiece of the words chosen: words in a shuffled order, each taken if its
    wordpieces still fit the budget (``share`` of the sequence's non-special wordpieces, at
    least 1), as ``DataCollatorForWholeWordMask`` chooses; 0 elsewhere."""
    real = numpy.flatnonzero(words >= 0)
    chosen = numpy.zeros(len(words), dtype="float32")
    if not len(real):
        return chosen
    starts = real[numpy.r_[True, words[real][1:] != words[real][:-1]]]
    ends = numpy.r_[starts[1:], real[-1] + 1]
    budget, taken = max(1, round(len(real) * share)), 0
    for word in torch.randperm(len(starts), generator=generator).tolist():
        size = int(ends[word] - starts[word])
        if taken + size > budget:
            continue
        chosen[starts[word] : ends[word]] = 1
        taken += size
        if taken == budget:
            break
    return chosen


class WholeWordMasking:
    """Masks a batch of sequences (see the module docstring)."""

    def __init__(self, tokenizer, share: float):
        from transformers import DataCollatorForWholeWordMask

        if tokenizer.mask_token is None:
            raise AdaptError("the encoder's tokenizer has no mask token: it cannot be trained as a masked language model")
        self.collator = DataCollatorForWholeWordMask(tokenizer, mlm_probability=share, return_tensors="pt")
        self.share, self.pad_id = share, tokenizer.pad_token_id or 0

    def __call__(self, ids: List[numpy.ndarray], words: List[numpy.ndarray], seed: int) -> Tuple[torch.Tensor, torch.Tensor]:
        """(inputs, labels), padded to the longest sequence: the chosen words replaced, their
        wordpieces the labels."""
        generator = torch.Generator().manual_seed(seed)
        inputs = torch.full((len(ids), max(len(sequence) for sequence in ids)), self.pad_id, dtype=torch.long)
        chosen = torch.zeros(inputs.shape)
        for row, (sequence, sequence_words) in enumerate(zip(ids, words)):
            inputs[row, : len(sequence)] = torch.as_tensor(sequence)
            chosen[row, : len(sequence)] = torch.as_tensor(words_to_mask(sequence_words, self.share, generator))
        self.collator.generator = generator
        return self.collator.torch_mask_tokens(inputs, chosen)


def model_inputs(inputs: torch.Tensor, labels: torch.Tensor, widths: numpy.ndarray, position_offset: Optional[int]) -> MaskedBatch:
    """The masked sequences (``widths`` wordpieces each) packed into rows, positions counted from
    ``position_offset`` (``encoders.packing``); a padded batch where the encoder does not pack (None)."""
    widths = numpy.asarray(widths)
    attended = torch.as_tensor(numpy.arange(inputs.shape[1])[None, :] < widths[:, None])
    if position_offset is None:
        return MaskedBatch({"input_ids": inputs, "attention_mask": attended.long()}, labels.masked_fill(~attended, IGNORED))
    spans = WordpieceBatch(
        strings=[[] for _ in widths], input_ids=inputs.numpy(), attention_mask=attended.numpy().astype("float32"),
        lengths=[int(width) for width in widths], token_type_ids=None,
    )  # fmt: skip
    packed = pack(spans, widths, position_offset)
    layout = packed.layout
    packed_labels = torch.full((packed.input_ids.size,), IGNORED, dtype=torch.long)
    packed_labels[layout.source] = labels.reshape(-1)[layout.target]
    tensors = {
        "input_ids": torch.as_tensor(packed.input_ids), "attention_mask": torch.as_tensor(packed.attention_mask),
        "position_ids": torch.as_tensor(packed.position_ids),
    }  # fmt: skip
    return MaskedBatch(tensors, packed_labels.view(packed.input_ids.shape))
