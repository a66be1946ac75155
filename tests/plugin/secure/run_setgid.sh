#!/usr/bin/env bash
# Secure-execution mode for real (docs/security.md): a copy of secure_probe made setgid, run under
# setpriv as an unprivileged user with XDEV_PLUGIN_PATH pointing at a plugin whose constructor
# writes a marker file. Privileged, the marker must not appear; the same run without the setgid
# bit must create it (so the test can fail). Exit 77 (skipped) where the setup is impossible:
# not root, no setpriv, or a scratch file system mounted nosuid.
# Usage: run_setgid.sh <secure_probe> <fixture plugin .so> <scratch directory>
set -euo pipefail
probe=$1 plugin=$2 scratch=$3
[[ $(id -u) == 0 ]] || { echo "skipped: needs root to make a setgid copy and to drop to another user"; exit 77; }
command -v setpriv >/dev/null || { echo "skipped: setpriv (util-linux) is not installed"; exit 77; }
nobody=65534
rm -rf "$scratch"
mkdir -p "$scratch/bin" "$scratch/plugins" "$scratch/markers"
chmod 0755 "$scratch" "$scratch/bin" "$scratch/plugins"
chmod 0777 "$scratch/markers"  # the unprivileged run writes its marker here
if findmnt -n -o OPTIONS --target "$scratch" | tr ',' '\n' | grep -qx nosuid; then
  echo "skipped: $scratch is on a file system mounted nosuid (the setgid bit would be ignored)"
  exit 77
fi
# Every directory above the scratch directory must let the unprivileged user through.
if ! setpriv --reuid=$nobody --regid=$nobody --clear-groups test -x "$scratch/bin"; then
  echo "skipped: uid $nobody cannot reach $scratch"
  exit 77
fi
cp "$plugin" "$scratch/plugins/"
chmod 0755 "$scratch/plugins/"*
cp "$probe" "$scratch/bin/probe"
cp "$probe" "$scratch/bin/probe_setgid"
chown root:root "$scratch/bin/probe" "$scratch/bin/probe_setgid"
chmod 0755 "$scratch/bin/probe"
chmod 2755 "$scratch/bin/probe_setgid"

run() {
  setpriv --reuid=$nobody --regid=$nobody --clear-groups \
    env XDEV_PLUGIN_PATH="$scratch/plugins" XDEV_TEST_MARKER_DIR="$scratch/markers" "$@"
}

echo "--- unprivileged copy (control): the plugin must load"
out=$(run "$scratch/bin/probe" 2>&1) || { echo "$out"; exit 1; }
echo "$out"
markers=("$scratch"/markers/*.constructor)
[[ -e ${markers[0]} ]] || { echo "FAIL: the control run did not load the plugin (no constructor marker)"; exit 1; }
[[ $out == *"secure_execution=0 plugins=1"* ]] || { echo "FAIL: unexpected control output"; exit 1; }
rm -f "$scratch"/markers/*

echo "--- setgid copy: secure-execution mode, the plugin must not be mapped"
out=$(run "$scratch/bin/probe_setgid" 2>&1) || { echo "$out"; exit 1; }
echo "$out"
markers=("$scratch"/markers/*)
if [[ -e ${markers[0]} ]]; then
  echo "FAIL: the plugin named by XDEV_PLUGIN_PATH ran in a setgid process: ${markers[*]}"
  exit 1
fi
[[ $out == *"secure_execution=1 plugins=0"* ]] || { echo "FAIL: the setgid run was not in secure-execution mode"; exit 1; }
[[ $out == *"xdev: secure-execution mode"* ]] || { echo "FAIL: secure-execution mode was not announced"; exit 1; }
rm -rf "$scratch"
echo "PASS"
