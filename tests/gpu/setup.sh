# Sourced by the device scripts: the environment every process there must run with (NVLink multicast off:
# it can take a shared host down), this checkout installed, and which GPU and when.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation . 2>&1 | grep -v -i warning
nvidia-smi -L; date -u
