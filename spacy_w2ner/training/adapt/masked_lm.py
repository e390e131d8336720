"""The encoder as a masked language model: transformers' ``AutoModelForMaskedLM`` on the
encoder's weights, its head new where the encoder ships none, the loss over the masked
wordpieces only, and the folder the adapted encoder is saved as.

Sentence encoders (all-mpnet-base-v2, the bundled MiniLM) ship the encoder without its masked-LM
head: ``AutoModelForMaskedLM`` then starts the head from random weights, its output layer tied
to the word embeddings (transformers ties them). Its own parameters (a dense layer, a layer
norm, the output bias) are the ``head_parameters``, the ones a head-alone phase trains. The
loss runs the head on the masked wordpieces only (a vocabulary-wide output for each wordpiece
costs about a fifth of an MPNet forward pass), where the model's head is one module; else the
model's full output is used.
"""
import contextlib
import inspect
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

import numpy
import torch
from spacy_transformers.data_classes import WordpieceBatch

from ...encoders.packing import PackedWordpieces, packing_offset, unpack
from .masking import IGNORED, MaskedBatch


@dataclass
class Encoded:
    last_hidden_state: torch.Tensor  # spans x wordpieces x width (``packing_offset`` compares them)


@dataclass
class MaskedLM:
    model: torch.nn.Module  # transformers' *ForMaskedLM
    head: Optional[torch.nn.Module]  # its head, where one module (see ``masked_logits``)
    head_parameters: List[torch.nn.Parameter]
    takes_token_types: bool  # given explicitly: BERT's default ones stop at its longest position

    @classmethod
    def of(cls, model) -> "MaskedLM":
        base = {id(parameter) for parameter in model.base_model.parameters()}
        heads = [module for name, module in model.named_children() if name != model.base_model_prefix]
        head = heads[0] if len(heads) == 1 else None
        takes_token_types = "token_type_ids" in inspect.signature(model.base_model.forward).parameters
        return cls(model, head, [parameter for parameter in model.parameters() if id(parameter) not in base], takes_token_types)

    def inputs(self, batch: MaskedBatch) -> Dict[str, torch.Tensor]:
        """The batch's inputs for the model, with token types (all 0) where it takes them: a packed
        row can be longer than the encoder's positions (each span counts its own)."""
        if not self.takes_token_types:
            return batch.inputs
        return {**batch.inputs, "token_type_ids": torch.zeros_like(batch.inputs["input_ids"])}

    def train_head_alone(self, alone: bool) -> None:
        """Let gradients reach the head's own parameters only (``alone``), or every parameter."""
        head = {id(parameter) for parameter in self.head_parameters}
        for parameter in self.model.parameters():
            parameter.requires_grad_(not alone or id(parameter) in head)


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """transformers' loading messages silenced (the command says what matters in its own words)."""
    from transformers.utils import logging as transformers_logging

    level = transformers_logging.get_verbosity()
    transformers_logging.set_verbosity(logging.ERROR)
    try:
        yield
    finally:
        transformers_logging.set_verbosity(level)


def load_masked_lm(path: Path, seed: Optional[int] = None) -> Tuple[MaskedLM, bool]:
    """The masked LM from an encoder folder (a new head's weights drawn after seeding torch with
    ``seed``) and whether its head is new."""
    from transformers import AutoModelForMaskedLM

    if seed is not None:
        torch.manual_seed(seed)
    with quiet_transformers():
        model, info = AutoModelForMaskedLM.from_pretrained(str(path), output_loading_info=True)
    lm = MaskedLM.of(model)
    base_prefix = model.base_model_prefix + "."
    head_is_new = any(not key.startswith(base_prefix) for key in info["missing_keys"])
    return lm, head_is_new


def masked_logits(lm: MaskedLM, batch: MaskedBatch) -> Tuple[torch.Tensor, torch.Tensor]:
    """(logits, labels) of the masked wordpieces of ``batch``."""
    selected = batch.labels != IGNORED
    if lm.head is None:
        return lm.model(**lm.inputs(batch)).logits[selected], batch.labels[selected]
    hidden = lm.model.base_model(**lm.inputs(batch)).last_hidden_state
    return lm.head(hidden[selected]), batch.labels[selected]


def loss_sum(lm: MaskedLM, batch: MaskedBatch) -> Tuple[torch.Tensor, int]:
    """The summed cross-entropy over the masked wordpieces, and how many there are."""
    logits, labels = masked_logits(lm, batch)
    return torch.nn.functional.cross_entropy(logits.float(), labels, reduction="sum"), int(labels.numel())


def position_offset(lm: MaskedLM, ids: List[numpy.ndarray], pad_id: Optional[int]) -> Optional[int]:
    """Where this encoder counts a packed span's positions from (``encoders.packing.packing_offset``,
    on a few of ``ids``), None where it does not pack."""
    sample = sorted(ids[:64], key=len)[:4]
    widths = numpy.asarray([len(sequence) for sequence in sample])
    input_ids = numpy.full((len(sample), int(widths.max())), pad_id or 0, dtype="int64")
    for row, sequence in enumerate(sample):
        input_ids[row, : len(sequence)] = sequence
    mask = (numpy.arange(input_ids.shape[1])[None, :] < widths[:, None]).astype("float32")
    spans = WordpieceBatch(strings=[[] for _ in sample], input_ids=input_ids, attention_mask=mask, lengths=list(widths), token_type_ids=None)
    device = next(lm.model.parameters()).device

    def encode(batch: WordpieceBatch):
        inputs = {"input_ids": torch.as_tensor(batch.input_ids), "attention_mask": torch.as_tensor(batch.attention_mask)}
        if isinstance(batch, PackedWordpieces):
            inputs["position_ids"] = torch.as_tensor(batch.position_ids)
        hidden = lm.model.base_model(**lm.inputs(MaskedBatch(inputs, None).to(device))).last_hidden_state.cpu()
        return Encoded(unpack(hidden, batch.layout) if isinstance(batch, PackedWordpieces) else hidden)

    training = lm.model.training
    lm.model.eval()
    try:
        with torch.no_grad():
            return packing_offset(encode, spans, widths, pad_id)
    finally:
        lm.model.train(training)


def save_encoder(lm: MaskedLM, tokenizer, original: Path, directory: Path) -> None:
    """The adapted encoder as a folder that ``AutoModel`` and ``AutoModelForMaskedLM`` both load
    (a w2ner config's ``name``): the masked LM's weights, plus the encoder's weights that
    masked-LM training does not use (the pooler), as they were in ``original``; its tokenizer."""
    from transformers import AutoModel

    with quiet_transformers():
        encoder = AutoModel.from_pretrained(str(original))
    state = lm.model.state_dict()
    prefix = lm.model.base_model_prefix
    unused = {f"{prefix}.{key}": value for key, value in encoder.state_dict().items() if f"{prefix}.{key}" not in state}
    lm.model.save_pretrained(directory, state_dict={**state, **unused})
    tokenizer.save_pretrained(directory)
