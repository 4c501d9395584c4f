"""Model directories: plain transformers files plus ``bertkit.json``, written all-or-nothing.

Everything about an output location is checked before any expensive work, so a mistake in the
path never costs a training run, and nothing is written when the check fails.

``bertkit.json`` (schema 2) has the same top-level keys for every kind of directory, in this order;
a section that does not apply to a kind is null (or empty), never missing:

    schema, kind ("finetune" | "probe" | "pretrain"), bertkit_version, task, base_model,
    data {name, train, data_dir, eval, eval_file, train_examples, eval_examples},
    config, metrics, best_epoch, best_step, resumed_from, history, throughput, preprocessing,
    stopped_early, runtime, versions, eval_details, before, probe, pretraining, seeds, tune, folds

``config`` holds the command's own settings (TrainConfig for finetune and pretrain; mlm examples
are documents). Null for a kind: probe (no training loop) has no best_*, resumed_from,
preprocessing, stopped_early, eval_details and an empty history; pretrain has no resumed_from
or eval_details; only pretrain has ``before`` (held-out metrics of the starting model) and
``pretraining``, only probe has ``probe``; ``seeds`` and ``folds`` only after ``finetune --seeds``
and ``--folds``, ``tune`` only from ``bertkit tune``. Files without ``schema`` are version 1 (keys
varied by command): load_meta upgrades them in memory, and update_meta writes them back as
version 2 (``seeds``, ``tune`` and ``folds``, added later, read as null where absent).

Siblings of a model directory OUT: ``OUT.checkpoints/`` (resumable training state), ``OUT.logs/``
(trackers), ``OUT.seeds/`` (``finetune --seeds``: one run per seed), ``.OUT.partial-<pid>-<random>/``
(being written) and ``.OUT.old/`` (the previous model during a replace), all named here; and
``OUT.folds/`` and ``OUT.tune/`` (one run per fold or trial, the study), named by their commands
(bertkit.api.folds, bertkit.api.tuning).

What bertkit wrote is known (ownership.py: a manifest in each directory it makes beside a model,
a model directory's own names), and removal.py, the only module that deletes, removes nothing else.
"""

from bertkit.model_dir.files import (  # noqa: F401  (the package's public names)
    META_FILE,
    PROBE_HEAD_FILE,
    atomic_file,
    check_inputs_kept,
    check_output_dir,
    check_output_file,
    check_sibling_dir,
    checkpoint_root,
    logging_dir,
    replace_dir,
    run_names,
    seeds_root,
    staged_output,
    staging_prefix,
    trash_dir,
    write_json,
    write_text,
)
from bertkit.model_dir.meta import (  # noqa: F401  (the package's public names)
    DATA_KEYS,
    KINDS,
    META_KEYS,
    SCHEMA,
    ModelMeta,
    bertkit_version,
    data_record,
    library_versions,
    load_meta,
    recorded_eval_data,
    save_model_dir,
    update_meta,
    upgrade_meta,
)
