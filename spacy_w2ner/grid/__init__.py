"""The grid layer: numpy, and spaCy's ``Doc`` and ``Example`` (the tokens, the sentences, the
gold annotation); no Thinc, no torch (the import contract in setup.cfg says so).

* ``codec``: entities <-> word-word relation grids (NONE, NNW, THW-label), decoding with capped paths;
* ``segments``: documents cut into sentences and overlapping windows, batched by grid cells,
  and the entities of each segment's decoded grid merged back per document;
* ``targets``: gold entities -> each segment's target grid and loss weights (training);
* ``triplets``: the triplet loss's (anchor, positive, negative) cells of a grid batch.
"""
