"""Is the aot-cudagraphs dynamic failure graphtune's? The same step with a plain torch op instead of the kernel.

    python benchmarks/probes/cudagraphs_backend_dynamic.py      # needs CUDA; prints one line per size
"""
import torch
torch._dynamo.reset()
def step(x, y, B):
    out = torch.empty_like(x)
    out.copy_(2 * x + y)
    return out * 2 + 1
compiled = torch.compile(step, fullgraph=True, dynamic=True, backend="cudagraphs")
for B in (1, 3, 8, 16, 3):
    n = B * 1000 + 37
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    try:
        got = compiled(x, y, B).clone(); got2 = compiled(x, y, B).clone()
        ok = torch.allclose(got, (2 * x + y) * 2 + 1) and torch.allclose(got2, got)
        print(f"plain torch, cudagraphs backend, dynamic=True, B={B}: ok={ok}")
    except Exception as e:
        print(f"plain torch, cudagraphs backend, dynamic=True, B={B}: {type(e).__name__}: {str(e)[:200]}")
