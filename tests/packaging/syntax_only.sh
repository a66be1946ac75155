#!/bin/sh
# Compiler launcher of xdev_header_check: runs the compile command it is given with -fsyntax-only
# (the header is parsed and the templates it uses are instantiated and checked, with the same
# warnings; no code is generated, which is most of a header TU's time), then creates the object
# file the build expects, empty, so that an up-to-date tree does not check again. The dependency
# file (-MD) is written as in a real compile, so a header edit checks again the TUs that include it.
out=
prev=
for arg in "$@"; do
  if [ "$prev" = "-o" ]; then out=$arg; fi
  prev=$arg
done
"$@" -fsyntax-only || exit
[ -z "$out" ] || : > "$out"
