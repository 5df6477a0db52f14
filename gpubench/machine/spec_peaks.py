"""Spec peak TFLOP/s of common data-center GPUs, dense (no 2:4 sparsity), per gpubench dtype name.

What a vendor quotes is the ceiling a percent-of-peak is taken against, so every entry names where its
figures come from. NVIDIA datasheets print the tensor-core rates *with sparsity* (marked ``*``); the dense
rate is half of that, and that half is what is stored here. A figure this module is not sure of is left out:
the lookup then answers ``None`` and the gemm suite reports the peak as unknown rather than a guess (a wrong
peak is worse than none: torchtitan once fell back to A100's 312 TF/s for an unknown GPU and showed 152% MFU).

Which unit a dtype's peak is taken from follows what a GEMM of that dtype runs on:
- ``fp64``: the FP64 tensor cores (matrix cores on AMD), which cuBLAS/hipBLASLt DGEMM use, not the vector rate;
- ``fp32``: NVIDIA's plain FP32 rate (SGEMM with TF32 off runs on the FMA units); AMD's FP32 matrix rate;
- ``tf32``: TF32 tensor cores (AMD: the "TF32" matrix rate of CDNA 3; CDNA 2 has none);
- ``fp16``/``bf16``: tensor/matrix cores with FP32 accumulation;
- ``fp8``: e4m3 tensor/matrix cores.

Left out on purpose: H100 NVL, H200 NVL and GH200 (other clocks and power; not checked against their
datasheets here), B200 (figures differ between SKUs and power levels), MI250 (non-X) and devices that report
the ambiguous "MI250X/MI250".
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Peak:
    gpu: str  # the part the figures are for
    tflops: Mapping[str, float]  # gpubench dtype name -> dense TFLOP/s; a dtype missing here is unknown
    source: str  # where the figures come from
    # For the roofline (gpubench/report/roofline.py): device-memory bandwidth in GB/s (1e9), and the plain vector
    # (non-tensor) rates that an elementwise kernel's multiply-adds run at; None / missing where not sure.
    memory_gbps: float | None = None
    vector_tflops: Mapping[str, float] = field(default_factory=dict)
    memory_source: str = ""


_HOPPER_SXM = {"fp64": 66.9, "fp32": 66.9, "tf32": 494.7, "fp16": 989.4, "bf16": 989.4, "fp8": 1978.9}
# H100 whitepaper, "Comparison of NVIDIA Data Center GPUs" table, non-Tensor rows (SXM5 / PCIe).
_HOPPER_SXM_VECTOR = {"fp64": 33.5, "fp32": 66.9, "fp16": 133.8, "bf16": 133.8}
_HOPPER_PCIE_VECTOR = {"fp64": 25.6, "fp32": 51.2, "fp16": 102.4, "bf16": 102.4}
_CDNA3 = {"fp64": 163.4, "fp32": 163.4, "tf32": 653.7, "fp16": 1307.4, "bf16": 1307.4, "fp8": 2614.9}

PEAKS: dict[str, Peak] = {
    "H100 SXM": Peak(
        "NVIDIA H100 SXM5",
        _HOPPER_SXM,
        "NVIDIA H100 Tensor Core GPU Architecture whitepaper, H100 SXM5 column (dense; the datasheet rounds to "
        "FP64 Tensor 67, FP32 67, TF32 989*, BF16/FP16 1,979*, FP8 3,958* with * = with sparsity)",
        memory_gbps=3350.0, vector_tflops=_HOPPER_SXM_VECTOR,
        memory_source="NVIDIA H100 datasheet, SXM: GPU memory bandwidth 3.35 TB/s",
    ),
    "H100 PCIe": Peak(
        "NVIDIA H100 PCIe",
        {"fp64": 51.0, "fp32": 51.0, "tf32": 378.0, "fp16": 756.5, "bf16": 756.5, "fp8": 1513.0},
        "NVIDIA H100 datasheet, PCIe column: FP64 Tensor 51, FP32 51, TF32 756*, BF16/FP16 1,513*, "
        "FP8 3,026* (* with sparsity, halved here)",
        memory_gbps=2000.0, vector_tflops=_HOPPER_PCIE_VECTOR,
        memory_source="NVIDIA H100 datasheet, PCIe: GPU memory bandwidth 2 TB/s",
    ),
    "H200": Peak(
        "NVIDIA H200 SXM",
        _HOPPER_SXM,
        "NVIDIA H200 datasheet, H200 SXM column: FP64 Tensor 67, FP32 67, TF32 989*, BF16/FP16 1,979*, FP8 3,958* "
        "(* with sparsity, halved); same GH100 silicon and clocks as H100 SXM5, whose whitepaper gives the "
        "unrounded dense figures used here",
        memory_gbps=4800.0, vector_tflops=_HOPPER_SXM_VECTOR,
        memory_source="NVIDIA H200 datasheet, SXM: GPU memory bandwidth 4.8 TB/s",
    ),
    "A100": Peak(
        "NVIDIA A100 (SXM4 and PCIe, 40 and 80 GB)",
        {"fp64": 19.5, "fp32": 19.5, "tf32": 156.0, "fp16": 312.0, "bf16": 312.0},
        "NVIDIA A100 Tensor Core GPU datasheet: FP64 Tensor 19.5, FP32 19.5, TF32 156 (312*), BF16/FP16 312 "
        "(624*); the same for the SXM and PCIe parts; no FP8",
        # Memory bandwidth differs between the 40 GB and 80 GB, SXM and PCIe parts: left unknown.
        vector_tflops={"fp64": 9.7, "fp32": 19.5, "fp16": 78.0, "bf16": 39.0},
    ),
    "L40S": Peak(
        "NVIDIA L40S",
        {"fp32": 91.6, "tf32": 183.0, "fp16": 362.05, "bf16": 362.05, "fp8": 733.0},
        "NVIDIA L40S datasheet: FP32 91.6, TF32 183 (366*), BF16/FP16 362.05 (733*), FP8 733 (1,466*); "
        "no FP64 tensor rate listed",
        memory_gbps=864.0, vector_tflops={"fp32": 91.6},
        memory_source="NVIDIA L40S datasheet: memory bandwidth 864 GB/s",
    ),
    "MI300X": Peak(
        "AMD Instinct MI300X",
        _CDNA3,
        "AMD Instinct MI300X data sheet (dense; sparsity listed separately): FP64 matrix 163.4, FP32 matrix "
        "163.4, TF32 653.7, FP16/BF16 1,307.4, FP8 2,614.9",
        memory_gbps=5300.0, memory_source="AMD Instinct MI300X data sheet: peak memory bandwidth 5.3 TB/s",
    ),
    "MI325X": Peak(
        "AMD Instinct MI325X",
        _CDNA3,
        "AMD Instinct MI325X data sheet: same CDNA 3 compute and 2100 MHz peak clock as MI300X (FP64 matrix "
        "163.4, FP32 163.4, TF32 653.7, FP16/BF16 1,307.4, FP8 2,614.9)",
        memory_gbps=6000.0, memory_source="AMD Instinct MI325X data sheet: peak memory bandwidth 6 TB/s",
    ),
    "MI250X": Peak(
        "AMD Instinct MI250X, one GCD",
        {"fp64": 47.85, "fp32": 47.85, "fp16": 191.5, "bf16": 191.5},
        "AMD Instinct MI250X data sheet: FP64/FP32 matrix 95.7, FP16/BF16 383.0 for the package of two GCDs; "
        "halved here because torch sees each GCD as one device; no TF32 or FP8 in CDNA 2",
        memory_gbps=1638.4,
        memory_source="AMD Instinct MI250X data sheet: 3.2768 TB/s for the package, halved per GCD",
    ),
}

# Device name (torch.cuda.get_device_properties().name) -> PEAKS key; the first pattern that matches wins, and
# None means "known, but not in the table". Word boundaries keep GH200 from matching H200 and A10 from A100.
_NAMES: tuple[tuple[re.Pattern, str | None], ...] = tuple(
    (re.compile(p, re.IGNORECASE), key)
    for p, key in (
        (r"\bH100\b.*\bNVL\b", None),
        (r"\bH100\b.*\bPCIe\b", "H100 PCIe"),
        (r"\bH100\b.*(\bSXM|\bHBM3\b)", "H100 SXM"),  # "NVIDIA H100 80GB HBM3" is the SXM5 part
        (r"\bH200\b.*\bNVL\b", None),
        (r"\bH200\b", "H200"),  # "NVIDIA H200" is the SXM part
        (r"\bA100\b", "A100"),  # "NVIDIA A100-SXM4-80GB", "NVIDIA A100-PCIE-40GB", "NVIDIA A100 80GB PCIe"
        (r"\bL40S\b", "L40S"),
        (r"\bMI300X\b", "MI300X"),
        (r"\bMI325X\b", "MI325X"),
        (r"MI250X\s*/\s*MI250\b", None),  # can't tell the two apart
        (r"\bMI250X\b", "MI250X"),
    )
)


def lookup(device_name: str | None) -> Peak | None:
    """The spec peaks of the GPU called ``device_name``, or None where it is not in the table."""
    for pattern, key in _NAMES:
        if device_name and pattern.search(device_name):
            return PEAKS[key] if key else None
    return None


def peak_tflops(device_name: str | None, dtype: str) -> tuple[float, str] | None:
    """(dense TFLOP/s, source) of ``dtype`` GEMMs on ``device_name``; None when unknown."""
    peak = lookup(device_name)
    if peak is None or dtype not in peak.tflops:
        return None
    return peak.tflops[dtype], peak.source


__all__ = ["Peak", "PEAKS", "lookup", "peak_tflops"]
