"""Writing result maps atomically in every output format, and reading their provenance back."""
