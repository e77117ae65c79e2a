# Configures, builds and runs the consumer project (tests/consumer/project) in one MODE;
# any failing step fails the test.
file(REMOVE_RECURSE ${BINARY})
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE} -B ${BINARY} -G ${GENERATOR}
    -DKSCOPE_CONSUMER_MODE=${MODE} -DKSCOPE_CONSUMER_CUDA=${CUDA}
    -DCMAKE_PREFIX_PATH=${PREFIX} -DKSCOPE_SOURCE_DIR=${KSCOPE_SOURCE_DIR} ${EXTRA}
  RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "consumer configure failed (${MODE}, CUDA=${CUDA}): ${rc}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BINARY} RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "consumer build failed (${MODE}, CUDA=${CUDA}): ${rc}")
endif()
execute_process(COMMAND ${BINARY}/consumer RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "consumer program failed (${MODE}, CUDA=${CUDA}): ${rc}")
endif()
if(EXISTS ${BINARY}/consumer_compiled)
  execute_process(COMMAND ${BINARY}/consumer_compiled RESULT_VARIABLE rc OUTPUT_QUIET)
  if(rc)
    message(FATAL_ERROR "compiled-mode consumer failed (${MODE}, CUDA=${CUDA}): ${rc}")
  endif()
endif()
message(STATUS "consumer ${MODE} CUDA=${CUDA}: configured, built and ran")
