"""Fragmentation of the BFC allocator on the allocation trace of a small MLP's training.

    python benchmarks/bench_fragmentation.py [--steps N] [--write]

The trace is built programmatically (`mlp_trace`): a 784-512-256-10 float32 MLP (ReLU,
softmax cross-entropy, SGD with momentum), allocating and freeing tensors in the order an
eager framework does:

- once: weights and biases of the three layers, and one momentum buffer per parameter;
- each training step at batch 64: upload the input (64x784) and labels (64 int32);
  forward per layer matmul -> bias_add (frees the matmul output) -> relu (frees the
  pre-activation; the relu output is kept for the backward pass); softmax cross-entropy
  gives per-example losses and the logits' gradient (frees the logits), a mean reduces the
  loss to a scalar; backward per layer from the top: bias gradient (reduce_sum), weight
  gradient (matmul), input gradient (matmul, not for the first layer), relu_grad (frees the
  upstream gradient and the relu output); the optimizer makes one temporary per parameter
  (lr * momentum), then frees the temporary and the gradient; input, labels, loss freed;
- halfway, one evaluation forward pass at batch 512 (larger activations, nothing kept for a
  backward pass), which is what fragments a heap tuned to batch 64.

The trace is replayed through `BFCAllocator` on XPU:0 with growth on and off. Reported: the
peak of the live bytes the trace asks for (the ideal), peak bytes_in_use (requests rounded up
to 256), peak bytes_reserved at a generous limit, and the smallest memory limit (searched in
4 KiB steps) with which the whole trace succeeds; ratios are against peak bytes_in_use.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import List, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _ratios import Report, add_write_flag  # noqa: E402

import pluggable  # noqa: E402
from pluggable.devices.allocator import BFCAllocator  # noqa: E402
from pluggable.errors import ResourceExhaustedError  # noqa: E402

F32 = 4
LAYERS = [784, 512, 256, 10]
GENEROUS_LIMIT = 256 << 20

Op = Tuple[str, int, int]  # ("alloc", id, bytes) or ("free", id, 0)


class TraceBuilder:
    def __init__(self):
        self.ops: List[Op] = []
        self.next_id = 0

    def alloc(self, nbytes: int) -> int:
        self.next_id += 1
        self.ops.append(("alloc", self.next_id, nbytes))
        return self.next_id

    def free(self, *ids: int) -> None:
        for i in ids:
            self.ops.append(("free", i, 0))


def mlp_trace(steps: int, batch: int = 64, eval_batch: int = 512) -> List[Op]:
    t = TraceBuilder()
    params = []  # (weight, bias) per layer
    shapes = list(zip(LAYERS, LAYERS[1:]))
    for n_in, n_out in shapes:
        params.append((t.alloc(n_in * n_out * F32), t.alloc(n_out * F32)))
    momentum = [(t.alloc(n_in * n_out * F32), t.alloc(n_out * F32)) for n_in, n_out in shapes]

    def forward(b: int, keep: bool):
        x = t.alloc(b * LAYERS[0] * F32)
        activations = [x]
        h = x
        for i, (n_in, n_out) in enumerate(shapes):
            mm = t.alloc(b * n_out * F32)                 # matmul(h, W)
            pre = t.alloc(b * n_out * F32)                # bias_add
            t.free(mm)
            if i + 1 < len(shapes):
                out = t.alloc(b * n_out * F32)            # relu
                t.free(pre)
            else:
                out = pre                                 # logits
            if not keep and h is not x:
                t.free(h)
            h = out
            activations.append(h)
        return activations

    def train_step():
        activations = forward(batch, keep=True)
        x, logits = activations[0], activations[-1]
        labels = t.alloc(batch * 4)
        losses, d_logits = t.alloc(batch * F32), t.alloc(batch * LAYERS[-1] * F32)
        t.free(logits)
        loss = t.alloc(F32)                               # mean
        t.free(losses)
        grad = t.alloc(batch * LAYERS[-1] * F32)          # d_logits / batch
        t.free(d_logits)
        grads = []
        for i in reversed(range(len(shapes))):
            n_in, n_out = shapes[i]
            below = activations[i]
            db = t.alloc(n_out * F32)                     # reduce_sum(grad, 0)
            dw = t.alloc(n_in * n_out * F32)              # matmul(below^T, grad)
            grads.append((i, dw, db))
            if i == 0:
                t.free(grad)
                break
            dh = t.alloc(batch * n_in * F32)              # matmul(grad, W^T)
            t.free(grad)
            da = t.alloc(batch * n_in * F32)              # relu_grad(dh, below)
            t.free(dh, below)
            grad = da
        for i, dw, db in grads:                           # SGD with momentum
            n_in, n_out = shapes[i]
            for g, size in ((dw, n_in * n_out * F32), (db, n_out * F32)):
                tmp = t.alloc(size)                       # lr * momentum
                t.free(tmp, g)
        t.free(x, labels, loss)

    def eval_step():
        activations = forward(eval_batch, keep=False)
        t.free(activations[0], activations[-1])

    for step in range(steps):
        if step == steps // 2:
            eval_step()
        train_step()
    for pair in params + momentum:
        t.free(*pair)
    return t.ops


def replay(executor, ops: List[Op], limit: int, growth: bool):
    """Runs the trace; returns (peak live request bytes, peak in use, peak reserved, regions
    at the peak), or None when it runs out of memory."""
    with BFCAllocator(executor, memory_limit=limit, allow_growth=growth) as a:
        addresses, sizes = {}, {}
        live = peak_live = 0
        try:
            for op, ident, nbytes in ops:
                if op == "alloc":
                    addresses[ident] = a.allocate(nbytes)
                    sizes[ident] = nbytes
                    live += nbytes
                    peak_live = max(peak_live, live)
                else:
                    a.deallocate(addresses.pop(ident))
                    live -= sizes.pop(ident)
        except ResourceExhaustedError:
            for address in addresses.values():
                a.deallocate(address)
            return None
        a.check()
        stats = a.stats()
        return peak_live, stats["peak_bytes_in_use"], stats["peak_bytes_reserved"], \
            len(a.regions())


def smallest_limit(executor, ops: List[Op], growth: bool, low: int, high: int) -> int:
    """The smallest limit (4 KiB steps) in (low, high] with which the trace succeeds."""
    step = 4096
    low, high = low // step, -(-high // step)
    while high - low > 1:
        mid = (low + high) // 2
        if replay(executor, ops, mid * step, growth) is None:
            low = mid
        else:
            high = mid
    return high * step


def mib(n: int) -> str:
    return f"{n / (1 << 20):.2f} MiB"


NOTE = """The trace (`mlp_trace`) is a 784-512-256-10 float32 MLP trained with SGD and
momentum at batch 64 in eager order, with one evaluation pass at batch 512 halfway;
"smallest limit" is the smallest `memory_limit` (4 KiB steps) with which all of it
succeeds, and the ratios are against peak bytes in use. With growth, regions double, so the
reserve exceeds the peak by the last region's slack, not by fragmentation; none of these
figures depends on the load."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10)
    add_write_flag(parser)
    args = parser.parse_args()
    report = Report(__file__, "BFC allocator fragmentation on an MLP's training trace", NOTE)
    executor = pluggable.get_platform("REF_XPU").executor(0)
    ops = mlp_trace(args.steps)
    allocs = sum(1 for op in ops if op[0] == "alloc")
    rows = []
    for growth in (True, False):
        peak_live, in_use, reserved, regions = replay(executor, ops, GENEROUS_LIMIT, growth)
        limit = smallest_limit(executor, ops, growth, in_use - 1, GENEROUS_LIMIT)
        rows.append(("on" if growth else "off", mib(peak_live), mib(in_use), mib(reserved),
                     regions, f"{reserved / in_use:.2f}", mib(limit),
                     f"{limit / in_use:.3f}"))
    report.rows(f"{allocs} allocations over {args.steps} training steps + 1 evaluation pass",
                ["growth", "peak live requests", "peak in use",
                 f"peak reserved ({mib(GENEROUS_LIMIT)} limit)", "regions",
                 "reserved / in use", "smallest limit", "smallest limit / in use"], rows)
    report.finish(args.write)


if __name__ == "__main__":
    main()
