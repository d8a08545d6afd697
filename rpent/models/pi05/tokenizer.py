"""Pi0.5 prompt tokenisation with the PaliGemma SentencePiece model.

Prompt formats (openpi ``src/openpi/models/tokenizer.py``, ``PaligemmaTokenizer.tokenize``):

* without state (``discrete_state_input=False``; openpi ``pi05_libero``, RLinf, ``lerobot/pi05_libero_base``):
  ``[BOS] + sp(clean(task)) + sp("\\n")`` - the newline is tokenised on its own as the "start of answer".
* with state (``discrete_state_input=True``; e.g. ``pi05_yam_joint``, lerobot's own fine-tunes):
  ``[BOS] + sp("Task: {clean(task)}, State: {b0 b1 ...};\\nAction: ")`` where the normalised state is
  put into 256 bins: ``np.digitize(s, linspace(-1, 1, 257)[:-1]) - 1``.

``clean(task)`` = strip, "_" -> " ", "\\n" -> " ". Prompts are returned at their exact length (no padding
to max_token_len=200); longer prompts are an error rather than a silent truncation.
"""

from __future__ import annotations

import hashlib
import os
import warnings
from functools import lru_cache
from pathlib import Path

import numpy as np

from rpent.models.pi05.checkpoint import PALIGEMMA_TOKENIZER_SHA256


class TokenizerError(ValueError):
    """The tokenizer model cannot be loaded, or a prompt does not fit."""


def clean_task(task: str) -> str:
    """openpi's prompt cleaning: strip, underscores and newlines to spaces."""
    return task.strip().replace("_", " ").replace("\n", " ")


def discretize_state(state: np.ndarray) -> np.ndarray:
    """Normalised state [D] -> int bins [D]: ``np.digitize(state, linspace(-1, 1, 257)[:-1]) - 1``
    (values below -1 give -1, above 1 give 255: openpi's behaviour, kept as is)."""
    bins = np.linspace(-1.0, 1.0, 256 + 1)[:-1]
    return np.digitize(np.asarray(state, dtype=np.float64), bins=bins) - 1


class PromptTokenizer:
    """SentencePiece prompt tokenizer for Pi0.5.

    Args:
        model_path: the SentencePiece ``.model`` (``paligemma_tokenizer.model`` for real checkpoints).
        max_token_len: longest prompt accepted (200 for pi05).
        vocab_limit: token ids must be below this (the model's embedding rows); checked at load.

    Raises:
        TokenizerError: unreadable model file, or a vocabulary larger than the embedding.
    """

    def __init__(self, model_path: str | os.PathLike, max_token_len: int = 200, vocab_limit: int | None = None):
        import sentencepiece as spm

        p = Path(model_path)
        try:
            raw = p.read_bytes()
        except OSError as exc:
            raise TokenizerError(f"cannot read tokenizer model {p}: {exc}; pass --tokenizer-path to the PaliGemma SentencePiece model") from exc
        self.path = p
        self.sha256 = hashlib.sha256(raw).hexdigest()
        self.is_paligemma = self.sha256 == PALIGEMMA_TOKENIZER_SHA256
        try:
            self.sp = spm.SentencePieceProcessor(model_proto=raw)
        except Exception as exc:  # sentencepiece raises RuntimeError/OSError variants
            raise TokenizerError(f"{p} is not a SentencePiece model: {exc}") from exc
        self.vocab_size = self.sp.get_piece_size()
        if vocab_limit is not None and self.vocab_size > vocab_limit:
            raise TokenizerError(
                f"tokenizer {p} has {self.vocab_size} pieces but the model embeds only {vocab_limit}: wrong tokenizer for this checkpoint"
            )
        if vocab_limit == 257152 and not self.is_paligemma:
            warnings.warn(f"tokenizer {p} sha256 {self.sha256[:12]} is not the PaliGemma tokenizer ({PALIGEMMA_TOKENIZER_SHA256[:12]})", stacklevel=2)
        self.bos_id = self.sp.bos_id()
        if self.bos_id < 0:
            raise TokenizerError(f"tokenizer {p} has no BOS piece; Pi0.5 prompts start with BOS")
        self.max_token_len = max_token_len
        self._newline = tuple(self.sp.encode("\n"))
        self._encode_cached = lru_cache(maxsize=4096)(self._encode_text)

    def _encode_text(self, text: str) -> tuple[int, ...]:
        return tuple(self.sp.encode(text))

    def tokenize(self, task: str, state: np.ndarray | None = None) -> np.ndarray:
        """Token ids (int64 [T], exact length) for one prompt; ``state`` = normalised state or None.

        Raises:
            TokenizerError: the prompt is longer than max_token_len.
        """
        if not isinstance(task, str):
            raise TokenizerError(f"task description must be a str, got {type(task).__name__}")
        text = clean_task(task)
        if state is None:
            ids = (self.bos_id, *self._encode_cached(text), *self._newline)
        else:
            bins = " ".join(str(int(v)) for v in discretize_state(np.asarray(state).reshape(-1)))
            ids = (self.bos_id, *self._encode_cached(f"Task: {text}, State: {bins};\nAction: "))
        if len(ids) > self.max_token_len:
            raise TokenizerError(f"prompt has {len(ids)} tokens, more than max_token_len={self.max_token_len}: shorten the task description")
        return np.asarray(ids, dtype=np.int64)
