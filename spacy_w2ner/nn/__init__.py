"""The torch layer: the torch modules, and the Thinc shims that run and train them.

* ``network``: ``GridNetwork``, the W2NER grid network (BiLSTM, conditional layer norm grid,
  distance/region embeddings, dilated convolutions, biaffine + MLP co-predictor);
* ``triplet``: the triplet loss's hinges on grid cells;
* ``int8``: int8 Linear layers for CPU inference (which layers, how, and which are int8);
* ``bfloat16``: training on bfloat16 copies of float32 weights, and inference with bfloat16
  weights, on CPUs with bfloat16 instructions (``training_dtype``, ``inference_dtype``);
* ``cuda_graphs``: both networks' prediction passes on a GPU replayed from CUDA graphs;
* ``adam``: Thinc's Adam update of all of a module's tensors at once (torch's functional Adam);
* ``shim``: Thinc's shim with that step, autocast and prediction (the one reader of Thinc's privates);
* ``hf_shim``: spacy-transformers' ``HFShim`` with the same (the encoder's shim), and ``Int8HFShim``;
* ``transfers``: copies from the host to a GPU that do not wait for it.

``network``, ``triplet``, ``int8`` and ``cuda_graphs`` import torch alone (the import contract in
setup.cfg says so); ``adam``, ``shim``, ``hf_shim`` and ``transfers`` meet Thinc's arrays and
optimizer, and ``hf_shim`` spacy-transformers.
"""
