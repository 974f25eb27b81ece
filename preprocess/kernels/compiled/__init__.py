"""numba's forms of `gtool shard`'s kernels (`nogil`, cached on disk); gtool.preprocess.kernels calls them.

Each kernel is one pass over a chunk, a run or a tile that numpy makes in several, each with its own
temporary array; they release the GIL, so threads of one worker run them side by side. A worker of a run
large enough for them loads every kernel (gtool.preprocess.kernels.warm) in a task of its own, submitted
first.
"""
