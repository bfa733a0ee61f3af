"""Mission products as archived (M3, CRISM, ...): recognising them, their PDS3 labels, reading them for a run."""
