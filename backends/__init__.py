"""Backends: one module per implementation of the core protocols; imported lazily by name."""
