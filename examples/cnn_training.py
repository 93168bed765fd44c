"""Train a small convolutional network on the XPU with `pluggable.GradientTape` and
`pluggable.optimizers.Adam`, and the same loop on the CPU from the same weights.

The images are 12x12 with one channel, each a noisy horizontal, vertical or diagonal line;
the network is Conv2D(3x3, 8 filters) -> BiasAdd -> ReLU -> MaxPool(2x2) -> Dense(3), and the
loss softmax cross-entropy against one-hot labels. The tape records the forward ops on the
XPU and its gradient runs the XPU's own gradient kernels (Conv2DBackpropFilter, MaxPoolGrad,
ReluGrad, BiasAddGrad, the cross-entropy's backprop; the images need no gradient, so no
Conv2DBackpropInput); Adam updates every variable with one ResourceApplyAdam on the XPU.
"""
import time

import numpy as np

import pluggable
from pluggable import nn, ops, optimizers

EPOCHS = 8
STEPS_PER_EPOCH = 4
BATCH, SIZE, FILTERS, CLASSES = 32, 12, 8, 3
LEARNING_RATE = 0.01


def make_data(rng):
    """Images of one line each (class 0 horizontal, 1 vertical, 2 diagonal) plus noise, and
    their one-hot labels."""
    labels = rng.integers(0, CLASSES, size=BATCH * STEPS_PER_EPOCH)
    images = rng.normal(scale=0.3, size=(labels.size, SIZE, SIZE, 1)).astype(np.float32)
    at = rng.integers(0, SIZE, size=labels.size)
    for i, (label, k) in enumerate(zip(labels, at)):
        if label == 0:
            images[i, k, :, 0] += 1.0
        elif label == 1:
            images[i, :, k, 0] += 1.0
        else:
            images[i, np.arange(SIZE), (np.arange(SIZE) + k) % SIZE, 0] += 1.0
    return images, np.eye(CLASSES, dtype=np.float32)[labels]


def initial_weights(rng):
    pooled = (SIZE // 2) * (SIZE // 2) * FILTERS
    return [rng.normal(scale=0.3, size=(3, 3, 1, FILTERS)).astype(np.float32),
            np.zeros(FILTERS, np.float32),
            rng.normal(scale=0.1, size=(pooled, CLASSES)).astype(np.float32),
            np.zeros(CLASSES, np.float32)]


def loss_of(images, labels, kernel, kernel_bias, dense, dense_bias):
    features = nn.relu(nn.bias_add(nn.conv2d(images, kernel, 1, "SAME"), kernel_bias))
    pooled = nn.max_pool2d(features, 2, 2, "VALID")
    flat = ops.reshape(pooled, [images.shape[0], -1])
    logits = nn.bias_add(ops.matmul(flat, dense), dense_bias)
    return ops.reduce_mean(nn.softmax_cross_entropy_with_logits(labels, logits))


def train(device: str, images_all, labels_all, params):
    """Returns the loss of every step and the mean seconds per step."""
    losses, step_times = [], []
    with pluggable.device(device):
        variables = [pluggable.Variable(p, name=name) for p, name in
                     zip(params, ("kernel", "kernel_bias", "dense", "dense_bias"))]
        adam = optimizers.Adam(LEARNING_RATE)
        for _ in range(EPOCHS):
            for step in range(STEPS_PER_EPOCH):
                start = time.perf_counter()
                batch = slice(step * BATCH, (step + 1) * BATCH)
                images = pluggable.constant(images_all[batch])
                labels = pluggable.constant(labels_all[batch])
                with pluggable.GradientTape() as tape:
                    loss = loss_of(images, labels, *variables)
                adam.apply_gradients(zip(tape.gradient(loss, variables), variables))
                losses.append(float(loss.numpy()))  # waits for the device
                step_times.append(time.perf_counter() - start)
    return losses, float(np.mean(step_times))


def main() -> None:
    rng = np.random.default_rng(0)
    images, labels = make_data(rng)
    params = initial_weights(rng)
    results = {d: train(d, images, labels, params) for d in ("/xpu:0", "/cpu:0")}
    per_epoch = {d: [float(np.mean(losses[e * STEPS_PER_EPOCH:(e + 1) * STEPS_PER_EPOCH]))
                     for e in range(EPOCHS)] for d, (losses, _) in results.items()}
    print("epoch  " + "  ".join(f"{d:>10}" for d in results))
    for epoch in range(EPOCHS):
        print(f"{epoch:5}  " + "  ".join(f"{per_epoch[d][epoch]:10.6f}" for d in results))
    for device, (losses, seconds) in results.items():
        print(f"{device}: {seconds * 1e3:.2f} ms per step, final loss {losses[-1]:.4f}")
    xpu, cpu = per_epoch["/xpu:0"], per_epoch["/cpu:0"]
    assert np.allclose(xpu, cpu, rtol=1e-4), "XPU and CPU training disagree"
    assert xpu[-1] < 0.75 * xpu[0], "the loss did not go down"


if __name__ == "__main__":
    main()
