"""A transformer listener whose inference memory does not grow with a document's length."""
from typing import Iterator, List

import numpy
from spacy.util import registry
from spacy_transformers.architectures import transformer_listener_tok2vec_v1
from spacy_transformers.data_classes import TransformerData
from spacy_transformers.layers import split_trf_batch, trfs2arrays
from spacy_transformers.layers.trfs2arrays import forward as trfs2arrays_forward
from thinc.api import Model, chain
from thinc.types import Ragged
from transformers.utils import ModelOutput

from ..model.types import no_backprop
from .transformer import node_named


@registry.architectures("spacy_w2ner.TransformerListener.v1")
def chunked_transformer_listener(
    pooling: Model, grad_factor: float = 1.0, upstream: str = "*", max_tokens_per_pass: int = 4096
) -> Model:
    """spacy-transformers' ``TransformerListener.v1`` that pools word pieces into token
    vectors ``max_tokens_per_pass`` tokens at a time when predicting, and a training batch's
    docs all at once.

    The original gathers every word-piece row of a doc (with the overlap of the
    strided spans) into new arrays before pooling, several times the doc's
    output in memory; on a 50,000-token doc that is hundreds of megabytes. In
    training the original gathers, and scatters the gradient back, doc by doc; here a
    batch's docs go at once (``_pool_batch``). The token vectors and gradients are the
    same. Built like
    ``transformer.chunked_transformer_model``: the listener's ``trfs2arrays`` node is replaced
    by one with the same name, pooling layer and attrs, and a chunked forward.
    """
    return _pooled_in_chunks(transformer_listener_tok2vec_v1(pooling, grad_factor, upstream), max_tokens_per_pass)


@registry.architectures("spacy_w2ner.ChunkedTok2VecTransformer.v1")
def chunked_tok2vec_transformer(
    transformer: Model, pooling: Model, grad_factor: float = 1.0, max_tokens_per_pass: int = 4096
) -> Model:
    """A transformer model (``transformer``: its config block, a ``ChunkedTransformerModel``) and
    its listener's pooling in one component's tok2vec: what ``nlp.replace_listeners`` makes of the
    two (the config ``transformer.listener_replaced_config`` writes), so that the pipeline it saves
    loads. The node tree of spacy-transformers' ``Tok2VecTransformer.v3``, with this package's
    encoder and pooling."""
    model = chain(chain(transformer, split_trf_batch()), trfs2arrays(pooling, grad_factor))
    return _pooled_in_chunks(model, max_tokens_per_pass)


def _pooled_in_chunks(model: Model, max_tokens_per_pass: int) -> Model:
    """``model`` whose ``trfs2arrays`` node is replaced by one with the same name, pooling layer and
    attrs, and a chunked forward (``_pool_in_chunks``)."""
    if max_tokens_per_pass < 1:
        raise ValueError(f"max_tokens_per_pass must be at least 1, got {max_tokens_per_pass}")
    to_arrays = node_named(model, "trfs2arrays")
    chunked = Model(
        to_arrays.name,
        _pool_in_chunks,
        layers=list(to_arrays.layers),
        attrs={**to_arrays.attrs, "max_tokens_per_pass": max_tokens_per_pass},
    )
    model.replace_node(to_arrays, chunked)
    return model


def _pool_in_chunks(model: Model, trf_datas: list, is_train: bool):
    """spacy-transformers' trfs2arrays forward: in training a batch's docs at once
    (``_pool_batch``); when predicting, pooled a chunk of tokens at a time.

    Small docs are pooled together (one gather and one pooling call for up to
    ``max_tokens_per_pass`` tokens of several docs), so a batch of sentences costs a
    few array operations on the device rather than several per doc; a long doc is
    pooled on its own, a chunk at a time.
    """
    if is_train:
        if all(_has_aligned_rows(trf_data) for trf_data in trf_datas):
            return _pool_batch(model, trf_datas)
        return trfs2arrays_forward(model, trf_datas, is_train)  # empty docs, tokens without pieces
    size = model.attrs["max_tokens_per_pass"]
    outputs = [None] * len(trf_datas)
    for group in _docs_by_tokens(trf_datas, size):
        pooled = _pool_docs(model, [trf_datas[i] for i in group], size)
        first = 0
        for i in group:
            n_tokens = len(trf_datas[i].align.lengths)
            outputs[i] = pooled[first : first + n_tokens]
            first += n_tokens
    # A doc without word pieces gets an empty array, as spacy-transformers gives it.
    return [model.ops.alloc2f(0, 0) if out is None else out for out in outputs], no_backprop


