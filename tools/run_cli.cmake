# Runs the kscope CLI for one ctest case:
#   -DCLI=... -DEXPECTED_EXIT=n -DREGEX=... [-DNOT_REGEX=...] -DARGS=a;b;c
# Checks the exit code, that stdout+stderr (newlines as spaces) match REGEX and, when
# NOT_REGEX is given, that they do not match it (a failing gate must never print PASS).
# Options for the hostile-input cases (tools/CMakeLists.txt):
#   -DSTDOUT_FILE=/dev/full   stdout goes to that file (REGEX then sees stderr only)
#   -DINPUT_FILE=path         standard input comes from that file ('-' as an input)
#   -DMEMORY_LIMIT_MB=512     run under `ulimit -v` (sh), so that a reader that allocates
#                             without bound fails the case instead of swapping
#   -DGENERATE=kind -DGENERATED=path   write an input first, at test time, so that large
#                             or deep files need not live in the repository:
#       nested       a report whose scopes array nests 100 000 arrays
#       many_scopes  a report with 65 537 scopes (one over the reader's limit)
#       sparse       a 300 MiB sparse file (over the 256 MiB input limit; no disk used)
if(DEFINED GENERATE)
  if(GENERATE STREQUAL "nested")
    string(REPEAT "[" 100000 open)
    string(REPEAT "]" 100000 close)
    file(WRITE "${GENERATED}" "{\"schema\": \"kscope.report/1\", \"scopes\": [${open}${close}]}\n")
  elseif(GENERATE STREQUAL "many_scopes")
    string(REPEAT "{\"path\": \"a\"}, " 65536 scopes)
    file(WRITE "${GENERATED}" "{\"schema\": \"kscope.report/1\", \"scopes\": [${scopes}{\"path\": \"a\"}]}\n")
  elseif(GENERATE STREQUAL "sparse")
    file(REMOVE "${GENERATED}")
    execute_process(COMMAND truncate -s 300M "${GENERATED}" RESULT_VARIABLE made)
    if(NOT made EQUAL 0)
      message(FATAL_ERROR "cannot make the sparse file ${GENERATED} (truncate: ${made})")
    endif()
  else()
    message(FATAL_ERROR "run_cli.cmake: unknown GENERATE kind '${GENERATE}'")
  endif()
endif()

set(command ${CLI} ${ARGS})
if(DEFINED MEMORY_LIMIT_MB AND NOT MEMORY_LIMIT_MB STREQUAL "")
  math(EXPR limit_kb "${MEMORY_LIMIT_MB} * 1024")
  set(command sh -c "ulimit -v ${limit_kb} && exec \"$0\" \"$@\"" ${CLI} ${ARGS})
endif()
if(DEFINED STDOUT_FILE AND NOT STDOUT_FILE STREQUAL "")
  execute_process(COMMAND ${command} RESULT_VARIABLE code OUTPUT_FILE "${STDOUT_FILE}" ERROR_VARIABLE err)
  set(out "")
elseif(DEFINED INPUT_FILE AND NOT INPUT_FILE STREQUAL "")
  execute_process(COMMAND ${command} RESULT_VARIABLE code INPUT_FILE "${INPUT_FILE}" OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
else()
  execute_process(COMMAND ${command} RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
endif()
if(DEFINED GENERATE AND GENERATE STREQUAL "sparse")
  file(REMOVE "${GENERATED}")
endif()
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
