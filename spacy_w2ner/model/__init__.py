"""The Thinc layer: the ``spacy_w2ner.W2NER.v1`` model, from docs to scored grids.

The data flow, stated once (each step's module in brackets)::

    docs --tok2vec--> word vectors, all docs' in one array          (batches.WordVectors)
         --> segments: sentences, or windows of long stretches      (grid.segments)
         --> batches bounded by grid cells, padded in one gather     (padding)
         --> grid scorer: the torch GridNetwork as a Thinc layer    (grid_scorer, nn.network)
         --> logits (segments, longest, longest, relations) a batch (types.GridBatch)
    training:   logits and their backprop; the gradients scattered back to the words
    predicting: argmax relation and confidence per cell, copied to the host (predictions.HostGrids);
                the component decodes them into entities (grid.segments.decode_segments)

Modules: ``types`` (the data passed between the steps; imports no sibling), ``architecture``
(the registered model and its forward), ``hyperparameters`` (settings checked at build),
``batches`` (the one loop over scored batches that training, prediction and pictures share),
``padding``, ``grid_scorer`` (the Thinc node and its lazily built torch module) and
``predictions`` (what scored grids become for decoding and for pictures).
"""
