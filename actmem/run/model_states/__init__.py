"""Per stage, the model states: weights, gradients and optimizer states, and what FSDP2, LoRA and FP8 change in them."""
