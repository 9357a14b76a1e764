"""Per-device memory estimate: exact parameter counts, activations, optimizer, rollout KV cache, host."""
