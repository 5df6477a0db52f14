"""The ranks of a multi-process run: which launcher started this process (torchrun, Slurm, MPI) and where it
sits, the group of ranks (its rendezvous store, heartbeats and watchdog, the agreements of the control plane),
how a rank ends when it cannot finish, and gpubench's own spawner of ranks on one machine.

It may import the suite contract, the backends, the machine and the results (a rank's ending closes its run
directory); the run starts or joins the ranks through it (gpubench.run), never the other way.
"""
