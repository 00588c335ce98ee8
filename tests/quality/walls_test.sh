#!/usr/bin/env bash
# The walls check (scripts/check_walls, run by scripts/quality in CI) passes on the tree
# and fails on a copy with one planted breach of each rule, naming the file and rule.
#
#   walls_test.sh <checkout>
set -uo pipefail
checkout=$(cd "${1:?usage: walls_test.sh <checkout>}" && pwd)
check="$checkout/scripts/check_walls"
fail() { echo "FAIL: $*"; exit 1; }

out=$(python3 "$check" "$checkout" 2>&1) || fail "the tree breaks a wall:
$out"
echo "$out"

scratch=$(mktemp -d "${TMPDIR:-/tmp}/walls_test.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/core"
cp -r "$checkout/apps" "$checkout/plugins" "$scratch/" || fail "cannot copy the tree"
cp -r "$checkout/core/include" "$checkout/core/src" "$scratch/core/" || fail "cannot copy core"

plant() { printf '%s\n' "$2" >> "$scratch/$1" || fail "cannot plant in $1"; }
plant plugins/cpu/cpu_plugin.cpp '#include "accel/plugin.hpp"'
plant plugins/cpu/cpu_device.cpp '#include <ATen/ATen.h>'
plant core/include/accel/backend.h '#include <vector>'
mkdir -p "$scratch/core/src/util"
printf "#pragma once\n#include <torch/torch.h>\n" > "$scratch/core/src/util/planted.hpp"
plant core/src/config/text.cpp '#include "util/planted.hpp"'
plant apps/accelrun/main.cpp '#include "launch/plan.hpp"'

out=$(python3 "$check" "$scratch" 2>&1)
rc=$?
echo "$out"
[ $rc -ne 0 ] || fail "check_walls exited 0 on a tree with planted breaches"
for expected in "plugins/cpu/cpu_plugin.cpp:[0-9]*: plugin-core-api: includes accel/plugin.hpp" \
                "plugins/cpu/cpu_device.cpp:[0-9]*: plugin-libtorch: includes the LibTorch header ATen/ATen.h" \
                "core/include/accel/backend.h:[0-9]*: backend-h-c: includes vector" \
                "core/src/config/text.cpp:[0-9]*: config-libtorch: needs LibTorch: .*torch/torch.h" \
                "apps/accelrun/main.cpp:[0-9]*: apps-core-src: includes launch/plan.hpp"; do
  echo "$out" | grep -q "^walls: $expected" || fail "no finding matching '$expected'"
done
[ "$(echo "$out" | grep -c '^walls: .*: .*: ')" -eq 5 ] || fail "expected exactly 5 findings"
echo "PASS"
