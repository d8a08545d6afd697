"""Console entry points (``rpent``, ``rpent-eval``, ``rpent-flywheel``, ``rpent-check-llm``)."""
