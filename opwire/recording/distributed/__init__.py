"""Distributed runs under torch.distributed: one streamed trace per rank, checked and replayed rank by rank.

`launch` (rank, world size and run id from the launcher's environment), `collectives` (what each c10d op
does with its arguments), `capture` (recording a c10d call), `run` (a run directory: one trace per rank,
checked to belong together), `sequence` (each rank's collectives per group, streamed), `numerics` (what a
collective must produce from every rank's inputs), `ranks` (`opwire ranks`), `replay_run` (`opwire replay
RUN`), `live` (replay with real collectives under torchrun), `diff_run` (`opwire diff RUN_A RUN_B`).
"""

from __future__ import annotations
