"""Floor 8: tensors — where they live and the device scope (`placement`), the `Tensor` and its
transfers between host and devices (`tensor`), and DLPack exchange (`dlpack`). The
operators of `Tensor` are attached by `pluggable.eager`, the floor above."""
