"""Upstream's own lint (the hooks of its pre-commit configuration) on the fork head against the base."""
