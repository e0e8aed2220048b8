#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, and runs the test suite on the
# default OpenCL device (pocl on a machine without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
meson test -C build --print-errorlogs
