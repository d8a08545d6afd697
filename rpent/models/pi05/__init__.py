"""Our own Pi0.5 (pi05) inference in PyTorch.

Modules (one concept each):
    config        architecture dimensions, full and tiny presets, parameter counts (no allocation)
    checkpoint    checkpoint directory verification (OK/MISS list), tensor key schema, strict loading
    siglip        SigLIP so400m/14 image encoder + projector
    gemma         Gemma-2B prefix (K/V cache) and Gemma-300M action expert with adaRMS
    model         Pi05Model: flow-matching sampling with the prefix cache reused by every step
    normalization norm_stats.json quantile (q01/q99) normalisation
    tokenizer     PaliGemma SentencePiece prompts (with or without discrete state)
    processor     observation -> model inputs, model outputs -> env actions (conventions documented)
    embodiments   serving presets libero / dual_franka / yam and their output transforms
    settings      preset + overrides + seed 003's config checks
    fused         fused layer ops: Triton kernels on CUDA, PyTorch references elsewhere
    triton_kernels  the Triton kernels themselves (imported lazily by fused)
    fp8           FP8 (E4M3, per-channel) Gemma weights: quantisation, Fp8Linear, device check, FP8 checkpoints
    fused_linear  the linear layers' dispatch: cuBLAS, FP8 tensor cores, the few-row expert kernel
    linear_kernels  Triton kernels of the few-row linear layers and of the FP8 activations
    sampling      Pi05Runner: batch buckets, prompt padding, CUDA graphs
    batching      DynamicBatcher for concurrent clients
    policy        Pi05Policy: checkpoint + tokenizer + stats + runner behind predict()
    apxinf        ApxInfPolicy: the same predict stages through APXinf-robo's L1 bare-model API
    tiny          tiny checkpoints/tokenizer/observations for tests (no downloads)

Nothing is imported here, so ``import rpent.models.pi05.settings`` stays light (no torch).
"""
