"""What the training commands share around the finetune spine (bertkit/api/finetuning.py): the run's
plan, checked before any model loads (plan.py), what finetune returns (result.py), results.json and
the evaluation's rows (results.py), the several runs of --seeds and --folds (repeats.py), bertkit
tune's search space (search_space.py), a wrapped run's default output (run_args.py)."""
