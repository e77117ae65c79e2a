# Runs the kscope CLI for one ctest case:
#   -DCLI=... -DEXPECTED_EXIT=n -DREGEX=... [-DNOT_REGEX=...] -DARGS=a;b;c
# Checks the exit code, that stdout+stderr (newlines as spaces) match REGEX and, when
# NOT_REGEX is given, that they do not match it (a failing gate must never print PASS).
execute_process(COMMAND ${CLI} ${ARGS} RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(all "${out}${err}")
string(REPLACE "\n" " " flat "${all}")
if(NOT code STREQUAL "${EXPECTED_EXIT}")
  message(FATAL_ERROR "kscope ${ARGS}: exit code ${code}, expected ${EXPECTED_EXIT}\n${all}")
endif()
if(NOT flat MATCHES "${REGEX}")
  message(FATAL_ERROR "kscope ${ARGS}: output does not match '${REGEX}'\n${all}")
endif()
if(DEFINED NOT_REGEX AND NOT NOT_REGEX STREQUAL "" AND flat MATCHES "${NOT_REGEX}")
  message(FATAL_ERROR "kscope ${ARGS}: output matches '${NOT_REGEX}', which it must not\n${all}")
endif()
message(STATUS "exit ${code} as expected; output matches")
