"""Pure-torch fp32 reference for MLA decode attention over a paged KV cache (no Triton).

Same signature as :func:`graphtune.kernels.mla_decode`. It dequantises the cache rows a request uses,
computes softmax attention in fp32 and returns the output in bf16 (and the natural-log LSE in fp32).
Slow on purpose: one request at a time, readable rather than fast.
"""
from __future__ import annotations

import torch

D_NOPE = 512
D_ROPE = 64
D_QK = D_NOPE + D_ROPE
DS_MLA_ROW_BYTES = 656
# bytes one cached token takes per cache format (what a decode step must read), and the cache's last dimension
ROW_BYTES = {"fp8": D_QK, "bf16": 2 * D_QK, "fp8_ds_mla": DS_MLA_ROW_BYTES}


def cache_row_width(kv_format: str) -> int:
    """The last dimension of a ``kv_format`` cache tensor: 656 uint8 for fp8_ds_mla, else 576 elements."""
    return DS_MLA_ROW_BYTES if kv_format == "fp8_ds_mla" else D_QK
DS_MLA_GROUP = 128


def dequantize_ds_mla(rows: torch.Tensor) -> torch.Tensor:
    """uint8 rows ``[..., 656]`` in the DeepSeek fp8 layout -> fp32 ``[..., 576]``.

    Bytes 0..511: fp8 e4m3 latent values; 512..527: four fp32 scales, one per 128 latent values;
    528..655: 64 bf16 rope values.
    """
    lead = rows.shape[:-1]
    flat = rows.reshape(-1, DS_MLA_ROW_BYTES)
    latent = flat[:, :D_NOPE].contiguous().view(torch.float8_e4m3fn).float()
    scales = flat[:, D_NOPE:D_NOPE + 16].contiguous().view(torch.float32)
    rope = flat[:, D_NOPE + 16:].contiguous().view(torch.bfloat16).float()
    latent = (latent.view(-1, D_NOPE // DS_MLA_GROUP, DS_MLA_GROUP) * scales[:, :, None]).view(-1, D_NOPE)
    return torch.cat([latent, rope], dim=-1).view(*lead, D_QK)


def quantize_ds_mla(values: torch.Tensor) -> torch.Tensor:
    """fp32 ``[..., 576]`` -> uint8 ``[..., 656]`` in the DeepSeek fp8 layout (scale = amax / 448 per group)."""
    lead = values.shape[:-1]
    flat = values.reshape(-1, D_QK).float()
    groups = flat[:, :D_NOPE].view(-1, D_NOPE // DS_MLA_GROUP, DS_MLA_GROUP)
    scales = (groups.abs().amax(dim=-1) / 448.0).clamp_min(1e-12)
    latent = (groups / scales[:, :, None]).view(-1, D_NOPE).to(torch.float8_e4m3fn)
    out = torch.empty(flat.shape[0], DS_MLA_ROW_BYTES, dtype=torch.uint8, device=values.device)
    out[:, :D_NOPE] = latent.view(torch.uint8)
    out[:, D_NOPE:D_NOPE + 16] = scales.contiguous().view(torch.uint8)
    out[:, D_NOPE + 16:] = flat[:, D_NOPE:].to(torch.bfloat16).contiguous().view(torch.uint8)
    return out.view(*lead, DS_MLA_ROW_BYTES)


def resolve_kv_format(kv_cache: torch.Tensor, kv_format: str) -> str:
    """``"auto"`` -> ``"fp8"``, ``"bf16"`` or ``"fp8_ds_mla"`` from the cache's dtype and last dimension."""
    if kv_format != "auto":
        return kv_format
    if kv_cache.dtype == torch.float8_e4m3fn:
        return "fp8"
    if kv_cache.dtype == torch.bfloat16:
        return "bf16"
    if kv_cache.dtype == torch.uint8 and kv_cache.shape[-1] == DS_MLA_ROW_BYTES:
        return "fp8_ds_mla"
    raise ValueError(f"kv_cache: cannot infer kv_format from dtype {kv_cache.dtype} and shape "
                     f"{tuple(kv_cache.shape)}; expected float8_e4m3fn or bfloat16 [..., 576], "
                     f"or uint8 [..., 656] (fp8_ds_mla)")


def dequantize_cache(kv_cache: torch.Tensor, kv_format: str, kv_scale: float | torch.Tensor = 1.0) -> torch.Tensor:
    """The whole cache as fp32 ``[num_pages, page_size, 576]``."""
    fmt = resolve_kv_format(kv_cache, kv_format)
    if fmt == "fp8_ds_mla":
        return dequantize_ds_mla(kv_cache)
    values = kv_cache.float()
    if fmt == "fp8":
        scale = kv_scale.float().reshape(()) if isinstance(kv_scale, torch.Tensor) else float(kv_scale)
        values = values * scale
    return values


def e4m3_query(q: torch.Tensor, kv_format: str = "fp8") -> torch.Tensor:
    """The query as ``mla_decode(..., query_precision="e4m3")`` scores against it, in fp32: each head's values (its
    512 latent ones and, on a per-tensor fp8 cache, its 64 rope ones; fp8_ds_mla scores the rope against the bf16
    query) times a power of two ``s`` that brings their largest magnitude to 2**8, rounded to e4m3, divided by ``s``.
    ``mla_decode_reference`` of it is the output that mode computes (up to the kernels' fp32 sums; the portable
    kernel takes one ``s`` for a block of heads, which rounds the same but for values e4m3 holds as subnormals)."""
    x = q.float()
    width = D_QK if kv_format == "fp8" else D_NOPE
    part = x[..., :width]
    amax = part.abs().amax(dim=-1, keepdim=True).clamp_min(1e-30)
    s = torch.exp2(8.0 - torch.ceil(torch.log2(amax)))
    rounded = (part * s).to(torch.float8_e4m3fn).float() / s
    return torch.cat([rounded, x[..., width:]], dim=-1)


def mla_decode_reference(q: torch.Tensor, kv_cache: torch.Tensor, page_table: torch.Tensor,
                         seq_lens: torch.Tensor, sm_scale: float, *, kv_scale: float | torch.Tensor = 1.0,
                         kv_format: str = "auto", out: torch.Tensor | None = None, return_lse: bool = False,
                         q_scale: float | torch.Tensor | None = None,
                         ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """MLA decode attention in fp32: ``softmax(q k^T * sm_scale) v`` per request over its paged rows.

    Keys are all 576 dims of a row, values its first 512. Returns ``[B, H, 512]`` bf16 (written into
    ``out`` when given) and, with ``return_lse``, ``[B, H]`` fp32 log-sum-exp of the scaled scores in
    natural log. ``q_scale``: as ``mla_decode``'s, the query is ``q * q_scale`` (an e4m3 ``q``).
    """
    if q_scale is not None:
        q = q.float() * (q_scale.float().reshape(()) if isinstance(q_scale, torch.Tensor) else float(q_scale))
    fmt = resolve_kv_format(kv_cache, kv_format)
    cache = dequantize_cache(kv_cache, fmt, kv_scale)
    page_size = cache.shape[1]
    batch, heads, _ = q.shape
    result = torch.empty(batch, heads, D_NOPE, dtype=torch.float32, device=q.device)
    lse = torch.empty(batch, heads, dtype=torch.float32, device=q.device)
    lens = seq_lens.tolist()
    for b in range(batch):
        n = int(lens[b])
        tokens = torch.arange(n, device=q.device)
        pages = page_table[b, tokens // page_size].long()
        rows = cache[pages, tokens % page_size]  # [n, 576]
        scores = (q[b].float() @ rows.T) * sm_scale  # [H, n]
        lse[b] = torch.logsumexp(scores, dim=-1)
        result[b] = torch.softmax(scores, dim=-1) @ rows[:, :D_NOPE]
    if out is None:
        out = torch.empty(batch, heads, D_NOPE, dtype=torch.bfloat16, device=q.device)
    out.copy_(result)
    return (out, lse) if return_lse else out
