"""The job as given and checked: the model, its options, a GPU, and the ways in (Megatron-LM's arguments, a Hugging Face config)."""
