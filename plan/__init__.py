"""`gtool plan`: a performance and memory model of gtool.trainer that ranks the grids of P ranks.

shapes        the grids of P ranks and each layer's padded block shapes on one
bandnnz       every rank's shard nonzeros per layer, from the store's tile statistics
collectives   every collective of a training step, with its group and operand size (exact)
memory        peak memory per rank: resident data plus the epoch's high-water mark
profile       device profiles (JSON): what SpMM, GEMM, passes and collectives cost
calibrate     the microbenchmarks that measure a profile (`gtool plan --calibrate`)
calibrate_epochs  short real training epochs, alone and side by side: what the microbenchmarks miss
cost          predicted seconds per rank and layer, and of the collectives
planner       every grid predicted and ranked, the best one and why
auto          `gtool train --grid auto`
tensorbytes   measured live tensor bytes (what the memory model is checked against)
"""
