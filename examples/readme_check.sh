#!/bin/sh
# README.md's example is examples/plan_run.c, whole: the C block after "## The library in one
# example" must equal the file byte for byte (the suite builds and runs the file, so the README's
# example compiles and passes). usage: readme_check.sh README.md examples/plan_run.c
awk '/^## The library in one example/ {s = 1} s && /^```c$/ {c = 1; next} c && /^```$/ {exit} c {print}' "$1" |
  cmp -s - "$2" || { echo "README.md's example differs from $2: copy the file into it" >&2; exit 1; }