def _has_aligned_rows(trf_data) -> bool:
    """Whether a doc has word-piece rows and a token aligned to one (the case ``_pool_batch``
    takes; spacy-transformers gives the others zero vectors and no gradient)."""
    if not isinstance(trf_data, TransformerData):
        return False  # trfs2arrays says what is wrong
    hidden = trf_data.model_output.get("last_hidden_state") if trf_data.model_output is not None else None
    return hidden is not None and hidden.size > 0 and trf_data.align.dataXd.size > 0


def _word_piece_rows(ops, trf_datas: list):
    """The docs' word-piece rows in one array (one copy at most), each doc's first row (and the
    end), and per doc its tokens' row indices into that array and their lengths (host arrays)."""
    sources = [ops.reshape2f(trf_data.model_output.last_hidden_state, -1, trf_data.width) for trf_data in trf_datas]
    starts = numpy.cumsum([0] + [source.shape[0] for source in sources])
    indices = [ops.to_numpy(trf_data.align.dataXd).reshape(-1) + start for trf_data, start in zip(trf_datas, starts)]
    lengths = [ops.to_numpy(trf_data.align.lengths) for trf_data in trf_datas]
    source = sources[0] if len(sources) == 1 else ops.xp.concatenate(sources)
    return source, starts, indices, lengths


def _pool_batch(model: Model, trf_datas: list):
    """trfs2arrays' training forward, every doc of the batch at once: one gather of the word-piece
    rows, one pooling call and, backwards, one scatter-add, where trfs2arrays makes each per doc
    (on a GPU each also copies the doc's alignment to the device, a wait for the device). The docs'
    rows are disjoint, so the token vectors and the gradients are the same numbers."""
    ops = model.ops
    source, starts, indices, lengths = _word_piece_rows(ops, trf_datas)
    n_rows = sum(len(doc_indices) for doc_indices in indices)
    # The indices and the lengths go to the device in one copy.
    both = ops.asarray1i(numpy.concatenate(indices + lengths))
    index, token_lengths = both[:n_rows], both[n_rows:]
    pooled, backprop_pooling = model.layers[0](Ragged(source[index], token_lengths), True)
    token_starts = numpy.cumsum([len(doc_lengths) for doc_lengths in lengths])[:-1]
    grad_factor = model.attrs["grad_factor"]
    source_shape = source.shape  # the backward pass keeps the shape, not the copy

    def backprop(d_outputs: list) -> list:
        d_pooled = d_outputs[0] if len(d_outputs) == 1 else ops.xp.concatenate(d_outputs)
        d_source = ops.alloc2f(*source_shape)
        ops.scatter_add(d_source, index, backprop_pooling(d_pooled).dataXd)
        if grad_factor != 1.0:
            d_source *= grad_factor
        return [
            TransformerData(
                model_output=ModelOutput(last_hidden_state=d_source[first:last].reshape(trf_data.model_output.last_hidden_state.shape)),
                wordpieces=trf_data.wordpieces,
                align=trf_data.align,
            )
            for trf_data, first, last in zip(trf_datas, starts[:-1], starts[1:])
        ]

    return ops.xp.split(pooled, token_starts), backprop


def _docs_by_tokens(trf_datas: list, size: int) -> Iterator[List[int]]:
    """Indices of the docs with word pieces, consecutive ones grouped up to ``size`` tokens."""
    group: List[int] = []
    tokens = 0
    for i, trf_data in enumerate(trf_datas):
        hidden = getattr(trf_data, "model_output", {}).get("last_hidden_state")
        if hidden is None or hidden.size == 0:
            continue
        n_tokens = len(trf_data.align.lengths)
        if group and tokens + n_tokens > size:
            yield group
            group, tokens = [], 0
        group.append(i)
        tokens += n_tokens
    if group:
        yield group


def _pool_docs(model: Model, trf_datas: list, size: int):
    """The token vectors of the docs, concatenated: their word-piece rows pooled ``size`` tokens at a time."""
    ops = model.ops
    pooling = model.layers[0]
    source, _, indices, lengths = _word_piece_rows(ops, trf_datas)
    all_indices, all_lengths = numpy.concatenate(indices), numpy.concatenate(lengths)
    starts = numpy.concatenate([[0], numpy.cumsum(all_lengths)])
    pooled = []
    for first in range(0, len(all_lengths), size):
        last = min(first + size, len(all_lengths))
        rows = source[ops.asarray1i(all_indices[starts[first] : starts[last]])]
        pooled.append(pooling.predict(Ragged(rows, ops.asarray1i(all_lengths[first:last]))))
    return pooled[0] if len(pooled) == 1 else ops.xp.concatenate(pooled)
