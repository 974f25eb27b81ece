"""The 3D-parallel building blocks of a model: products, sharded parameter blocks, dropout and loss."""
