"""Graph sources: every input format gtool reads, behind one interface (base.GraphSource)."""
