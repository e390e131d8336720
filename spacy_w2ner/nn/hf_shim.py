"""spacy-transformers' HFShim with w2ner's shim (``shim.py``: the fused optimizer step, the half dtype),
and with int8 Linear layers for CPU inference (``int8.py``).

A module of its own so that importing ``shim`` does not import spacy-transformers, and so
that the classes pickle by name (``spacy_w2ner.nn.hf_shim.FusedHFShim``, ``Int8HFShim``).
"""
import io
import pickletools
import re
import warnings
import zipfile
from typing import List, Tuple

import srsly

from spacy_transformers.layers.hf_shim import HFShim
from transformers import AutoModel

from .bfloat16 import BFloat16Passes
from .shim import FusedUpdate, torch_module
from .int8 import fewer_bits_warning, int8_layer_names, quantize_linear_layers

INT8_CANNOT_TRAIN = (
    "this pipeline's encoder has int8 layers (int8_layers), which are for inference on a CPU: "
    "train the float32 pipeline it was made from (int8_layers = []), then run "
    "'python -m spacy_w2ner optimize' again"
)


class FusedHFShim(FusedUpdate, HFShim):
    """HFShim whose ``finish_update`` is one fused Adam step over the encoder's tensors, and
    whose encoder loads with the config it was saved with.

    ``HFShim.from_bytes`` writes the saved config to a JSON file with ``srsly.write_json``,
    which keeps 10 decimals: MiniLM's ``layer_norm_eps`` of 1e-12 came back as 0.0 (and
    ``_name_or_path`` as the temporary file), so a pipeline loaded, or a training run resumed
    from a checkpoint, saved another config than it was given. Here the config read from that
    file gets the saved floats and name back before the encoder is built from it. A state with
    int8 layers is refused (``Int8HFShim`` loads it)."""

    def from_bytes(self, bytes_data):
        message = srsly.msgpack_loads(bytes_data)  # read once here: an MPNet state is 400 MB
        self._expect_int8_layers(saved_int8_layers(message.get("state") or b""))
        saved, message = message.get("config") or {}, None
        config_cls = self.config_cls
        self.config_cls = _SavedConfig(config_cls, saved)
        try:
            return super().from_bytes(bytes_data)
        finally:
            self.config_cls = config_cls

    def _expect_int8_layers(self, names: List[str]) -> None:
        """ValueError for a saved state with int8 layers: loaded into this encoder's float layers,
        they would keep ``from_config``'s random weights."""
        if names:
            raise ValueError(
                f"this pipeline's saved encoder has {len(names)} int8 layers (e.g. {names[0]}), and its config "
                "names none: put back the spacy_w2ner.ChunkedTransformerModel.v2 block with the int8_layers "
                "'optimize' wrote"
            )


