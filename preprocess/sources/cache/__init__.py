"""The input cache: decompressed and converted copies of compressed inputs, made once and reused."""
