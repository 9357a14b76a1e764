"""Per-device speeds for the step-time model: peak FLOPs, memory and link bandwidths (estimate/data/)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Speeds:
    """One device's speeds in SI units (FLOP/s, bytes/s)."""

    name: str
    flops: float  # dense bf16 peak
    gemm_efficiency: float  # share of the peak large bf16 matrix multiplies reach (an assumption)
    hbm: float  # memory bandwidth
    intra_node: float  # one direction of the scale-up link, per device
    inter_node: float  # one direction of the per-device NIC
    host: float  # one direction of the host link (offload)
    devices_per_node: int
    source: str
    fp8_flops: float | None = None  # dense FP8 peak (None: the device has no FP8 tensor cores)
    # share of ``intra_node`` an EP all-to-all reaches: DeepEP's measured dispatch / combine bandwidth over the link's
    # one-direction figure (estimate/data/device_speeds.json cites them); 1 where no measurement is known
    a2a_intra_efficiency: float = 1.0

    @property
    def achieved_flops(self) -> float:
        return self.flops * self.gemm_efficiency


@cache
def _table() -> dict[str, dict]:
    return json.loads((Path(__file__).with_name("data") / "device_speeds.json").read_text())["devices"]


def speeds_for(name: str) -> Speeds:
    """The speeds of a device of memory/data/devices.json (same names); KeyError for a device without speeds."""
    row = _table()[name]
    return Speeds(
        name,
        row["bf16_dense_tflops"] * 1e12,
        row["gemm_efficiency"],
        row["hbm_gbps"] * 1e9,
        row["intra_node_gbps"] * 1e9,
        row["inter_node_gbit"] * 1e9 / 8,
        row["host_gbps"] * 1e9,
        row["devices_per_node"],
        row["source"],
        row["fp8_dense_tflops"] * 1e12 if row.get("fp8_dense_tflops") else None,
        row.get("a2a_intra_efficiency") or 1.0,
    )


def names() -> list[str]:
    return list(_table())
