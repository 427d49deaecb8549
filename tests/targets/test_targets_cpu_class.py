"""The host's CPU class: from cpuinfo's vendor, family and model, a table of known classes,
else a generic name; it is what spec entries record and compare."""

from __future__ import annotations

import pytest

from mlirtune.interfaces.target import UNKNOWN_CLASS
from mlirtune.targets import NvidiaGPU, host_cpu
from mlirtune.targets.host_cpu import HostCPU

AMD, INTEL = "AuthenticAMD", "GenuineIntel"


@pytest.mark.parametrize(
    ("vendor", "family", "model", "expected"),
    [
        (AMD, 0x19, 0x11, "amd-zen4"),  # Genoa
        (AMD, 0x19, 0x1F, "amd-zen4"),
        (AMD, 0x19, 0x61, "amd-zen4"),  # Raphael
        (AMD, 0x19, 0x74, "amd-zen4"),  # Phoenix
        (AMD, 0x19, 0xA0, "amd-zen4"),  # Bergamo
        (AMD, 0x19, 0x01, "amd-zen3"),  # Milan
        (AMD, 0x19, 0x21, "amd-zen3"),  # Vermeer
        (AMD, 0x19, 0x50, "amd-zen3"),  # Cezanne
        (AMD, 0x1A, 0x02, "amd-zen5"),  # Turin
        (AMD, 0x1A, 0x44, "amd-zen5"),  # Granite Ridge
        (INTEL, 6, 0x8F, "intel-sapphire-rapids"),
        (INTEL, 6, 0xCF, "intel-emerald-rapids"),
        (INTEL, 6, 0xAD, "intel-granite-rapids"),
        (INTEL, 6, 0xAE, "intel-granite-rapids"),
        (INTEL, 6, 0x6A, "intel-ice-lake-sp"),
        (INTEL, 6, 0x6C, "intel-ice-lake-sp"),
        (INTEL, 6, 0x55, "intel-skylake-sp"),
    ],
)
def test_known_classes(vendor, family, model, expected):
    target = HostCPU(vendor=vendor, family=family, model_number=model)
    assert target.cpu_class() == target.hardware_class() == expected


@pytest.mark.parametrize(
    ("vendor", "family", "model", "expected"),
    [
        (INTEL, 6, 0x97, "intel-f6-m151"),  # Alder Lake: not in the table
        (INTEL, 6, 0x6B, "intel-f6-m107"),  # between the two Ice Lake SP models
        (AMD, 0x17, 0x31, "amd-f23-m49"),  # Zen 2 (Rome)
        ("HygonGenuine", 0x18, 0x01, "hygongenuine-f24-m1"),
        ("", 6, 0x8F, "unknown-f6-m143"),  # numbers without a vendor
        ("", 0, 0, UNKNOWN_CLASS),  # cpuinfo says nothing (e.g. aarch64)
    ],
)
def test_other_cpus_get_a_generic_class(vendor, family, model, expected):
    assert HostCPU(vendor=vendor, family=family, model_number=model).cpu_class() == expected


def test_vendor_family_and_model_are_read_from_cpuinfo(tmp_path, monkeypatch):
    monkeypatch.setattr(host_cpu.platform, "machine", lambda: "x86_64")
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(
        "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n"
        "model name\t: AMD EPYC 9654\nflags\t\t: sse2 avx avx2 fma avx512f\n"
    )
    features = host_cpu.read_features(cpuinfo, tmp_path / "no-cache")
    assert (features.vendor, features.family, features.model_number) == ("AuthenticAMD", 25, 17)
    assert HostCPU(features).cpu_class() == "amd-zen4"
    missing = host_cpu.read_features(tmp_path / "none", tmp_path / "none")
    assert HostCPU(missing).cpu_class() == UNKNOWN_CLASS


def test_the_class_is_not_part_of_the_fingerprint():
    """Tuning records stay keyed as before: a class is derived, not measured."""
    assert HostCPU(**{"family": 6}).fingerprint() == HostCPU(**{"family": 0x19}).fingerprint()


def test_targets_without_a_cpu_have_no_class():
    assert NvidiaGPU().hardware_class() == UNKNOWN_CLASS
