"""Small torch modules the commands build around an encoder: pooled embeddings (embed, probe),
masked-LM masking and scoring (pretrain mlm), the loss wrappers, the padding collator and exact
shortcuts (first_token_head.py). The probe's own head lives with the probe (bertkit/probing).

Tasks sit below this package and say what they train with as plain data (a TrainingSpec,
bertkit/tasks/training_spec.py); ``recipes.py`` builds the torch modules from it."""
