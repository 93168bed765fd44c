"""Train a small MLP on the XPU with `pluggable.GradientTape` and `pluggable.optimizers.SGD`,
and compare the losses and the time per step with the same loop on the CPU.

The model is x -> Dense(64) -> ReLU -> Dense(3), trained with softmax cross-entropy on a
synthetic three-class problem. The forward pass, its gradient (recorded by the tape) and the
update (SGD with momentum, one ResourceApplyKerasMomentum per variable) all run on the
device of the `pluggable.device` scope; only the loss is read back, once per epoch.
"""
import time

import numpy as np

import pluggable
from pluggable import nn, ops, optimizers

EPOCHS = 10
STEPS_PER_EPOCH = 20
BATCH, FEATURES, HIDDEN, CLASSES = 64, 16, 64, 3
LEARNING_RATE, MOMENTUM = 0.05, 0.9


def make_data(rng):
    """Points around three centres; the label is the nearest centre."""
    centres = rng.normal(size=(CLASSES, FEATURES)).astype(np.float32) * 0.4
    labels = rng.integers(0, CLASSES, size=BATCH * STEPS_PER_EPOCH)
    x = centres[labels] + rng.normal(size=(labels.size, FEATURES)).astype(np.float32)
    return x.astype(np.float32), labels.astype(np.int64)


def train(device: str, x_all, labels_all, params):
    """Returns the loss of the last batch of each epoch and the mean seconds per step."""
    losses, step_times = [], []
    with pluggable.device(device):
        variables = [pluggable.Variable(p, name=name)
                     for p, name in zip(params, ("w1", "b1", "w2", "b2"))]
        w1, b1, w2, b2 = variables
        sgd = optimizers.SGD(LEARNING_RATE, momentum=MOMENTUM)
        for _ in range(EPOCHS):
            loss = None
            for step in range(STEPS_PER_EPOCH):
                start = time.perf_counter()
                batch = slice(step * BATCH, (step + 1) * BATCH)
                x = pluggable.constant(x_all[batch])
                labels = pluggable.constant(labels_all[batch])
                with pluggable.GradientTape() as tape:
                    hidden = nn.relu(nn.bias_add(ops.matmul(x, w1), b1))
                    logits = nn.bias_add(ops.matmul(hidden, w2), b2)
                    loss = ops.reduce_mean(
                        nn.sparse_softmax_cross_entropy_with_logits(labels, logits))
                sgd.apply_gradients(zip(tape.gradient(loss, variables), variables))
                if step == STEPS_PER_EPOCH - 1:
                    w2.numpy()  # waits for the device
                step_times.append(time.perf_counter() - start)
            losses.append(float(loss.numpy()))
    return losses, float(np.mean(step_times))


def main() -> None:
    rng = np.random.default_rng(0)
    x_all, labels_all = make_data(rng)
    params = [rng.normal(scale=0.3, size=(FEATURES, HIDDEN)).astype(np.float32),
              np.zeros(HIDDEN, np.float32),
              rng.normal(scale=0.3, size=(HIDDEN, CLASSES)).astype(np.float32),
              np.zeros(CLASSES, np.float32)]
    results = {d: train(d, x_all, labels_all, params) for d in ("/xpu:0", "/cpu:0")}
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
