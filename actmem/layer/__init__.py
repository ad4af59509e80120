"""One layer on one GPU: its settings, the ledger of saved tensors, the bytes
per layer and the paper's closed forms. Knows nothing of pipelines or optimizers."""
