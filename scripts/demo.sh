#!/usr/bin/env bash
# The README's main job: installs what is missing, builds, and runs the demo (a Llama-sized fused
# RoPE + scores run on the default OpenCL device, checked against the scalar fp64 path).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >/dev/null
exec build/tools/ropeqk demo "$@"
