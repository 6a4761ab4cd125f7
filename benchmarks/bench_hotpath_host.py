"""Host cost of a tuned hit without a GPU: the fast path launching a stand-in CompiledKernel (no driver).

    python benchmarks/bench_hotpath_host.py SRC_DIR [N [MODE]]  # SRC_DIR: a tree's src/ (compare two commits)
      MODE "getitem" (default): ``k[grid](x, n)`` on every call, as users and bench_dispatch.py launch;
      "bound": ``f = k[grid]`` once, then ``f(x, n)``
    valgrind --tool=callgrind --callgrind-out-file=/dev/null $(which python3) benchmarks/bench_hotpath_host.py src 1000
      (instructions per hit: the difference of two runs with N = 1000 and 6000, divided by 5000)
"""
import sys, time, os
os.environ.pop("TRITON_INTERPRET", None)
src = sys.argv[1]
sys.path.insert(0, src)
import torch, triton, triton.language as tl
import graphtune

@triton.jit
def _k(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1.0, mask=offs < n)

class CK:
    packed_metadata = None; function = None
    def run(self, *a): pass
    def launch_metadata(self, *a): return None

k = graphtune.autotune([triton.Config({"BLOCK": 128}), triton.Config({"BLOCK": 256})], key=["n"])(_k)
x = torch.zeros(1024)
n = 1024
import graphtune.tuner as T
ck = CK()
k._resolve_force()
choice = T.Choice(k.configs[0], "tuned")
if hasattr(k, "_fast_cache"):   # old layout
    T._get_device = lambda: 0; T._get_stream = lambda d: 0
    spec = k._spec((x, n)); key = (k._key_values((x, n)), spec)
    k._fast_cache[key] = (choice, ck, (128,))
else:
    import graphtune.launch as L
    L._get_device = lambda: 0; L._get_stream = lambda d: 0
    key = k._fast.hit((x, n), (8,)).key
    k._fast.cache[key] = (choice, ck, (128,))
grid = (8,)
N = int(sys.argv[2]) if len(sys.argv) > 2 else 100000
mode = sys.argv[3] if len(sys.argv) > 3 else "getitem"
def loop():
    if mode == "bound":
        f = k[grid]
        for _ in range(N): f(x, n)
    else:
        for _ in range(N): k[grid](x, n)
loop()
if len(sys.argv) <= 2:
    t0 = time.perf_counter()
    loop()
    print(f"{src}: {(time.perf_counter() - t0) / N * 1e6:.3f} us per tuned hit (host, stand-in kernel)")
