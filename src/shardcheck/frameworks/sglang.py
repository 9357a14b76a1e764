"""The SGLang server a framework starts for its rollout, framework-neutral (SGLang 0.5.12).

A framework says how it fills SGLang's ``ServerArgs`` (``tp_size``, ``dp_size``, ``ep_size``,
``enable_dp_attention``) and which of its settings those come from; the SGLANG-* rules judge the
server. Inside SGLang the attention is split over ``attn_tp_size = tp_size / dp_size`` ranks with
DP attention and over all ``tp_size`` ranks without it (sglang/srt/layers/dp_attention.py
``compute_dp_attention_world_info``).
"""

from __future__ import annotations

from dataclasses import dataclass

from shardcheck.origin import Traced

# Model types whose SGLang 0.5.12 attention splits heads over attn_tp_size (sglang/srt/models/*.py
# call get_attention_tp_size); the others (llama, qwen2, mixtral, ...) split over the whole tp_size.
ATTN_TP_MODELS = frozenset(
    {
        "qwen3",
        "qwen3_moe",
        "qwen2_moe",
        "qwen3_next",
        "qwen3_5",
        "qwen3_vl",
        "deepseek_v2",
        "deepseek_v3",
        "kimi_k2",
        "glm4_moe",
        "gpt_oss",
        "llama4",
        "bailing_moe",
        "minimax_m2",
        "exaone4",
        "longcat_flash",
        "kimi_linear",
        "step3p5",
        "phimoe",
        "mimo_v2",
        "sarvam_moe",
        "falcon_h1",
    }
)


@dataclass(frozen=True, slots=True, kw_only=True)
class SglangServer:
    """One SGLang server as the framework starts it, with the settings each size comes from."""

    tp_size: int
    dp: int
    ep: int | None
    dp_attention: bool
    sizes: tuple[Traced, ...]  # the settings tp_size comes from (a finding points at the first written one)
    ep_setting: Traced
    dp_attention_setting: Traced
    tp_said: str  # how tp_size comes about, e.g. "rollout TP 2 · DP 2 = 4"
    dp_attention_key: str  # the setting that turns DP attention on, as the user writes it
    attention_tp_said: str  # the attention TP with DP attention on, e.g. "rollout TP 4"
    ep_said: str  # how the EP comes about, for a fix

    @property
    def dp_attention_on(self) -> bool:
        return self.dp_attention and self.dp > 1  # ServerArgs._handle_data_parallelism: off when dp_size == 1

    def attn_tp(self, model_type: str | None) -> int:
        if self.dp_attention_on and model_type in ATTN_TP_MODELS:
            return self.tp_size // self.dp
        return self.tp_size

    def split_text(self) -> str:
        if self.dp_attention_on:
            return f"attention TP = tp_size {self.tp_size} / dp_size {self.dp} with DP attention"
        return f"SGLang tp_size = {self.tp_said}"
