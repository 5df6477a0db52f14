"""The fabric between nodes (``gpubench check --fabric``): which node, NIC or link of an allocation is slow."""
