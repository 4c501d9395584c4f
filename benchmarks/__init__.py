"""Benchmark suite comparing bertkit with the HuggingFace Trainer recipe.

Modules:
    workloads  -- loaders for the real data under $BERTKIT_DATA_DIR (SST-2, CoNLL-2003, SQuAD v1.1)
    baselines  -- HF Trainer baselines (run_glue / run_ner style), pipeline timing, matmul peak
    hf_qa      -- HF Trainer baseline in the run_qa.py style, plus the utils_qa post-processing loop
    bertkit_side -- the same workloads through bertkit.api (bk_sst2, bk_ner, bk_qa, bk_predict, decode_compare)
    run        -- `python -m benchmarks run [--quick]`: runs both sides, writes results/{latest,quick}.{json,md}
"""
