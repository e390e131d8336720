"""The torch layer: the only modules that build torch modules or update torch tensors.

* ``network``: ``GridNetwork``, the W2NER grid network (BiLSTM, conditional layer norm grid,
  distance/region embeddings, dilated convolutions, biaffine + MLP co-predictor);
* ``fused_adam``: one multi-tensor Adam step for a Thinc shim's module, and bfloat16 autocast;
* ``hf_shim``: spacy-transformers' ``HFShim`` with that step (the encoder's shim), and ``Int8HFShim``;
* ``int8``: int8 Linear layers for CPU inference (which layers, how, and which are int8);
* ``cuda_graphs``: both networks' prediction passes on a GPU replayed from CUDA graphs;
* ``transfers``: copies from the host to a GPU that do not wait for it.
"""
