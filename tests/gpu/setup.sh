# Sourced by the device scripts: the environment every process there must run with (NVLink multicast off:
# it can take a shared host down), this checkout installed, and which GPU and when.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
# The lent image sets PYTHONDONTWRITEBYTECODE=1 and its torch has no bytecode, so every process there compiled
# torch's sources again (import torch 4.3-4.9 s, one H100, 2026-11-27). An install made by pip keeps bytecode;
# so that start-up times read what a user's install costs, Python may cache it here, outside the image's
# folders. BYTECODE=image keeps the image's setting. pip compiles a package's sources as it installs it, so the
# first command after an install finds them compiled: BYTECODE=compile (the default) does the same here before anything
# is timed, for the packages gpubench imports; BYTECODE=cache leaves it to the first command that imports them
# (that command then pays 3-5 s a user's would not: a machine's first node check read 21.7 s against 14.6-17.8 s
# after it, one H200, 2026-11-28).
if [[ ${BYTECODE:-compile} != image ]]; then
  unset PYTHONDONTWRITEBYTECODE
  export PYTHONPYCACHEPREFIX=/tmp/gpubench-pycache
fi
python3 -m pip install -q --no-deps --no-build-isolation . 2>&1 | grep -v -i warning
if [[ ${BYTECODE:-compile} == compile ]]; then
  t0=$SECONDS
  python3 -c 'import importlib.util as u, os
for m in ("torch", "triton", "cupy", "numpy", "pandas", "pyarrow", "scipy", "matplotlib", "rich", "pynvml", "gpubench"):
    s = u.find_spec(m)
    if s and s.origin:
        print(os.path.dirname(s.origin))' | xargs -r python3 -m compileall -q -j 0 > /dev/null 2>&1
  echo "bytecode compiled in $((SECONDS - t0)) s (BYTECODE=compile)"
fi
nvidia-smi -L; date -u
