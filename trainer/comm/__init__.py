"""The grid's process groups, the timed collectives the layers use, and the phase timing of an epoch."""
