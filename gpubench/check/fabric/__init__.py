"""The fabric between nodes: schedules of node pairs (schedule), racks (racks), judging (judge), the driver (drive)."""
