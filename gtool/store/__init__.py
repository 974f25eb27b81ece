"""The store format (docs/store-format.md), shared by every room: what `gtool shard` writes, the rest read.

layout     array paths, metadata key, codecs and chunk keys of layout 1
metadata   the typed store metadata (attributes["gtool"]) and its tile statistics
reader     a complete store opened for reading: metadata, tiles checked on read, node arrays
chunks     reads that name the array and chunk of any damaged chunk
scan       one streaming pass over a store's tiles, handed to visitors
cells      a store's nonzeros in the cells of band edges: the shard tables of gtool.geometry.bandnnz
verify     every chunk and invariant checked (`gtool verify`)
convert    a store back in original node order: scipy CSR, numpy node arrays, torch_geometric
writing/   an output being written: staged beside its target and published whole, locked to one writer,
           its arrays created with gtool's codecs and written chunk by chunk (`gtool shard`, `predict`)
"""
