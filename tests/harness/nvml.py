"""pynvml's interface, for a host with two H100s (no NVIDIA GPU exists here)."""



class FakeNVML:
    """pynvml's functions, for two H100s; pid 2001 uses GPU 0 and 1."""

    class NVMLError(Exception):
        pass

    class _P:
        def __init__(self, pid, mem):
            self.pid, self.usedGpuMemory = pid, mem

    def __init__(self):
        self.calls = []

    def nvmlInit(self):
        self.calls.append("init")

    def nvmlShutdown(self):
        self.calls.append("shutdown")

    def nvmlDeviceGetCount(self):
        return 2

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetName(self, h):
        return b"NVIDIA H100 80GB HBM3"

    def nvmlDeviceGetUUID(self, h):
        return f"GPU-0000000{h}"

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        return [self._P(2001, (40 + h) * 2**30)]

    def nvmlDeviceGetGraphicsRunningProcesses(self, h):
        raise self.NVMLError("Not Supported")
