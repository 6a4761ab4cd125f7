import torch, triton, triton.language as tl, graphtune
from graphtune import Buckets

CAPTURE_SIZES = [1, 2, 4, 8, 12, 16, 24, 32]
dev = "cuda" if torch.cuda.is_available() else "cpu"   # on a CPU box: TRITON_INTERPRET=1

@graphtune.autotune(configs=[triton.Config({"BLOCK": b}, num_warps=w) for b in (256, 1024) for w in (4, 8)],
                    key=["B"], buckets={"B": Buckets.explicit(CAPTURE_SIZES)}, name="scale")
@triton.jit
def scale_kernel(x_ptr, out_ptr, n, B, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, 2 * tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

def step(x, out, B):
    scale_kernel[lambda m: (triton.cdiv(x.numel(), m["BLOCK"]),)](x, out, x.numel(), B)

graphtune.warmup(step, CAPTURE_SIZES, lambda b: (torch.randn(b * 512, device=dev), torch.empty(b * 512, device=dev), b))
# ... capture a CUDA graph per size: inside capture graphtune only looks up, never benchmarks ...
graphtune.assert_covered()          # raises if a captured size missed warm-up
print(graphtune.coverage())
