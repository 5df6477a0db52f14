"""Load on the GPU from another process, for gpubench check's acceptance (tests/gpu/run_check.sh):

    python3 tests/gpu/cotenant.py matmul SECONDS   bf16 8192³ products back to back (a training job's GEMMs)
    python3 tests/gpu/cotenant.py hog SECONDS      a spinning kernel on half the SMs, relaunched every 100 ms

The hog's blocks each take a whole SM (1024 threads and most of its shared memory), so one launch holds half the
SMs; without MPS the GPU time-slices another process's kernels with it, as it does any two processes."""

import sys
import time

import torch


def matmul(seconds: float) -> None:
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    end = time.time() + seconds
    while time.time() < end:
        for _ in range(10):
            a @ b
        torch.cuda.synchronize()


def hog(seconds: float) -> None:
    import cupy as cp
    import numpy as np

    props = torch.cuda.get_device_properties(0)
    sms = props.multi_processor_count
    kernel = cp.RawKernel(r'''
extern "C" __global__ void spin(long long cycles) {
    extern __shared__ char hold[];
    long long t0 = clock64();
    while (clock64() - t0 < cycles) { if (threadIdx.x == 1024) hold[0] = 1; }
}''', "spin")
    smem = 200 * 1024
    kernel.max_dynamic_shared_size_bytes = smem
    cycles = np.int64(2e8)  # about 100 ms at 2 GHz
    end = time.time() + seconds
    while time.time() < end:
        kernel((sms // 2,), (1024,), (cycles,), shared_mem=smem)
        cp.cuda.Device().synchronize()


if __name__ == "__main__":
    mode, seconds = sys.argv[1], float(sys.argv[2])
    print(f"cotenant {mode} pid {__import__('os').getpid()} for {seconds:.0f} s", flush=True)
    {"matmul": matmul, "hog": hog}[mode](seconds)
