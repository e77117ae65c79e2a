# The embed-and-export case, end to end: configure, build and install the embedding library
# (tests/consumer/embed_export) into a scratch prefix, then configure, build and run a
# project that finds only the embedder (embed_export/downstream). Any failing step fails,
# and so does a configuration without KSCOPE_INSTALL that does not fail as docs/building.md says.
#   -DSOURCE=.../embed_export -DBINARY=... -DPREFIX=... -DKSCOPE_SOURCE_DIR=... -DGENERATOR=...
file(REMOVE_RECURSE ${BINARY} ${PREFIX})
function(step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(rc)
    message(FATAL_ERROR "embed-and-export: ${what} failed: ${rc}")
  endif()
endfunction()
# First the failure KSCOPE_INSTALL=ON prevents, so that docs/building.md's reason stays true.
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE} -B ${BINARY}/without_install -G ${GENERATOR}
    -DKSCOPE_SOURCE_DIR=${KSCOPE_SOURCE_DIR} -DEMBEDDER_SETS_KSCOPE_INSTALL=OFF
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(REPLACE "\n" " " flat "${out}${err}")
if(rc EQUAL 0 OR NOT flat MATCHES "requires target \"kscope\" that is not in +any export set")
  message(FATAL_ERROR "embed-and-export without KSCOPE_INSTALL: expected the export-set error, got ${rc}:\n${out}${err}")
endif()
step("embedder configure" ${CMAKE_COMMAND} -S ${SOURCE} -B ${BINARY}/embedder -G ${GENERATOR}
  -DKSCOPE_SOURCE_DIR=${KSCOPE_SOURCE_DIR} -DCMAKE_BUILD_TYPE=Release)
step("embedder build" ${CMAKE_COMMAND} --build ${BINARY}/embedder)
step("embedder install" ${CMAKE_COMMAND} --install ${BINARY}/embedder --prefix ${PREFIX})
if(NOT EXISTS ${PREFIX}/share/kscope/cmake/kscopeConfig.cmake)
  message(FATAL_ERROR "embed-and-export: KSCOPE_INSTALL=ON did not install kscope's package into ${PREFIX}")
endif()
step("downstream configure" ${CMAKE_COMMAND} -S ${SOURCE}/downstream -B ${BINARY}/downstream -G ${GENERATOR}
  -DCMAKE_PREFIX_PATH=${PREFIX} -DCMAKE_BUILD_TYPE=Release)
step("downstream build" ${CMAKE_COMMAND} --build ${BINARY}/downstream)
step("downstream run" ${BINARY}/downstream/downstream)
message(STATUS "embed-and-export: the embedder installed and exported, its user built and ran")
