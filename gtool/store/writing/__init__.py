"""An output being written (a store by `gtool shard`, predictions by `gtool predict`, a checkpoint):
staged beside the target and published whole, locked to one writer, its arrays created with gtool's codecs
and written chunk by chunk.

staging       the staged output, its publication, and storage failures told as one error line
output_lock   one writer per output (a lock file naming its owner)
codecs        arrays created with the codecs and chunk keys of every array gtool writes
chunk_writer  array metadata and chunks written straight to any Zarr store
atomic        a file written whole or not at all (a temporary file renamed into place)
"""