class Int8HFShim(FusedHFShim):
    """An HFShim whose encoder has int8 Linear layers (those ``int8_layers`` matches).

    The saved state is the int8 one (about a quarter of the float32 size for those layers):
    ``from_bytes`` builds the encoder from its config, makes the layers the state holds as int8
    int8, loads the state, then makes int8 any more layers ``int8_layers`` matches (a config
    edited by hand); a state whose int8 layers ``int8_layers`` does not match is refused, since
    int8 weights cannot become float32 again. An encoder set from float32 weights (a new
    pipeline) is made int8 before it first predicts or is saved. CPU only; it does not train
    (``INT8_CANNOT_TRAIN``).
    """

    int8_layers: Tuple[str, ...] = ()  # set per shim by ChunkedTransformerModel.v2
    _saved_int8_layers: Tuple[str, ...] = ()  # while from_bytes loads a state: its int8 layers

    @property
    def model_cls(self):
        """The encoder class ``HFShim.from_bytes`` builds from the saved config: with the
        saved state's int8 layers made int8 before the state is loaded."""
        base = self.__dict__.get("model_cls", AutoModel)
        if not self._saved_int8_layers:
            return base
        return _Int8Builder(base, [f"^{re.escape(name)}$" for name in self._saved_int8_layers])

    @model_cls.setter
    def model_cls(self, value) -> None:
        self.__dict__["model_cls"] = value

    _int8_model = None  # the encoder module last made (or found) int8

    def make_int8(self) -> None:
        """Make the encoder's matched Linear layers int8 (once per encoder module); ValueError on a GPU."""
        module = torch_module(self)
        if module is None or module is self._int8_model:
            return
        if next(module.parameters()).device.type != "cpu":
            raise ValueError("int8 layers run on a CPU only: use the float32 pipeline on a GPU")
        quantize_linear_layers(module, self.int8_layers)  # the float Linear layers matched
        warning = fewer_bits_warning(int8_layer_names(module))
        if warning:
            warnings.warn(warning, stacklevel=2)
        self._int8_model = module

    def predict(self, inputs):
        self.make_int8()
        return super().predict(inputs)

    def begin_update(self, inputs):
        raise ValueError(INT8_CANNOT_TRAIN)

    def to_bytes(self):
        self.make_int8()
        return super().to_bytes()

    def _expect_int8_layers(self, names: List[str]) -> None:
        """The saved state's int8 layers are built int8 before it loads; ValueError where the
        config does not match one of them (int8 weights cannot become float32 again)."""
        unmatched = [name for name in names if not any(re.search(p, name) for p in self.int8_layers)]
        if unmatched:
            raise ValueError(
                f"this pipeline's saved encoder has {len(names)} int8 layers, and its config's int8_layers "
                f"{list(self.int8_layers)} do not match {len(unmatched)} of them (e.g. {unmatched[0]}): int8 "
                "weights cannot become float32 again; put int8_layers back as 'optimize' wrote it, or optimize "
                "the float32 pipeline with the layers you want ('python -m spacy_w2ner optimize --int8 ...')"
            )
        self._saved_int8_layers = tuple(names)

    def from_bytes(self, bytes_data):
        try:
            with warnings.catch_warnings():  # torch.load's notice about the quantized tensors' storage
                warnings.filterwarnings("ignore", message="TypedStorage is deprecated")
                shim = super().from_bytes(bytes_data)
        finally:
            self._saved_int8_layers = ()
        self.make_int8()  # float32 layers the config matches (a config edited by hand) become int8 now
        return shim


PACKED_WEIGHTS = "._packed_params._packed_params"  # an int8 Linear layer's key suffix in a state dict


def saved_int8_layers(state: bytes) -> List[str]:
    """The names of the int8 (packed) Linear layers in an HFShim's serialized state (its message's
    "state"): the state dict's keys read from the pickle of ``torch.save``'s archive, without
    loading the tensors."""
    try:
        with zipfile.ZipFile(io.BytesIO(state)) as archive:
            pickles = [archive.read(name) for name in archive.namelist() if name.endswith("data.pkl")]
    except zipfile.BadZipFile:
        return []
    keys = (arg for data in pickles for _, arg, _ in pickletools.genops(data) if isinstance(arg, str))
    return [key[: -len(PACKED_WEIGHTS)] for key in keys if key.endswith(PACKED_WEIGHTS)]


class _Int8Builder:
    """Stands in for ``AutoModel`` in ``HFShim.from_bytes``: builds the encoder, then makes it int8."""

    def __init__(self, model_cls, patterns: List[str]):
        self.model_cls = model_cls
        self.patterns = patterns

    def from_config(self, config, **kwargs):
        from thinc.api import get_torch_default_device

        if get_torch_default_device().type != "cpu":
            raise ValueError("this pipeline's encoder has int8 layers, which run on a CPU only: load it "
                             "without a GPU (no --gpu-id, no spacy.require_gpu), or use the float32 pipeline")
        model = self.model_cls.from_config(config, **kwargs)
        quantize_linear_layers(model, self.patterns)
        return model


class _SavedConfig:
    """Stands in for ``AutoConfig`` in ``HFShim.from_bytes``: the config from its JSON file,
    with the saved dict's floats and ``_name_or_path`` where the file changed them."""

    def __init__(self, config_cls, saved: dict):
        self.config_cls = config_cls
        self.saved = saved

    def from_pretrained(self, path, **kwargs):
        config = self.config_cls.from_pretrained(path, **kwargs)
        for key, value in self.saved.items():
            if (isinstance(value, float) or key == "_name_or_path") and getattr(config, key, None) != value:
                setattr(config, key, value)
        return config


class BFloat16HFShim(BFloat16Passes, FusedHFShim):
    """The encoder's shim in bfloat16 (training or inference; ``nn.bfloat16``)."""
