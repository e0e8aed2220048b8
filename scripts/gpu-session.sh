#!/usr/bin/env bash
# The prepared H200 check of the kernels no session has yet run on a GPU (issues 26, 28, 29):
# correctness first, then the bench figures. From the project root, on a session lent a GPU:
#   ../shared/gpu/prepare.sh, then the device tool's run with
#   command: bash .gpu/run-gpu.sh --cmd 'bash scripts/gpu-session.sh'   carry: [".gpu"]   timeout_s: 600
# (add ROPEQK_GLSLANG / ROPEQK_SPIRV_VAL pointing at a glslang with cooperative matrices to build the
# tensor-core shaders there). BUILD: the kit's build folder; OUT: the folder that comes back.
B=${BUILD:-/tmp/b}; R=$B/tools/ropeqk; BE=$B/bench/ropeqk-bench; O=${OUT:-/tmp/o}/s1.txt
export XDG_CACHE_HOME=$(mktemp -d)
step() { local lim=$1; shift; echo "=== [$(date +%T)] $* (limit ${lim}s)"; timeout -k 5 "$lim" "$@" 2>&1; echo "=== rc=$?"; }
{
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
step 20 $R devices
step 60 env ROPEQK_DEVICE=NVIDIA $B/tests/test_paged_fast --tap -j1
step 120 env ROPEQK_DEVICE=NVIDIA $B/tests/test_attn_gpu --tap -j1
step 60 env ROPEQK_DEVICE=NVIDIA ROPEQK_PROFILE=gpu $B/tests/test_nonfinite --tap -j1
step 60 env ROPEQK_DEVICE=NVIDIA $BE --paged 131072 --runs 7
step 90 env ROPEQK_VK_COOPMAT=0 ROPEQK_DEVICE=vulkan $B/tests/test_vk_cm --verbose --tap -j1
step 90 env ROPEQK_DEVICE=vulkan $BE --vulkan --tensor-cores --runs 5 --warmup 2
step 60 env ROPEQK_DEVICE=NVIDIA $BE --attention --impl fused --shape s4096 --runs 5 --no-first-call
step 45 env ROPEQK_DEVICE=NVIDIA $BE --dense-decode 131072
step 45 env ROPEQK_DEVICE=vulkan $BE --vulkan --paged 131072 --runs 5
step 60 env ROPEQK_DEVICE=vulkan $B/tests/test_paged_fast --tap -j1
step 30 env ROPEQK_DEVICE=NVIDIA $R check --cases 100 --seed 1
step 30 env ROPEQK_DEVICE=vulkan $R check --cases 100 --seed 1
} 2>&1 | tee "$O"
