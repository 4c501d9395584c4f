"""Small torch modules the commands build around an encoder: pooled embeddings (embed, probe),
the probe's linear head, masked-LM masking and scoring (pretrain mlm)."""
