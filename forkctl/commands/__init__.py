"""One module per verb; each exposes a click command named `command` (the registry is forkctl/cli/verbs.py)."""
