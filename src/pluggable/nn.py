"""``pluggable.nn``: the functions of `pluggable.ops` that TensorFlow has in ``tf.nn``, under
those names and with those parameters (``nn.relu(features)``, ``nn.conv2d(input, filters,
strides, padding)``, ``nn.max_pool2d``, ``nn.softmax_cross_entropy_with_logits(labels,
logits)``, ...). They are the same functions as ``pluggable.ops.<name>``."""
from __future__ import annotations

from .ops import (bias_add, conv2d, elu, leaky_relu, log_softmax, max_pool, max_pool2d, relu,
                  relu6, selu, sigmoid, softmax, softmax_cross_entropy_with_logits, softplus,
                  softsign, sparse_softmax_cross_entropy_with_logits, tanh)

__all__ = ["bias_add", "conv2d", "elu", "leaky_relu", "log_softmax", "max_pool", "max_pool2d",
           "relu", "relu6", "selu", "sigmoid", "softmax", "softmax_cross_entropy_with_logits",
           "softplus", "softsign", "sparse_softmax_cross_entropy_with_logits", "tanh"]
