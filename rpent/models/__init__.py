"""Model implementations owned by rpent (pure PyTorch, no hub access).

Sub-packages:
    pi05: our own Pi0.5 (pi05) vision-language-action inference (SigLIP + Gemma-2B prefix +
          Gemma-300M action expert, flow matching), checkpoint loading and preprocessing.
"""
