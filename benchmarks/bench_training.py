"""Training on the XPU: one whole training step of an MLP and of a small CNN on /xpu:0
(pluggable.GradientTape + pluggable.optimizers.Adam) against the same step in PyTorch and in
TensorFlow on their CPU; then the kernels of a training step against the CPU device's NumPy
reference kernels.

    python benchmarks/bench_training.py [--repeats 5] [--steps 3] [--threads N] [--no-kernels]
                                        [--write]

Whole steps: the MLP is 784 -> Dense(256) -> ReLU -> Dense(10) on a batch of 128, the CNN
Conv2D(3x3, 16 filters) -> BiasAdd -> ReLU -> MaxPool(2x2) -> Dense(10) on 32 images of
28x28x1, both with softmax cross-entropy and Adam, float32, the same data and initial
weights everywhere (their first losses are checked to agree). A sample is the wall time per
step over `--steps` steps, each step waited for (device.synchronize()); pluggable, PyTorch
(torch.optim.Adam) and TensorFlow (eager tf.GradientTape and tf.keras.optimizers.Adam, in a
child interpreter: TensorFlow and pluggable do not share a process) take turns in each of
`--repeats` rounds, and the ratio is pluggable's time / the other's, per round. PyTorch and
TensorFlow get as many threads as an XPU kernel: `--threads`, which sets XPU_KERNEL_THREADS
for the XPU (default: XPU_KERNEL_THREADS when set, else the CPU count).
Either reference is left out when it is not installed.

Kernels: each XPU sample is the time of one op, enqueued and waited for; each CPU sample the
time of the same op through pluggable on the CPU device, right after it; the ratio is XPU
time / CPU time (below 1: the XPU kernel is faster than NumPy).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _ratios import Report, add_write_flag, rounds, time_per_call  # noqa: E402

import pluggable  # noqa: E402
from pluggable import nn, ops, optimizers  # noqa: E402
from pluggable.eager import dispatch  # noqa: E402

NOTE = """A whole step is some tens of ops: the forward pass, the gradient the tape records
(on the XPU its gradient kernels: Conv2DBackpropFilter, MaxPoolGrad, ReluGrad, BiasAddGrad,
the cross entropy's backprop) and one ResourceApplyAdam per variable. PyTorch and
TensorFlow run eagerly too (no torch.compile, no tf.function). In the kernel table the convolution gradients run as GEMMs over the im2col matrix on the XPU's
blocked GEMM; the element-wise and copy kernels (pooling, the cross entropy, gather,
concat) are plain loops, and at these sizes much of their time is the op's launch and the
wait for the stream."""

# Threads of an XPU kernel, and of PyTorch's and TensorFlow's kernels (--threads sets it).
THREADS = int(os.environ.get("XPU_KERNEL_THREADS") or os.cpu_count() or 1)

# The models' data and initial weights, NumPy only: run here and in TensorFlow's child.
DATA = '''
def model_data(model):
    """(inputs, weights) of `model`: NHWC images and HWIO kernels, integer labels."""
    rng = np.random.default_rng(0)
    f32 = np.float32
    if model == "mlp":
        x = rng.standard_normal((128, 784)).astype(f32)
        weights = [(rng.standard_normal((784, 256)) * 0.05).astype(f32), np.zeros(256, f32),
                   (rng.standard_normal((256, 10)) * 0.05).astype(f32), np.zeros(10, f32)]
    else:
        x = rng.standard_normal((32, 28, 28, 1)).astype(f32)
        weights = [(rng.standard_normal((3, 3, 1, 16)) * 0.3).astype(f32), np.zeros(16, f32),
                   (rng.standard_normal((14 * 14 * 16, 10)) * 0.02).astype(f32),
                   np.zeros(10, f32)]
    labels = rng.integers(0, 10, x.shape[0]).astype(np.int64)
    return [x, labels], weights
'''
exec(DATA)  # defines model_data
MODELS = {"mlp": "MLP 784-256-10, batch 128", "cnn": "CNN conv 3x3x16 + pool + dense, 32x28x28x1"}
LEARNING_RATE = 0.001

# TensorFlow's side: sets up both models, prints their first losses, then answers each line
# "<model> <steps>" with the seconds per step of that many steps.
TENSORFLOW = '''
import json, os, sys, time
import numpy as np
''' + DATA + '''
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
os.environ["CUDA_VISIBLE_DEVICES"] = ""
import tensorflow as tf
threads = int(sys.argv[1])
tf.config.threading.set_intra_op_parallelism_threads(threads)
tf.config.threading.set_inter_op_parallelism_threads(1)

def loss_of(model, x, labels, w1, b1, w2, b2):
    if model == "mlp":
        hidden = tf.nn.relu(tf.nn.bias_add(tf.matmul(x, w1), b1))
    else:
        features = tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(x, w1, 1, "SAME"), b1))
        hidden = tf.reshape(tf.nn.max_pool2d(features, 2, 2, "VALID"), [x.shape[0], -1])
    logits = tf.nn.bias_add(tf.matmul(hidden, w2), b2)
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))

steps, first = {}, {}
with tf.device("/CPU:0"):
    for model in ("mlp", "cnn"):
        inputs, weights = model_data(model)
        inputs = [tf.constant(a) for a in inputs]
        variables = [tf.Variable(w) for w in weights]
        adam = tf.keras.optimizers.Adam(%(lr)r)

        def step(model=model, inputs=inputs, variables=variables, adam=adam):
            with tf.GradientTape() as tape:
                loss = loss_of(model, *inputs, *variables)
            adam.apply_gradients(zip(tape.gradient(loss, variables), variables))
            return loss

        first[model] = float(step())
        steps[model] = step
print(json.dumps({"first": first, "version": tf.__version__}), flush=True)
for line in sys.stdin:
    model, count = line.split()
    started = time.perf_counter()
    with tf.device("/CPU:0"):
        for _ in range(int(count)):
            steps[model]()
    print((time.perf_counter() - started) / int(count), flush=True)
''' % {"lr": LEARNING_RATE}


class TensorFlowSteps:
    """TensorFlow in a child interpreter, timing its steps on request."""

    def __init__(self):
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        self.child = subprocess.Popen([sys.executable, "-c", TENSORFLOW, str(THREADS)],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      text=True, env=env)
        line = self.child.stdout.readline()
        if not line:
            raise RuntimeError(f"TensorFlow's child exited ({self.child.wait()}) before it "
                               f"was ready; run it alone to see why")
        ready = json.loads(line)
        self.first_losses, self.version = ready["first"], ready["version"]

    def seconds_per_step(self, model: str, steps: int) -> float:
        self.child.stdin.write(f"{model} {steps}\n")
        self.child.stdin.flush()
        return float(self.child.stdout.readline())

    def close(self):
        self.child.stdin.close()
        self.child.wait(timeout=60)


def pluggable_step(model: str):
    """One training step of `model` on XPU:0, waited for; and its first loss."""
    device = pluggable.get_device("XPU:0")
    inputs, weights = model_data(model)
    with pluggable.device("/xpu:0"):
        x, labels = (pluggable.constant(a) for a in inputs)
        variables = [pluggable.Variable(w) for w in weights]
    w1, b1, w2, b2 = variables
    adam = optimizers.Adam(LEARNING_RATE)

    def step():
        with pluggable.device("/xpu:0"):
            with pluggable.GradientTape() as tape:
                if model == "mlp":
                    hidden = nn.relu(nn.bias_add(ops.matmul(x, w1), b1))
                else:
                    features = nn.relu(nn.bias_add(nn.conv2d(x, w1, 1, "SAME"), b1))
                    hidden = ops.reshape(nn.max_pool2d(features, 2, 2, "VALID"),
                                         [x.shape[0], -1])
                logits = nn.bias_add(ops.matmul(hidden, w2), b2)
                loss = ops.reduce_mean(nn.sparse_softmax_cross_entropy_with_logits(labels,
                                                                                   logits))
            adam.apply_gradients(zip(tape.gradient(loss, variables), variables))
        device.synchronize()
        return loss

    return step, float(step().numpy())


def torch_step(model: str, torch):
    """The same step in PyTorch on its CPU (NCHW images, OIHW kernels); and its first loss."""
    functional = torch.nn.functional
    inputs, weights = model_data(model)
    x, labels = torch.from_numpy(inputs[0]), torch.from_numpy(inputs[1])
    if model == "cnn":
        x = x.permute(0, 3, 1, 2).contiguous()
        weights[0] = weights[0].transpose(3, 2, 0, 1).copy()
        # The dense layer's rows follow NHWC's flattening; PyTorch flattens NCHW.
        weights[2] = weights[2].reshape(14, 14, 16, 10).transpose(2, 0, 1, 3).reshape(-1, 10)
    params = [torch.tensor(w, requires_grad=True) for w in weights]
    w1, b1, w2, b2 = params
    adam = torch.optim.Adam(params, lr=LEARNING_RATE, eps=1e-7)  # Keras' epsilon

    def step():
        if model == "mlp":
            hidden = functional.relu(x @ w1 + b1)
        else:
            features = functional.relu(functional.conv2d(x, w1, b1, padding=1))
            hidden = functional.max_pool2d(features, 2).flatten(1)
        loss = functional.cross_entropy(hidden @ w2 + b2, labels)
        adam.zero_grad()
        loss.backward()
        adam.step()
        return loss

    return step, float(step().detach())


def training_steps(report: Report, repeats: int, steps: int) -> None:
    torch = None
    if importlib.util.find_spec("torch") is not None:
        import torch
        torch.set_num_threads(THREADS)
    tensorflow = None
    if importlib.util.find_spec("tensorflow") is not None:
        tensorflow = TensorFlowSteps()
    try:
        names = {"PyTorch": f"PyTorch {torch.__version__}" if torch else "PyTorch",
                 "TensorFlow": f"TensorFlow {tensorflow.version}" if tensorflow
                 else "TensorFlow"}
        against = {"PyTorch": [], "TensorFlow": []}
        for model, title in MODELS.items():
            mine, first = pluggable_step(model)
            samplers = {"pluggable": lambda: time_per_call(mine, steps)}
            if torch is not None:
                theirs, torch_first = torch_step(model, torch)
                check(model, "PyTorch", first, torch_first)
                samplers["PyTorch"] = lambda: time_per_call(theirs, steps)
            if tensorflow is not None:
                check(model, "TensorFlow", first, tensorflow.first_losses[model])
                samplers["TensorFlow"] = (
                    lambda m=model: tensorflow.seconds_per_step(m, steps))
            samples = rounds(samplers, repeats)
            for name in against:
                if name in samples:
                    against[name].append((title, samples["pluggable"], samples[name]))
    finally:
        if tensorflow is not None:
            tensorflow.close()
    for name, rows in against.items():
        threads = f"{THREADS} thread{'s' if THREADS > 1 else ''}"
        if rows:
            report.pairs(f"One training step with Adam: XPU:0 against {names[name]} on the "
                         f"CPU ({threads}), {repeats} rounds of {steps} steps", rows,
                         "pluggable XPU:0", f"{name} CPU", "ms", 1e3)
        else:
            report.text(f"{name} is not installed: no comparison with it.")


def check(model: str, name: str, mine: float, theirs: float) -> None:
    if abs(mine - theirs) > 1e-4 * abs(theirs):
        raise AssertionError(f"{model}: the first loss is {mine} here and {theirs} in {name}: "
                             f"the steps compared are not the same computation")


def paired(xpu_run, cpu_run, repeats: int):
    """(XPU samples, CPU samples), one of each per round, after a warm-up of each."""
    samples = rounds({"xpu": lambda: time_per_call(xpu_run, 1),
                      "cpu": lambda: time_per_call(cpu_run, 1)}, repeats)
    return samples["xpu"], samples["cpu"]


def cases(rng):
    f32 = np.float32
    x = rng.standard_normal((8, 32, 32, 16)).astype(f32)
    w = rng.standard_normal((3, 3, 16, 32)).astype(f32)
    conv = dict(strides=[1, 1, 1, 1], padding="SAME")
    dy = rng.standard_normal((8, 32, 32, 32)).astype(f32)
    pool = dict(ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="VALID")
    with pluggable.device("CPU"):
        (pooled,) = dispatch.execute("MaxPool", [x], pool)
    logits = rng.standard_normal((256, 1000)).astype(f32)
    labels = rng.integers(0, 1000, 256)
    parts = [rng.standard_normal((256, 1024)).astype(f32) for _ in range(4)]
    table = rng.standard_normal((10000, 64)).astype(f32)
    index = rng.integers(0, 10000, 4096)
    return [
        ("Conv2DBackpropInput 8x32x32x16, 3x3x16x32", "Conv2DBackpropInput",
         [np.array(x.shape, np.int32), w, dy], conv),
        ("Conv2DBackpropFilter 8x32x32x16, 3x3x16x32", "Conv2DBackpropFilter",
         [x, np.array(w.shape, np.int32), dy], conv),
        ("MaxPool 2x2 of 8x32x32x16", "MaxPool", [x], pool),
        ("MaxPoolGrad 2x2 of 8x32x32x16", "MaxPoolGrad", [x, pooled.numpy(), pooled.numpy()],
         pool),
        ("SparseSoftmaxCrossEntropyWithLogits 256x1000", "SparseSoftmaxCrossEntropyWithLogits",
         [logits, labels], None),
        ("ConcatV2 4 x 256x1024 on axis 1", "ConcatV2", [parts, np.int32(1)], None),
        ("GatherV2 4096 rows of 10000x64", "GatherV2", [table, index, np.int32(0)], None),
    ]


def on(device: str, value):
    if isinstance(value, list):
        return [pluggable.tensor(v, device=device) for v in value]
    return pluggable.tensor(value, device=device)


def kernels(report: Report, repeats: int) -> None:
    device = pluggable.get_device("XPU:0")
    rows = []
    for title, op, inputs, attrs in cases(np.random.default_rng(0)):
        xpu_inputs = [on("xpu:0", v) for v in inputs]
        cpu_inputs = [on("CPU", v) for v in inputs]

        def xpu_run():
            with pluggable.device("xpu:0"):
                dispatch.execute(op, xpu_inputs, attrs)
            device.synchronize()

        def cpu_run():
            with pluggable.device("CPU"):
                dispatch.execute(op, cpu_inputs, attrs)

        rows.append((title, *paired(xpu_run, cpu_run, repeats)))
    size = 1 << 20
    with pluggable.device("xpu:0"):
        var, m, v = (pluggable.Variable(np.zeros(size, np.float32)) for _ in range(3))
    with pluggable.device("CPU"):
        cvar, cm, cv = (pluggable.Variable(np.zeros(size, np.float32)) for _ in range(3))
    grad = np.ones(size, np.float32)
    scalars = [np.float32(s) for s in (0.9, 0.999, 0.001, 0.9, 0.999, 1e-7)]
    xg, cg = on("xpu:0", grad), on("CPU", grad)

    def adam_xpu():
        with pluggable.device("xpu:0"):
            dispatch.execute("ResourceApplyAdam", [var, m, v, *scalars, xg])
        device.synchronize()

    def adam_cpu():
        with pluggable.device("CPU"):
            dispatch.execute("ResourceApplyAdam", [cvar, cm, cv, *scalars, cg])

    rows.append(("ResourceApplyAdam, 2^20 float32", *paired(adam_xpu, adam_cpu, repeats)))
    report.pairs(f"Kernels: one op, float32, {repeats} rounds", rows, "XPU:0", "CPU (NumPy)",
                 "ms", 1e3)


def main() -> None:
    global THREADS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=3,
                        help="training steps per sample of the whole-step tables")
    parser.add_argument("--threads", type=int, default=THREADS,
                        help="threads of an XPU kernel, of PyTorch and of TensorFlow")
    parser.add_argument("--no-kernels", action="store_true",
                        help="only the whole training steps")
    add_write_flag(parser)
    args = parser.parse_args()
    if args.threads < 1:
        parser.error(f"--threads must be at least 1, not {args.threads}")
    THREADS = args.threads
    os.environ["XPU_KERNEL_THREADS"] = str(THREADS)  # read when the XPU's helpers start
    report = Report(__file__, "Training: whole steps against PyTorch and TensorFlow, and "
                    "their kernels against NumPy", NOTE,
                    uses=("numpy", "torch"))
    training_steps(report, args.repeats, args.steps)
    if not args.no_kernels:
        kernels(report, args.repeats)
    report.finish(args.write)


if __name__ == "__main__":
    main()
