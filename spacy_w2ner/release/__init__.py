"""What is done to a trained, saved pipeline before it ships, each a command that writes a
pipeline directory's files from the saved pipeline:

* ``optimize``: ``python -m spacy_w2ner optimize``, a copy whose encoder has int8 layers, or whose
  networks have bfloat16 weights (``bfloat16``), for CPU inference, written only where it
  measured faster on this CPU with the same entities (``measure``);
* ``model_card``: ``python -m spacy_w2ner model-card``, the README that ``spacy package`` puts in
  the pipeline's wheel.
"""
