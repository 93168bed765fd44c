"""Streams and events: overlap copies and compute on several streams, order them with events,
and time the device work with a timer.

A device owns a compute stream and three copy streams. Work on one stream runs in order; work
on different streams may overlap, and an event recorded on one stream makes another stream
wait for exactly the work before it. Here a large buffer is uploaded in chunks on the
host-to-device stream while the compute stream fills a second buffer; the download waits,
through events, for both.
"""
import numpy as np

import pluggable


def main() -> None:
    device = pluggable.get_device("XPU:0")
    xpu = device.executor
    upload = device.host_to_device_stream
    compute = device.compute_stream
    download = device.device_to_host_stream

    chunks = 4
    data = np.arange(1 << 20, dtype=np.float32)
    out = np.empty_like(data)
    ones = np.empty(1 << 20, dtype=np.float32)
    part = data.nbytes // chunks

    with xpu.allocate(data.nbytes) as memory, xpu.allocate(ones.nbytes) as filled, \
            xpu.create_event() as uploaded, xpu.create_event() as computed, \
            xpu.create_timer() as timer:
        # Upload in chunks: each copy is queued at once and runs on the stream's worker.
        for i in range(chunks):
            xpu.memcpy_htod(upload, memory.view(i * part, part), data[i * part // 4:(i + 1) * part // 4])
        uploaded.record(upload)

        # Meanwhile the compute stream fills the other buffer with 1.0f, timed on the device.
        timer.start(compute)
        xpu.memset32(compute, filled, 0x3F800000)
        timer.stop(compute)
        computed.record(compute)

        # The download stream waits for both, then copies both buffers back.
        uploaded.wait(download)
        computed.wait(download)
        xpu.memcpy_dtoh(download, out, memory)
        xpu.memcpy_dtoh(download, ones, filled)
        download.host_callback(lambda: print("downloads done, on the stream's own thread"))
        download.synchronize()

        assert (out == data).all() and (ones == 1.0).all()
        print(f"uploaded {data.nbytes} bytes in {chunks} chunks; the fill took "
              f"{timer.nanoseconds() / 1e3:.1f} us on the device")


if __name__ == "__main__":
    main()
