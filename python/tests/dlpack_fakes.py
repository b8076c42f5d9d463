"""Stand-ins for the DLPack tests with no device: a foreign CUDA array at a made-up address
(its __dlpack__ hands out a fresh capsule each time and records the consumer's stream) and a
host buffer in place of bq_malloc's memory."""
import ctypes

from baracuda_quant import dlpack

_next = [0x200000]


class Producer:
    """A foreign CUDA array: __dlpack__ hands out a fresh capsule each time."""

    def __init__(self, shape, dtype, strides=None):
        self.arr = dlpack.DeviceArray(_next[0], shape, dtype, 0, strides=strides)
        _next[0] += 1 << 24
        self.streams = []

    def __dlpack__(self, stream=None):
        self.streams.append(stream)
        return self.arr.__dlpack__()

    def __dlpack_device__(self):
        return self.arr.__dlpack_device__()


class HostBuffer:
    def __init__(self, nbytes):
        self.buf = ctypes.create_string_buffer(max(int(nbytes), 1) + 256)
        self.ptr = (ctypes.addressof(self.buf) + 255) // 256 * 256
        self.nbytes = nbytes
