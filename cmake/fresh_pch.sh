#!/bin/sh
# fresh_pch.sh COMMAND...: the launcher of the precompiled header's compile (tc_torch_pch). Removes the
# .gch the command writes (its -o argument) before running it: GCC finds a .gch already lying there
# through the command's own -include, and ccache then keys the new header on the old one's bytes, so
# a build directory that remade its header stored it under a key no fresh build directory computes,
# and every object that uses it missed in the next clone (docs/testing.md).
prev=
for a in "$@"; do
  if [ "$prev" = "-o" ]; then
    case "$a" in *.gch) rm -f "$a" ;; esac
  fi
  prev=$a
done
exec "$@"
