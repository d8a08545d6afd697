"""rpent test suite (a regular package, so ``tests.conftest`` is this one even where an installed distribution ships a top-level ``tests`` package)."""
