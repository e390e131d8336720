"""The grid layer, pure numpy (and spaCy's ``Doc`` for sentence boundaries): no Thinc, no torch.

* ``codec``: entities <-> word-word relation grids (NONE, NNW, THW-label), decoding with capped paths;
* ``segments``: documents cut into sentences and overlapping windows, batched by grid cells,
  and the entities of each segment's decoded grid merged back per document;
* ``targets``: gold entities -> each segment's target grid and loss weights (training).
"""
