"""The store being written: staged beside the target and published whole, locked to one writer, its arrays
created with gtool's codecs and written chunk by chunk."""
