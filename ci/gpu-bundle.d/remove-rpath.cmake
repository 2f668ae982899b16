# cmake -DFILE=<elf> -P remove-rpath.cmake: drops the RPATH / RUNPATH of a binary (ci/gpu-bundle).
file(RPATH_REMOVE FILE "${FILE}")
