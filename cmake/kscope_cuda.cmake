# Attaches the CUDA pieces kscope needs to an INTERFACE target: the runtime (never libcuda
# or libcupti: those are reached at run time, so binaries start on machines without a
# driver), the header-only NVTX3 headers, and the KSCOPE_HAS_CUDA definition the headers
# test. Called for the source-tree target (wrapped in BUILD_INTERFACE, so the exported
# target carries no absolute toolkit paths) and again by kscopeConfig.cmake, so that an
# installed kscope follows the consumer's CUDA Toolkit, not the installer's.
function(kscope_attach_cuda target)
  set(wrap_begin "")
  set(wrap_end "")
  if(ARGV1 STREQUAL "BUILD_INTERFACE")
    set(wrap_begin "$<BUILD_INTERFACE:")
    set(wrap_end ">")
  endif()
  if(TARGET CUDA::cudart)
    target_link_libraries(${target} INTERFACE ${wrap_begin}CUDA::cudart${wrap_end})
    # NVTX3 is header-only and ships in the toolkit's include directory.
    target_include_directories(${target} SYSTEM INTERFACE ${wrap_begin}${CUDAToolkit_INCLUDE_DIRS}${wrap_end})
    target_compile_definitions(${target} INTERFACE ${wrap_begin}KSCOPE_HAS_CUDA=1${wrap_end}
      "${wrap_begin}KSCOPE_CUDA_LIBRARY_DIR=\"${CUDAToolkit_LIBRARY_DIR}\"${wrap_end}")
  else()
    target_compile_definitions(${target} INTERFACE ${wrap_begin}KSCOPE_HAS_CUDA=0${wrap_end})
  endif()
endfunction()
