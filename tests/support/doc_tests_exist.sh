#!/bin/sh
# Every test a documentation page names in its tables' last column (`area.Suite.Name`) must be a
# test of this build: a row of docs/coming-from.md promises what that test shows, so a renamed or
# removed test fails here instead of leaving the row unbacked.
#   doc_tests_exist.sh <ctest> <build dir> <page.md>
set -eu
ctest=$1 build=$2 page=$3
names=$(sed -n 's/.*| `\([a-z_]*\.[A-Za-z_]*\.[A-Za-z0-9_]*\)` |$/\1/p' "$page")
[ -n "$names" ] || { echo "DOC TEST PROBLEM: $page names no test"; exit 1; }
all=$("$ctest" --test-dir "$build" -N | sed -n 's/^ *Test *#[0-9]*: //p')
missing=0 count=0
for n in $names; do
  count=$((count + 1))
  if ! printf '%s\n' "$all" | grep -qxF "$n"; then
    echo "DOC TEST PROBLEM: $page names $n, which is not a test of this build"
    missing=1
  fi
done
[ "$missing" -eq 0 ] && echo "all $count tests named by $page exist"
exit "$missing"
