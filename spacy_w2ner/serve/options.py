"""The settings of the HTTP service: the pipeline's (``PipelineOptions``), the server's limits,
its batching, and the Ray Serve engine's. One type: the ``serve`` command's options are made
from it (``cli/``), both engines take it."""
import json
import os
from dataclasses import dataclass
from typing import Any, Dict, Optional

from ..common import PipelineOptions, check_engine, option

API_KEY_ENV = "SPACY_W2NER_API_KEY"
LOOPBACK = ("127.0.0.1", "::1", "localhost")


@dataclass
class ServeOptions(PipelineOptions):
    """Every setting of ``serve``. ``threshold`` is the lowest a request may ask for (and the
    default); a request's own ``threshold`` may only raise it."""

    host: str = option("127.0.0.1", "Address to listen on (loopback by default; anything wider wants --api-key)")
    port: int = option(8080, "Port to listen on")
    api_key: Optional[str] = option(None, f"Bearer token the requests must carry (default: ${API_KEY_ENV}; none: no check)")
    engine: str = option("local", "local (one process, uvicorn) or ray (Ray Serve replicas)")
    max_batch_size: int = option(256, "Documents gathered into one nlp.pipe call at most")
    max_wait_ms: float = option(2.0, "How long a batch that is not full waits for more documents")
    max_documents: int = option(64, "Documents per request at most")
    max_text_chars: int = option(100_000, "Characters per document at most (413 above)")
    max_body_bytes: int = option(8_000_000, "Bytes per request body at most (413 above)")
    max_queue: int = option(4096, "Documents waiting at most; a request that would exceed it gets 503")
    timeout_s: float = option(60.0, "A request not answered in this many seconds gets 504")
    replicas: int = option(1, "ray: replicas of the pipeline (num_replicas; ignored with --autoscaling)")
    gpus_per_replica: float = option(0.0, "ray: GPUs per replica")
    cpus_per_replica: float = option(1.0, "ray: CPUs per replica")
    address: Optional[str] = option(None, "ray: the cluster's address (default: a local Ray)")
    autoscaling: Optional[str] = option(None, 'ray: Ray Serve autoscaling_config as JSON, e.g. \'{"min_replicas": 1, "max_replicas": 4}\'')
    max_ongoing_requests: int = option(64, "ray: requests a replica works on at once (Ray Serve)")

    def resolved_api_key(self) -> Optional[str]:
        return self.api_key or os.environ.get(API_KEY_ENV) or None

    def autoscaling_config(self) -> Optional[Dict[str, Any]]:
        return None if not self.autoscaling else json.loads(self.autoscaling)

    def check(self) -> None:
        super().check()
        check_engine(self.engine)
        for name in ("max_batch_size", "max_documents", "max_text_chars", "max_body_bytes", "max_queue", "replicas",
                     "max_ongoing_requests"):  # fmt: skip
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if not 0 < self.port < 65536:
            raise ValueError(f"port must be in 1-65535, got {self.port}")
        if self.max_wait_ms < 0 or self.timeout_s <= 0:
            raise ValueError("max_wait_ms must be 0 or more and timeout_s more than 0")
        if self.autoscaling:
            try:
                config = self.autoscaling_config()
            except ValueError as err:
                raise ValueError(f"--autoscaling is not JSON: {err}") from None
            if not isinstance(config, dict):
                raise ValueError("--autoscaling must be a JSON object (Ray Serve's autoscaling_config)")

    @property
    def min_threshold(self) -> float:
        return self.threshold or 0.0

    def settle(self, nlp) -> None:
        """What the loaded pipeline decides: without ``--threshold``, its w2ner's own threshold
        is the lowest a request may ask for; a text may be no longer than ``nlp.max_length``."""
        from ..component import first_w2ner

        if self.threshold is None:
            self.threshold = first_w2ner(nlp)[1].threshold
        self.max_text_chars = min(self.max_text_chars, nlp.max_length)

    def limits(self) -> Dict[str, Any]:
        return {
            "max_documents": self.max_documents, "max_text_chars": self.max_text_chars,
            "max_body_bytes": self.max_body_bytes, "max_queue": self.max_queue, "timeout_s": self.timeout_s,
            "threshold": {"min": self.min_threshold, "max": 1.0},
        }  # fmt: skip

    def pipeline(self) -> PipelineOptions:
        """The options each replica loads the pipeline with (``common.load_pipeline``)."""
        return self.on_engine(self.engine, self.gpus_per_replica)

    @property
    def wide_open(self) -> bool:
        """Listening beyond this machine without a key."""
        return self.host not in LOOPBACK and not self.resolved_api_key()
