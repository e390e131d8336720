"""The torch layer: the only modules that build torch modules or update torch tensors.

* ``network``: ``GridNetwork``, the W2NER grid network (BiLSTM, conditional layer norm grid,
  distance/region embeddings, dilated convolutions, biaffine + MLP co-predictor);
* ``fused_adam``: one multi-tensor Adam step for a Thinc shim's module, and bfloat16 autocast;
* ``hf_shim``: spacy-transformers' ``HFShim`` with that step (the encoder's shim), and ``Int8HFShim``;
* ``int8``: int8 Linear layers for CPU inference (which layers, how, and which are int8);
* ``bfloat16``: training on bfloat16 copies of float32 weights, and inference with bfloat16
  weights, on CPUs with bfloat16 instructions (``training_dtype``, ``inference_dtype``);
* ``cuda_graphs``: both networks' prediction passes on a GPU replayed from CUDA graphs;
* ``transfers``: copies from the host to a GPU that do not wait for it.
"""
