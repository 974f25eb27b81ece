"""Node data: features, labels and splits read from files (--features/--labels/--split, or a source's
own arrays), or made up when a source has none."""
