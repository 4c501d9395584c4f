"""Small torch modules the commands build around an encoder: pooled embeddings (embed, probe),
masked-LM masking and scoring (pretrain mlm), the loss wrappers, the padding collator and exact
shortcuts (first_token_head.py). The probe's own head lives with the probe (bertkit/probing).

Tasks sit below this package and name the parts they train with through
``bertkit.tasks.network_parts``; ``bind_task_parts`` binds every one of them."""


def bind_task_parts() -> None:
    """Bind the parts the torch-free tasks name (bertkit/tasks/network_parts.py) to their classes
    and functions: each defining module binds its own on import."""
    from bertkit.networks import losses, masking  # noqa: F401
