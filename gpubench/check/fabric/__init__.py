"""The fabric between nodes (``gpubench check --fabric``): schedules of node pairs (schedule), racks (racks), one
rank's exchange with its partner (exchange), the board the ranks meet on (board), the rounds the leader runs and the
others follow (pair_rounds), judging nodes, NICs and links from the pairs (judge), the rows and verdict left behind
(record), and one check end to end (allocation). It imports what gpubench.check may."""
