"""The PyTorch side of gpu-check.sh's throughput comparison: one training
step (forward, backward, AdamW) of the same GPT-style decoder that
dtfm-translate --import-gpt builds (learned positions, pre-LayerNorm blocks
with separate q/k/v projections, GELU MLP, tied head, cross-entropy), timed
on this host's GPU.

  python3 torch-gpt-step.py --layers 12 --hidden 768 --heads 12 --seq 1024
      --vocab 50257 --batch 8 --dtype f32|bf16 --attention math|sdpa
      [--steps 8]

Prints one line: "median_ms <ms> steps <n>" (the median of the steps after
the first two). f32 keeps PyTorch's float32 matmuls exact (no TF32), as
dtfm's are; bf16 runs the products under autocast, as dtfm's bf16 plans run
their linear and matmul products. math spells attention out (scores,
masked softmax, product: the work dtfm does); sdpa is PyTorch's fused
scaled_dot_product_attention (flash attention where it applies).
"""
import argparse
import math
import statistics
import sys
import time

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:
    sys.exit(f"torch-gpt-step: no PyTorch here ({e})")


def main():
    p = argparse.ArgumentParser()
    for name in ("layers", "hidden", "heads", "seq", "vocab", "batch"):
        p.add_argument("--" + name, type=int, required=True)
    p.add_argument("--dtype", choices=["f32", "bf16"], required=True)
    p.add_argument("--attention", choices=["math", "sdpa"], required=True)
    p.add_argument("--steps", type=int, default=8)
    a = p.parse_args()
    if not torch.cuda.is_available():
        sys.exit("torch-gpt-step: PyTorch sees no CUDA device")
    if a.attention == "sdpa" and not hasattr(F, "scaled_dot_product_attention"):
        sys.exit(f"torch-gpt-step: PyTorch {torch.__version__} has no "
                 "scaled_dot_product_attention")
    if a.hidden % a.heads or a.steps < 3:
        sys.exit("torch-gpt-step: heads must divide hidden; steps >= 3")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda")
    h, dh = a.hidden, a.hidden // a.heads
    gen = torch.Generator(device=dev).manual_seed(0)

    def param(*shape, std=0.02):
        return (std * torch.randn(*shape, device=dev, generator=gen)
                ).requires_grad_()

    def ones(n):
        return torch.ones(n, device=dev, requires_grad=True)

    def zeros(n):
        return torch.zeros(n, device=dev, requires_grad=True)

    wte, wpe = param(a.vocab, h), param(a.seq, h)
    blocks = []
    for _ in range(a.layers):
        b = {"ln1": (ones(h), zeros(h)), "ln2": (ones(h), zeros(h))}
        for name, (fi, fo) in {"q": (h, h), "k": (h, h), "v": (h, h),
                               "proj": (h, h), "fc": (h, 4 * h),
                               "out": (4 * h, h)}.items():
            b[name] = (param(fi, fo), zeros(fo))
        blocks.append(b)
    lnf = (ones(h), zeros(h))
    params = [wte, wpe, *lnf] + [t for b in blocks for pair in b.values()
                                 for t in pair]
    opt = torch.optim.AdamW(params, lr=3e-4)
    mask = torch.triu(torch.ones(a.seq, a.seq, dtype=torch.bool,
                                 device=dev), 1)

    def lin(x, wb):
        return x @ wb[0] + wb[1]

    def heads(x):
        return x.view(a.batch, a.seq, a.heads, dh).transpose(1, 2)

    def forward(tokens, labels):
        x = wte[tokens] + wpe
        for b in blocks:
            y = F.layer_norm(x, (h,), *b["ln1"], 1e-5)
            q, k, v = (heads(lin(y, b[t])) for t in "qkv")
            if a.attention == "sdpa":
                o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                s = (q @ k.transpose(-1, -2)) / math.sqrt(dh)
                o = torch.softmax(s.masked_fill(mask, float("-inf")), -1) @ v
            x = x + lin(o.transpose(1, 2).reshape(a.batch, a.seq, h),
                        b["proj"])
            y = F.layer_norm(x, (h,), *b["ln2"], 1e-5)
            x = x + lin(F.gelu(lin(y, b["fc"])), b["out"])
        x = F.layer_norm(x, (h,), *lnf, 1e-5)
        logits = x @ wte.T
        return F.cross_entropy(logits.float().reshape(-1, a.vocab),
                               labels.reshape(-1))

    times = []
    for _ in range(a.steps):
        tokens = torch.randint(0, a.vocab, (a.batch, a.seq), device=dev)
        labels = torch.randint(0, a.vocab, (a.batch, a.seq), device=dev)
        torch.cuda.synchronize()
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16,
                            enabled=a.dtype == "bf16"):
            loss = forward(tokens, labels)
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    print(f"median_ms {1e3 * statistics.median(times[2:]):.2f} "
          f"steps {len(times)}")


if __name__ == "__main__":
    main()
