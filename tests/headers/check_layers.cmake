# Checks the layer rule of docs/architecture.md: a header under include/kscope/<folder>/
# includes kscope headers only from the folders its kind of layer may reach (below); only
# the umbrella and the four entry headers sit at the top level; with SOURCE_DIR, tools/ and
# examples/ never reach into a detail/ header or namespace; no virtual function is declared
# without KSCOPE_DECL (below). Fails with the list of offences.
#   cmake -DINCLUDE_DIR=<repo>/include -DSOURCE_DIR=<repo> -P check_layers.cmake
#
# The shape: the base layers in order (each includes its own folder and those before it);
# the features side by side (each includes its own folder and the base, never another
# feature: what two features share goes down into cupti/ or evidence/); report/ and
# verdict/ on the base (verdict/ on report/ too), never on a feature, so the report reads
# only evidence; session/ and bench/, the composers, on everything before them.
cmake_policy(SET CMP0007 NEW)
set(base_layers core device scope cupti evidence)
set(feature_layers counters warp_stalls activity pm_sampling)
set(upper_layers report verdict session bench)
set(composers session bench)  # the upper layers that may include a feature
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
  list(FIND base_layers ${top} own_base)
  list(FIND feature_layers ${top} own_feature)
  list(FIND upper_layers ${top} own_upper)
  if(own_base LESS 0 AND own_feature LESS 0 AND own_upper LESS 0)
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
    math(EXPR checked "${checked} + 1")
    if(target_top STREQUAL top)
      continue()  # its own folder
    endif()
    list(FIND base_layers "${target_top}" target_base)
    list(FIND feature_layers "${target_top}" target_feature)
    list(FIND upper_layers "${target_top}" target_upper)
    if(own_base GREATER_EQUAL 0)
      # A base layer: only the base layers before it.
      if(target_base LESS 0 OR target_base GREATER own_base)
        list(APPEND violations "${header} includes ${rel}: a base layer includes only the base layers before it")
      endif()
    elseif(own_feature GREATER_EQUAL 0)
      # A feature: its own folder and the base, never another feature.
      if(target_base LESS 0)
        list(APPEND violations "${header} includes ${rel}: a feature includes only its own folder and the base")
      endif()
    elseif(target_base LESS 0)
      # report/, verdict/, session/, bench/: the base, the upper layers before it, and
      # (session/ and bench/ only) the features.
      list(FIND composers ${top} composer)
      if(target_feature GREATER_EQUAL 0)
        if(composer LESS 0)
          list(APPEND violations "${header} includes ${rel}: ${top}/ reads evidence/, never a feature")
        endif()
      elseif(target_upper LESS 0 OR target_upper GREATER own_upper)
        list(APPEND violations "${header} includes ${rel}: ${top}/ includes only the upper layers before it")
      endif()
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
  string(REPLACE ";" " < " base "${base_layers}")
  string(REPLACE ";" ", " features "${feature_layers}")
  string(REPLACE ";" " < " upper "${upper_layers}")
  message(FATAL_ERROR "include against the layers (base ${base}; features ${features}; then ${upper}):\n  ${text}")
endif()
message(STATUS "layers kept: ${checked} includes in ${INCLUDE_DIR}/kscope checked")
