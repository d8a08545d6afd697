"""The leaderboard of ``rpent-batch`` experiments: one row per arm of one or more results roots, read
from the run records, with published reference rows marked "published, not rerun here".

Modules: ``collect`` (the leaderboard document from results roots: per arm and per suite k/N with
Wilson intervals, wall time, tokens, cost, label success, per-cell record links, pairwise
Fisher/CMH comparisons), ``published`` (reference rows from a YAML file), ``html`` (the
self-contained static page), ``markdown`` (the same table for a docs page). The CLI is
``rpent-batch leaderboard`` (``rpent.cli.leaderboard``); ``rpent-tui`` shows it on its Leaderboard screen.
"""
