# The CUDA architectures kscope's own examples, tests and benchmarks are built for when
# the user did not choose (CMAKE_CUDA_ARCHITECTURES, CUDAARCHS). A kernel built for the
# wrong architecture fails at launch ("no kernel image is available"), so:
#   - a GPU is visible at configure time: exactly its architecture(s): "native" where
#     CMake has it (3.24+), else the compute capabilities nvidia-smi reports;
#   - no GPU (a build machine, CI): a portable set: Ampere (80, 86), Ada (89), Hopper (90)
#     and, when this nvcc knows them, Blackwell (100, 120), as machine code, plus PTX of
#     the newest so that a later GPU can compile it at load time.
# The portable set costs compile time (about twice a one-architecture build for a
# kernel-light file); a GPU machine pays for one architecture only.
#
#   kscope_default_cuda_architectures(CMAKE_CUDA_ARCHITECTURES reason)
#   message(STATUS "${CMAKE_CUDA_ARCHITECTURES} (${reason})")

# The GPUs' compute capabilities as CMake architecture numbers ("90;86"), empty when
# nvidia-smi is missing, fails (no driver, no device, a driver too old for the query) or
# hangs.
function(kscope_visible_gpu_architectures out)
  set(${out} "" PARENT_SCOPE)
  find_program(KSCOPE_NVIDIA_SMI nvidia-smi)
  mark_as_advanced(KSCOPE_NVIDIA_SMI)
  if(NOT KSCOPE_NVIDIA_SMI)
    return()
  endif()
  execute_process(COMMAND ${KSCOPE_NVIDIA_SMI} --query-gpu=compute_cap --format=csv,noheader
    RESULT_VARIABLE rc OUTPUT_VARIABLE caps ERROR_QUIET TIMEOUT 30)
  if(NOT rc EQUAL 0)
    return()
  endif()
  string(REGEX MATCHALL "[0-9]+\\.[0-9]+" caps "${caps}")
  set(archs "")
  foreach(cap IN LISTS caps)
    string(REPLACE "." "" arch "${cap}")
    list(APPEND archs ${arch})
  endforeach()
  list(REMOVE_DUPLICATES archs)
  set(${out} "${archs}" PARENT_SCOPE)
endfunction()

# The architectures this nvcc can build for ("80;86;...;120"): nvcc --list-gpu-arch
# (CUDA 11.6+); failing that, the toolkit version decides (Blackwell from CUDA 12.8).
function(kscope_nvcc_architectures out)
  execute_process(COMMAND ${CMAKE_CUDA_COMPILER} --list-gpu-arch
    RESULT_VARIABLE rc OUTPUT_VARIABLE listed ERROR_QUIET TIMEOUT 60)
  set(archs "")
  if(rc EQUAL 0)
    string(REGEX MATCHALL "compute_[0-9]+" listed "${listed}")
    foreach(entry IN LISTS listed)
      string(REPLACE "compute_" "" arch "${entry}")
      list(APPEND archs ${arch})
    endforeach()
  endif()
  if(NOT archs)
    set(archs 80 86 89 90)
    if(CUDAToolkit_VERSION VERSION_GREATER_EQUAL 12.8)
      list(APPEND archs 100 120)
    endif()
  endif()
  set(${out} "${archs}" PARENT_SCOPE)
endfunction()

function(kscope_default_cuda_architectures out reason_out)
  kscope_visible_gpu_architectures(visible)
  if(visible)
    list(JOIN visible ", sm_" visible_text)
    if(CMAKE_VERSION VERSION_GREATER_EQUAL 3.24)
      set(${out} native PARENT_SCOPE)
      set(${reason_out} "native: the GPU of this machine, sm_${visible_text}" PARENT_SCOPE)
    else()
      set(${out} "${visible}" PARENT_SCOPE)
      set(${reason_out} "the GPU of this machine, sm_${visible_text}" PARENT_SCOPE)
    endif()
    return()
  endif()
  kscope_nvcc_architectures(known)
  set(portable "")
  foreach(arch 80 86 89 90 100 120)
    if(arch IN_LIST known)
      list(APPEND portable ${arch})
    endif()
  endforeach()
  if(NOT portable)
    message(WARNING "kscope: this nvcc knows none of sm_80..sm_120; building for its default architecture")
    unset(${out} PARENT_SCOPE)  # an empty CMAKE_CUDA_ARCHITECTURES is an error; unset is nvcc's default
    set(${reason_out} "nvcc's default" PARENT_SCOPE)
    return()
  endif()
  # Machine code for each; the newest also as PTX (an entry without -real is both).
  list(POP_BACK portable newest)
  list(TRANSFORM portable APPEND "-real")
  list(APPEND portable ${newest})
  set(${out} "${portable}" PARENT_SCOPE)
  set(${reason_out} "no GPU found at configure time: a portable set, PTX for sm_${newest}" PARENT_SCOPE)
endfunction()
