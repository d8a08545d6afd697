"""Task memory: the layered corpus planners read and exploration writes (RPent reference §6.2)."""

from rpent.memory.layout import corpus_dir, default_memory_dir

__all__ = ["corpus_dir", "default_memory_dir"]
