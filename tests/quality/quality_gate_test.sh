#!/usr/bin/env bash
# Shows that CI fails on a finding: scripts/quality, run on a scratch git repository
# with one misformatted file and one clang-tidy finding (bugprone-use-after-move), must
# exit non-zero and name each file with its check; once both are fixed it must pass,
# and its clang-tidy cache must skip the passed file but never hide a new finding.
# The sources are written here, not kept as files, so the real tree stays clean.
#
#   quality_gate_test.sh <checkout>      # exit 77 (CTest: skipped) without the tools
set -uo pipefail
checkout=$(cd "${1:?usage: quality_gate_test.sh <checkout>}" && pwd)

for tool in git clang-format clang-tidy python3; do
  if ! command -v "$tool" > /dev/null; then
    echo "SKIP: $tool is not installed (scripts/setup installs it)"
    exit 77
  fi
done

scratch=$(mktemp -d "${TMPDIR:-/tmp}/quality_gate.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

mkdir -p "$scratch/core/src" "$scratch/build"
cp "$checkout/.clang-format" "$checkout/.clang-tidy" "$scratch/"
printf 'int   answer( ) {return 42;}\n' > "$scratch/core/src/misformatted.cpp"
cat > "$scratch/core/src/use_after_move.cpp" << 'EOF'
#include <string>
#include <utility>

std::size_t moved_length(std::string text) {
  std::string other = std::move(text);
  return text.size() + other.size();
}
EOF
cat > "$scratch/build/compile_commands.json" << EOF
[{"directory": "$scratch", "file": "core/src/use_after_move.cpp",
  "command": "c++ -std=c++17 -c core/src/use_after_move.cpp -o /dev/null"}]
EOF
git -C "$scratch" init -q && git -C "$scratch" add core .clang-format .clang-tidy \
  || fail "cannot make the scratch repository in $scratch"

run_quality() {
  QUALITY_ROOT="$scratch" BUILD_DIR=build CHECKS=format,tidy JOBS=1 TIDY_CACHE="$scratch/tidy-cache" \
    "$checkout/scripts/quality" 2>&1
}

out=$(run_quality)
rc=$?
echo "$out"
[ $rc -ne 0 ] || fail "scripts/quality exited 0 on a tree with a format and a tidy finding"
grep -q 'misformatted\.cpp.*clang-format-violations' <<< "$out" \
  || fail "the output does not name misformatted.cpp and clang-format-violations"
grep -q 'use_after_move\.cpp.*bugprone-use-after-move' <<< "$out" \
  || fail "the output does not name use_after_move.cpp and bugprone-use-after-move"

# The control: the same tree with both findings fixed passes, so the failures above
# came from the findings and not from the set-up.
printf 'int answer() { return 42; }\n' > "$scratch/core/src/misformatted.cpp"
sed -i 's/return text.size() + other.size();/return other.size();/' \
  "$scratch/core/src/use_after_move.cpp"
out=$(run_quality)
rc=$?
[ $rc -eq 0 ] || { echo "$out"; fail "scripts/quality failed on the fixed tree (exit $rc)"; }

# The clang-tidy cache: a file that passed is skipped while nothing it reads changes,
# and analysed again (finding included) once it does.
out=$(run_quality)
grep -q '1 files, 0 not passed before' <<< "$out" || { echo "$out"; fail "the passed file was analysed again"; }
sed -i 's/return other.size();/return text.size() + other.size();/' \
  "$scratch/core/src/use_after_move.cpp"
out=$(run_quality)
rc=$?
[ $rc -ne 0 ] && grep -q 'use_after_move\.cpp.*bugprone-use-after-move' <<< "$out" \
  || { echo "$out"; fail "the cache hid the finding of a changed file"; }
echo "PASS: scripts/quality fails on each finding, passes once they are fixed, and its cache hides none"
