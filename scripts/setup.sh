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
  libclblast-dev libopenblas-dev                # benchmark baselines
  libpng-dev                                    # PNG plots
  libcjson-dev                                  # Hugging Face config.json reader
  libvulkan-dev glslc                           # Vulkan backend: loader, headers, GLSL -> SPIR-V
  spirv-tools                                   # spirv-val: the suite validates every embedded SPIR-V module
  mesa-vulkan-drivers vulkan-validationlayers   # lavapipe (a CPU Vulkan device) and the validation layer
)
scripts/install-missing.sh "${packages[@]}"

if [ ! -f build/build.ninja ]; then
  meson setup build "$@"
elif [ $# -gt 0 ]; then
  meson configure build "$@"
fi
ninja -C build
