"""Mini-batch training on uniform vertex samples, cut by every rank from its own shards (no communication).

schedule   which nodes each step of each replica samples: from (seed, epoch) alone
cut        one rank's part of a sample: its band members and the induced, rescaled adjacency blocks
batch      every block one rank needs for one step (adjacency per layer, input rows, labels, masks)
prefetch   the next step's cut prepared in a background thread while the current step trains
"""
