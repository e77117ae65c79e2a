# The installed kscope.pc, used the way a Makefile would: pkg-config gives the version and
# the flags, the compiler builds the consumer program with nothing else, and it runs.
#   -DPKG_CONFIG=... -DPREFIX=... -DCXX=... -DSOURCE=.../main.cpp -DBINARY=... -DVERSION=x.y.z
set(ENV{PKG_CONFIG_PATH} ${PREFIX}/share/pkgconfig)
unset(ENV{PKG_CONFIG_LIBDIR})
function(pkg out)
  execute_process(COMMAND ${PKG_CONFIG} ${ARGN} kscope RESULT_VARIABLE rc OUTPUT_VARIABLE text ERROR_VARIABLE err
    OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(rc)
    message(FATAL_ERROR "pkg-config ${ARGN} kscope failed (${rc}): ${err}")
  endif()
  set(${out} "${text}" PARENT_SCOPE)
endfunction()
pkg(version --modversion)
if(NOT version STREQUAL VERSION)
  message(FATAL_ERROR "kscope.pc says version '${version}', the project ${VERSION}")
endif()
pkg(cflags --cflags)
pkg(libs --libs)
# The prefix is found relative to the .pc file, so the path may read .../share/pkgconfig/../..
string(REGEX MATCH "-I([^ ]+)" include_flag "${cflags}")
get_filename_component(include_dir "${CMAKE_MATCH_1}" REALPATH)
get_filename_component(expected_dir "${PREFIX}/include" REALPATH)
if(NOT include_dir STREQUAL expected_dir)
  message(FATAL_ERROR "kscope.pc's Cflags '${cflags}' do not name ${PREFIX}/include")
endif()
separate_arguments(cflags UNIX_COMMAND "${cflags}")
separate_arguments(libs UNIX_COMMAND "${libs}")
file(REMOVE_RECURSE ${BINARY})
file(MAKE_DIRECTORY ${BINARY})
# KSCOPE_HAS_CUDA=0: the CPU-only build the file describes, whatever CUDA headers the
# compiler would find on its own.
execute_process(COMMAND ${CXX} -std=c++17 -DKSCOPE_HAS_CUDA=0 ${cflags} ${SOURCE} -o ${BINARY}/consumer ${libs}
  RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "building the consumer with pkg-config's flags failed: ${rc}")
endif()
execute_process(COMMAND ${BINARY}/consumer RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "the pkg-config consumer failed: ${rc}")
endif()
message(STATUS "kscope.pc: version ${version}; built and ran the consumer with its flags")
