"""A small engine-like package for the audit tests: kernels that reach triton through a module of their own."""
