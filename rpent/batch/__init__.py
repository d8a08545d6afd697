"""Batch experiments (``rpent-batch``): a suite x task x seed x arm matrix of normal ``rpent`` runs
on shared services, with resume, provenance, reports (Wilson intervals) and comparisons (Fisher
exact per task, Cochran-Mantel-Haenszel overall).

Modules: ``matrix`` (arms, cells, keys, YAML), ``executor`` (where runs execute: the
:class:`~rpent.batch.executor.Executor` protocol and the local subprocess executor), ``records``
(results-root layout, ledger, run-record validation and attempt status), ``services`` (an arm's
shared VLA/SAM3), ``runner`` (resume, retries, progress), ``report``, ``compare``, ``stats``,
``lock`` (one runner per root), ``manifest`` (provenance). The CLI is ``rpent.cli.batch``.
"""

from rpent.batch.executor import CellJob, CellOutcome, Executor, LocalExecutor, create_executor, register_executor

__all__ = ["CellJob", "CellOutcome", "Executor", "LocalExecutor", "create_executor", "register_executor"]
