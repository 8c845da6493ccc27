"""The pin chain: the fork head and its diagnosis, the consumers' pins, the checks, the bump."""
