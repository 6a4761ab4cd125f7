"""Re-export module: the engine imports triton through here (as inference engines do), never directly."""
HAS_TRITON = True

if HAS_TRITON:
    import triton
    import triton.language as tl
else:  # a placeholder when triton is missing; the audit must follow the import above
    triton = None
    tl = None
