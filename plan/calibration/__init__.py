"""`gtool plan --calibrate`: measure a machine into a device profile (gtool.plan.costmodel.profile).

microbench    short microbenchmarks of the operations an epoch is made of
epochs        short real training epochs, alone and side by side: what the microbenchmarks miss
fit           least-squares fits shared by both
"""
