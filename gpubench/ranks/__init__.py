"""Multi-process runs (the ``comm`` suite): launcher detection, the ranks' group, and gpubench's own spawner."""
