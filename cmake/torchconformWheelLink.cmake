# tc_wheel_link_options(<out-var> <torch-install-prefix>)
#
# A pip wheel keeps the CUDA libraries that libtorch_cuda.so needs in site-packages/nvidia/*/lib and
# finds them at run time through its own RPATH; the linker needs to be told where they are, or it
# resolves libnccl.so.2 against an older system NCCL and fails on missing symbols. Sets <out-var> to
# one -Wl,-rpath-link option per such directory (empty for a LibTorch that is not a wheel).
#
# Used by the build (cmake/TorchConformTorch.cmake) and installed with torchconformConfig.cmake,
# which puts the options on torchconform::checks for the user's LibTorch.
function(tc_wheel_link_options out torch_install_prefix)
  # A glob over directories of the installed wheel (not over sources): their names carry versions.
  file(GLOB _dirs LIST_DIRECTORIES true "${torch_install_prefix}/../nvidia/*/lib")
  set(_opts "")
  foreach(_d IN LISTS _dirs)
    list(APPEND _opts "-Wl,-rpath-link,${_d}")
  endforeach()
  set(${out} "${_opts}" PARENT_SCOPE)
endfunction()
