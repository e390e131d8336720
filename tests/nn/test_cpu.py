"""nn/cpu.py: what the CPU can do, from /proc/cpuinfo's flags or torch's probes."""
import io

import pytest
import torch

from spacy_w2ner.nn import cpu


@pytest.fixture
def cpuinfo(monkeypatch):
    """Make nn.cpu read the given /proc/cpuinfo text (None: a system without one)."""

    def use(text):
        def fake_open(path, *args, **kwargs):
            if text is None:
                raise OSError(path)
            return io.StringIO(text)

        monkeypatch.setattr(cpu, "open", fake_open, raising=False)
        cpu.bfloat16_instructions.cache_clear()

    yield use
    cpu.bfloat16_instructions.cache_clear()


def test_a_cpu_probe_that_is_missing_or_fails_says_no(monkeypatch):
    monkeypatch.delattr(torch.cpu, "_is_vnni_supported", raising=False)
    assert cpu.has_vnni() is False

    def failing() -> bool:
        raise RuntimeError("no cpuinfo")

    monkeypatch.setattr(torch.cpu, "_is_vnni_supported", failing, raising=False)
    assert cpu.has_vnni() is False


def test_bfloat16_instructions_are_read_from_the_flags_and_named(cpuinfo, monkeypatch):
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: True, raising=False)  # the flags win
    cpuinfo("model name\t: Some Xeon\nflags\t\t: fpu avx512f avx512_bf16\n")
    assert cpu.bfloat16_instructions() == ["AVX512-BF16"] and cpu.cpu_model() == "Some Xeon"
    cpuinfo("model name\t: Old EPYC\nflags\t\t: fpu avx2\n")
    assert cpu.bfloat16_instructions() == []


def test_without_proc_cpuinfo_torchs_probes_answer(cpuinfo, monkeypatch):
    cpuinfo(None)
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False, raising=False)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: True, raising=False)
    assert cpu.bfloat16_instructions() == ["AMX-BF16"]


def test_bfloat16_counts_as_native_on_x86_only_with_the_instructions(cpuinfo, monkeypatch):
    cpuinfo("flags\t\t: fpu avx2\n")
    monkeypatch.setattr(cpu.platform, "machine", lambda: "x86_64")
    assert not cpu.bfloat16_is_native()
    cpuinfo("flags\t\t: fpu amx_bf16\n")
    assert cpu.bfloat16_is_native()
    cpuinfo("flags\t\t: fpu avx2\n")
    monkeypatch.setattr(cpu.platform, "machine", lambda: "aarch64")  # nothing tells there: not warned
    assert cpu.bfloat16_is_native()


def test_a_cpu_is_described_with_its_bfloat16_instructions():
    features = {"model": "AMD EPYC", "avx512": True, "vnni": True, "bfloat16": ["AVX512-BF16"], "activation_bits": 8}
    assert cpu.describe_cpu(features) == "AMD EPYC (AVX-512: yes, VNNI: yes, bfloat16: AVX512-BF16)"
    assert cpu.describe_cpu({**features, "bfloat16": []}).endswith("bfloat16: no)")
    old_record = {key: value for key, value in features.items() if key != "bfloat16"}
    assert cpu.describe_cpu(old_record) == "AMD EPYC (AVX-512: yes, VNNI: yes)"


def test_the_cpus_flags_are_the_first_processors_and_answer_the_bfloat16_question(cpuinfo):
    cpuinfo("processor\t: 0\nmodel name\t: Some Xeon\nflags\t\t: fpu avx2 amx_bf16\n\nprocessor\t: 1\nflags\t\t: other\n")
    assert cpu.cpu_flags() == ["fpu", "avx2", "amx_bf16"] and cpu.bfloat16_instructions() == ["AMX-BF16"]
    cpuinfo(None)
    assert cpu.cpu_flags() == []
