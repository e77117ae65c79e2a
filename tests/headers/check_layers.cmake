# Checks the layer rule of docs/architecture.md: a header under include/kscope/<folder>/
# includes kscope headers only from its own folder or from folders earlier in the layer
# order; only the umbrella and the four entry headers sit at the top level; with SOURCE_DIR,
# tools/ and examples/ never reach into a detail/ header or namespace; no virtual function is
# declared without KSCOPE_DECL (below). Fails with the list of offences.
#   cmake -DINCLUDE_DIR=<repo>/include -DSOURCE_DIR=<repo> -P check_layers.cmake
cmake_policy(SET CMP0007 NEW)
set(layers core device scope cupti counters warp_stalls activity pm_sampling serving report verdict session bench)
file(GLOB_RECURSE headers RELATIVE ${INCLUDE_DIR}/kscope ${INCLUDE_DIR}/kscope/*.hpp)
set(violations "")
set(checked 0)
foreach(header IN LISTS headers)
  string(REGEX MATCH "^[a-z_]+/" top "${header}")
  if(top STREQUAL "")
    # The top level holds the umbrella and the four entry headers (stable paths), nothing else.
    if(NOT header MATCHES "^(kscope|scope|bench|stats|roofline)\\.hpp$")
      list(APPEND violations "${header}: only kscope.hpp, scope.hpp, bench.hpp, stats.hpp and roofline.hpp sit at the top level")
    endif()
    continue()
  endif()
  string(REPLACE "/" "" top "${top}")
  list(FIND layers ${top} own_rank)
  if(own_rank LESS 0)
    list(APPEND violations "${header}: folder '${top}' is not a layer")
    continue()
  endif()
  # A virtual function declared in its class and defined after it must be declared
  # KSCOPE_DECL (inline in header-only mode): otherwise it is the class's key function, and
  # g++ emits the vtable, so every virtual function and all they call, in every file that
  # includes the header (an empty file including kscope.hpp compiled 1 900 functions, 53 s).
  file(STRINGS ${INCLUDE_DIR}/kscope/${header} virtuals REGEX "(^[ \t]*virtual[ \t].*[)][^{}]*;|[ \t](override|final)[ \t]*;)[ \t]*(//.*)?$")
  foreach(line IN LISTS virtuals)
    # (a line's ';' splits it into list items: only the part with the declaration counts)
    if(line MATCHES "[)]" AND NOT line MATCHES "= *0|= *default|= *delete|KSCOPE_DECL|inline")
      string(STRIP "${line}" line)
      list(APPEND violations "${header}: a virtual function declared without KSCOPE_DECL (the class's key function): ${line}")
    endif()
  endforeach()
  get_filename_component(dir ${INCLUDE_DIR}/kscope/${header} DIRECTORY)
  file(STRINGS ${INCLUDE_DIR}/kscope/${header} lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\".*$" "\\1" target "${line}")
    get_filename_component(resolved ${dir}/${target} ABSOLUTE)
    file(RELATIVE_PATH rel ${INCLUDE_DIR}/kscope ${resolved})
    string(REGEX MATCH "^[a-z_]+/" target_top "${rel}")
    string(REPLACE "/" "" target_top "${target_top}")
    list(FIND layers "${target_top}" target_rank)
    math(EXPR checked "${checked} + 1")
    if(target_rank LESS 0 OR target_rank GREATER own_rank)
      list(APPEND violations "${header} includes ${rel}")
    endif()
  endforeach()
endforeach()
# detail/ is private: the tool and the examples use public names only, so that what users
# would have to spell is always public (docs/architecture.md, "Rules").
if(DEFINED SOURCE_DIR)
  file(GLOB_RECURSE front_ends ${SOURCE_DIR}/tools/*.cpp ${SOURCE_DIR}/tools/*.hpp ${SOURCE_DIR}/examples/*.cpp
       ${SOURCE_DIR}/examples/*.cu ${SOURCE_DIR}/examples/*.hpp ${SOURCE_DIR}/examples/*.cuh)
  foreach(source IN LISTS front_ends)
    file(STRINGS ${source} uses REGEX "detail::|/detail/")
    file(RELATIVE_PATH rel ${SOURCE_DIR} ${source})
    foreach(line IN LISTS uses)
      string(STRIP "${line}" line)
      list(APPEND violations "${rel} reaches into detail: ${line}")
    endforeach()
  endforeach()
endif()
if(violations)
  list(JOIN violations "\n  " text)
  string(REPLACE ";" " -> " order "${layers}")
  message(FATAL_ERROR "include against the layer order ${order}:\n  ${text}")
endif()
message(STATUS "layer order kept: ${checked} includes in ${INCLUDE_DIR}/kscope checked")
