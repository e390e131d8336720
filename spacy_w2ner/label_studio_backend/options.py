"""The settings of the Label Studio ML backend: the pipeline's (``PipelineOptions``), the server's,
and the training loop's. One type: the ``label-studio-backend`` command's options are made from it
(``cli/``), the app and the retrainer take it."""
import os
from dataclasses import dataclass
from typing import Optional

from ..common import PipelineOptions, option

# Label Studio's API key (a legacy token or a personal access token), read from the environment
# only: never a command-line value (it would show in `ps`), never printed or logged.
API_KEY_ENV = "LABEL_STUDIO_API_KEY"
LOOPBACK = ("127.0.0.1", "::1", "localhost")


@dataclass
class BackendOptions(PipelineOptions):
    """Every setting of ``label-studio-backend``."""

    host: str = option("127.0.0.1", "Address to listen on (loopback by default: Label Studio on this machine)")
    port: int = option(9090, "Port to listen on (Label Studio's ML backends use 9090)")
    train_config: Optional[str] = option(
        None, "The training config of the retraining runs (its [training] settings: steps, batches, optimizer); "
        "default: the model's own config.cfg. The components always start from the serving model"
    )
    runs: str = option("label-studio-runs", "The backend's directory: the annotations kept, each training run, which model serves")
    retrain_every: int = option(
        20, "Start a training run after this many new, changed or deleted annotations (0: only on demand, Label Studio's Start Training)"
    )
    label_studio_url: Optional[str] = option(
        None, f"Label Studio's URL: a run gathers the project's annotations through its API (the key from ${API_KEY_ENV}); "
        "without it, from the annotations the webhooks brought"
    )
    dev_share: float = option(0.2, "The share of annotated tasks held out as the dev set that decides whether a new model serves")
    batch_size: int = option(64, "Tasks per nlp.pipe batch at most (annotate's --batch-size)")
    max_tasks: int = option(1000, "Tasks per /predict request at most")
    max_text_chars: int = option(1_000_000, "Characters per task text at most (a longer one gets an error of its own)")

    def check(self) -> None:
        super().check()
        if not 0 < self.port < 65536:
            raise ValueError(f"port must be in 1-65535, got {self.port}")
        if self.retrain_every < 0:
            raise ValueError(f"retrain_every must be 0 (only on demand) or more, got {self.retrain_every}")
        if not 0.0 < self.dev_share < 1.0:
            raise ValueError(f"dev_share must be between 0 and 1 (exclusive), got {self.dev_share}")
        for name in ("batch_size", "max_tasks", "max_text_chars"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.label_studio_url is not None and not self.label_studio_url.startswith(("http://", "https://")):
            raise ValueError(f"label_studio_url must start with http:// or https://, got {self.label_studio_url!r}")

    @property
    def api_key(self) -> Optional[str]:
        """Label Studio's API key, from ``$LABEL_STUDIO_API_KEY`` (None without it)."""
        return os.environ.get(API_KEY_ENV) or None

    @property
    def wide_open(self) -> bool:
        """Listening beyond this machine (the protocol has no key of its own: Label Studio sends none)."""
        return self.host not in LOOPBACK

    def pipeline(self) -> PipelineOptions:
        return PipelineOptions(self.threshold, self.sentencizer, self.max_length, self.gpu_id)
