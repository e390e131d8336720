"""Encoders: what turns a Doc's tokens into word vectors for the grid model (``tok2vec``).

* ``transformer``: ``spacy_w2ner.ChunkedTransformerModel.v1``, spacy-transformers' model whose
  inference memory does not grow with a document's length, that encodes spans of similar length
  together when predicting, optionally the mean of the top layers; ``...ChunkedTransformerModel.v2``
  adds ``int8_layers`` (what ``optimize`` writes);
* ``listener``: ``spacy_w2ner.TransformerListener.v1``, its listener, pooling a chunk of tokens at a time;
* ``pooling``: ``spacy_w2ner.reduce_max.v1``, max pooling of word pieces that allows tokens without any;
* ``assets``: where encoders with real weights live (the bundled MiniLM, fetched ones) and
  ``fetch-encoder``;
* ``torch_module``: ``encoder_torch_module``, the one place that finds a pipeline encoder's torch
  module (``release`` reads and changes it).
"""
