"""The performance and memory model of gtool.trainer: it needs only a store's metadata (and, for exact
counts, its tiles) and a device profile, never runs training. The step's shapes, collectives and shard
nonzeros are gtool.geometry's.

memory        peak memory per rank: resident data plus the epoch's high-water mark
profile       device profiles (JSON): what SpMM, GEMM, passes and collectives cost
cost          predicted seconds per rank and layer, and of the collectives
placement     which grid axes to place inside a node: every order priced, the cheapest chosen
planner       every grid predicted and ranked, the best one and why
minibatch     mini-batch runs: their steps' shapes and collectives
auto          `gtool train --grid auto`
"""
