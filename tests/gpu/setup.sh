# Sourced by the device scripts: the environment every process there must run with (NVLink multicast off:
# it can take a shared host down), this checkout installed, and which GPU and when.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
# The lent image sets PYTHONDONTWRITEBYTECODE=1 and its torch has no bytecode, so every process there compiled
# torch's sources again (import torch 4.3-4.9 s, one H100, 2026-11-27). An install made by pip keeps bytecode;
# so that start-up times read what a user's install costs, Python may cache it here, outside the image's
# folders. BYTECODE=image keeps the image's setting.
if [[ ${BYTECODE:-cache} != image ]]; then
  unset PYTHONDONTWRITEBYTECODE
  export PYTHONPYCACHEPREFIX=/tmp/gpubench-pycache
fi
python3 -m pip install -q --no-deps --no-build-isolation . 2>&1 | grep -v -i warning
nvidia-smi -L; date -u
