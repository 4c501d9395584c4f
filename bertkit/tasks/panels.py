"""The --help panels of the tasks' own flags, by purpose (a TaskOption's ``panel``). Its own module,
free of imports, so the command line reads the names without importing a task."""

READING_PANEL = "Reading the data: columns and formats"
LABEL_KINDS_PANEL = "Label kinds: single-label, multi-label, regression"
LOSS_PANEL = "Loss"
RECIPE_PANEL = "Recipe: fine-tune, or SetFit for few labelled rows"
LONG_TEXT_PANEL = "Long texts"
TASK_PANEL = "Task options"  # what fits no other panel (a plug-in task's options, by default)
