"""bertkit vs the HuggingFace Trainer and pipeline, on the same data, model and recipe (README.md).

    run           `python -m benchmarks run [--quick]`: every (workload, side) in its own process
    report        medians, ratios, MFU; results/{latest,quick}.{json,md}
    workloads     data loaders, the SQuAD article split, the identical-data check
    bertkit_side  the bertkit side through bertkit.api only
    hf_trainer    the three Trainer recipes (hf_default, hf_best, hf_best_bf16) and their Meter
    hf_sst2, hf_ner, hf_qa   the task-specific parts of the HF side (run_glue / run_ner / run_qa)
Standalone tools: profile_step, resume_overhead, serve_load, backends_speed.
"""
