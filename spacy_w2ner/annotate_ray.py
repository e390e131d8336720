"""The Ray engine's former path: it lives in ``spacy_w2ner.annotate.ray`` (this name still works)."""
from .annotate.ray import annotate_dataset, annotate_with_ray, default_cpus_per_worker, start_ray  # noqa: F401
