"""Train a small MLP with SGD on the XPU, the backward pass written with ops by hand, and
compare the time per step with the same loop on the CPU.

The model is x -> Dense(64) -> ReLU -> Dense(3) -> softmax, trained with cross-entropy on a
synthetic three-class problem. Every op of the forward pass, the backward pass and the update
runs on the device of the `pluggable.device` scope; only the loss is read back each epoch.
"""
import time

import numpy as np

import pluggable
from pluggable import ops

EPOCHS = 10
STEPS_PER_EPOCH = 20
BATCH, FEATURES, HIDDEN, CLASSES = 64, 16, 64, 3
LEARNING_RATE = 0.05


def make_data(rng):
    """Points around three centres; the label is the nearest centre."""
    centres = rng.normal(size=(CLASSES, FEATURES)).astype(np.float32) * 0.4
    labels = rng.integers(0, CLASSES, size=BATCH * STEPS_PER_EPOCH)
    x = centres[labels] + rng.normal(size=(labels.size, FEATURES)).astype(np.float32)
    return x.astype(np.float32), np.eye(CLASSES, dtype=np.float32)[labels]


def train(device: str, x_all, y_all, params):
    """Returns the loss after each epoch and the mean seconds per step."""
    losses, step_times = [], []
    with pluggable.device(device):
        w1, b1, w2, b2 = (pluggable.tensor(p, device=device) for p in params)
        scale = pluggable.tensor(np.float32(LEARNING_RATE / BATCH), device=device)
        for _ in range(EPOCHS):
            epoch_loss = None
            for step in range(STEPS_PER_EPOCH):
                start = time.perf_counter()
                x = pluggable.tensor(x_all[step * BATCH:(step + 1) * BATCH], device=device)
                y = pluggable.tensor(y_all[step * BATCH:(step + 1) * BATCH], device=device)
                # Forward.
                h_pre = ops.bias_add(ops.matmul(x, w1), b1)
                h = ops.relu(h_pre)
                p = ops.softmax(ops.bias_add(ops.matmul(h, w2), b2))
                epoch_loss = ops.reduce_mean(
                    ops.negative(ops.reduce_sum(ops.multiply(y, ops.log(p)), axis=1)))
                # Backward: d(loss)/d(logits) of softmax + cross-entropy is p - y (per sample;
                # the 1/BATCH of the mean is folded into the learning rate).
                d_logits = ops.subtract(p, y)
                d_w2 = ops.matmul(h, d_logits, transpose_a=True)
                d_b2 = ops.reduce_sum(d_logits, axis=0)
                d_h = ops.matmul(d_logits, w2, transpose_b=True)
                relu_mask = ops.cast(ops.greater(h_pre, ops.zeros_like(h_pre)), "float32")
                d_h_pre = ops.multiply(d_h, relu_mask)
                d_w1 = ops.matmul(x, d_h_pre, transpose_a=True)
                d_b1 = ops.reduce_sum(d_h_pre, axis=0)
                # SGD.
                w1 = ops.subtract(w1, ops.multiply(scale, d_w1))
                b1 = ops.subtract(b1, ops.multiply(scale, d_b1))
                w2 = ops.subtract(w2, ops.multiply(scale, d_w2))
                b2 = ops.subtract(b2, ops.multiply(scale, d_b2))
                w2.numpy() if step == STEPS_PER_EPOCH - 1 else None  # waits for the device
                step_times.append(time.perf_counter() - start)
            losses.append(float(epoch_loss.numpy()))
    return losses, float(np.mean(step_times))


def main() -> None:
    rng = np.random.default_rng(0)
    x_all, y_all = make_data(rng)
    params = [rng.normal(scale=0.3, size=(FEATURES, HIDDEN)).astype(np.float32),
              np.zeros(HIDDEN, np.float32),
              rng.normal(scale=0.3, size=(HIDDEN, CLASSES)).astype(np.float32),
              np.zeros(CLASSES, np.float32)]
    results = {d: train(d, x_all, y_all, params) for d in ("/xpu:0", "/cpu:0")}
    print("epoch  " + "  ".join(f"{d:>10}" for d in results))
    for epoch in range(EPOCHS):
        print(f"{epoch:5}  " + "  ".join(f"{results[d][0][epoch]:10.4f}" for d in results))
    for device, (losses, seconds) in results.items():
        print(f"{device}: {seconds * 1e3:.2f} ms per step, final loss {losses[-1]:.4f}")
    xpu_losses, cpu_losses = results["/xpu:0"][0], results["/cpu:0"][0]
    assert np.allclose(xpu_losses, cpu_losses, rtol=1e-4), "XPU and CPU training disagree"
    assert xpu_losses[-1] < 0.75 * xpu_losses[0], "the loss did not go down"


if __name__ == "__main__":
    main()
