"""The optional integrations, imported here alone: each import says which extra installs it.

The base package never imports them; the commands and engines that need one call these.
"""
from typing import Optional


def require_serving():
    """FastAPI and uvicorn (the ``[serve]`` extra); ImportError saying so when missing."""
    try:
        import fastapi  # noqa: F401
        import uvicorn
    except ImportError:
        raise ImportError("serving needs FastAPI and uvicorn: pip install 'spacy-w2ner[serve]'") from None
    return uvicorn


def require_ray():
    """Ray with Ray Data (the ``[ray]`` extra)."""
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError:
        raise ImportError("the Ray engine needs Ray Data: pip install 'spacy-w2ner[ray]'") from None
    return ray


def require_ray_serve():
    """Ray Serve (the ``[ray]`` extra)."""
    try:
        from ray import serve
    except ImportError:
        raise ImportError("the Ray engine needs Ray Serve: pip install 'spacy-w2ner[ray]'") from None
    return serve


def require_ray_train():
    """Ray Train with its torch backend (the ``[ray]`` extra), for training on a Ray cluster."""
    try:
        import ray.train.torch  # noqa: F401
    except ImportError:
        raise ImportError("training on Ray needs Ray Train: pip install 'spacy-w2ner[ray]'") from None
    return ray


def require_bioc():
    """The ``bioc`` package and lxml (the ``[bioc]`` extra), for BioC XML and JSON."""
    try:
        import bioc
        import lxml.etree  # noqa: F401
    except ImportError:
        raise ImportError("BioC needs the bioc package: pip install 'spacy-w2ner[bioc]'") from None
    return bioc


def connect_ray(address: Optional[str] = None, num_cpus: Optional[int] = None, log_to_driver: bool = False):
    """Connect to the cluster at ``address``, or start a local Ray (no dashboard), unless
    connected; ``log_to_driver``: the workers' output printed here (training's log)."""
    ray = require_ray()
    if not ray.is_initialized():
        if address:
            ray.init(address=address, include_dashboard=False, log_to_driver=log_to_driver)
        else:
            ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=log_to_driver)
    return ray


def require_label_studio_backend():
    """FastAPI and uvicorn (the ``[label-studio]`` extra), for the Label Studio ML backend."""
    try:
        import fastapi  # noqa: F401
        import uvicorn
    except ImportError:
        raise ImportError("the Label Studio ML backend needs FastAPI and uvicorn: pip install 'spacy-w2ner[label-studio]'") from None
    return uvicorn
