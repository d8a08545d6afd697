"""Batch experiments (``rpent-batch``): a task x seed x arm matrix of normal ``rpent`` runs on
shared services, with resume, provenance, reports (Wilson intervals) and comparisons (Fisher
exact, Cochran-Mantel-Haenszel).

Modules: ``executor`` (where runs execute: the :class:`~rpent.batch.executor.Executor` protocol
and the local subprocess executor).
"""

from rpent.batch.executor import CellJob, CellOutcome, Executor, LocalExecutor, create_executor, register_executor

__all__ = ["CellJob", "CellOutcome", "Executor", "LocalExecutor", "create_executor", "register_executor"]
