"""`gtool plan`: a performance and memory model of gtool.trainer that ranks the grids of P ranks.

costmodel     the cost model itself: pure, from a store's metadata and a device profile
calibration   the measurements that make a device profile (`gtool plan --calibrate`); they drive the
              pipeline, the loader and the trainer
"""
