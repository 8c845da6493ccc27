"""The offline demo chain, built from the installed megatron-core."""
