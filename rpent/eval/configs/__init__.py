"""Shipped ``rpent-eval`` configs (YAML); a package so that the files install with rpent."""
