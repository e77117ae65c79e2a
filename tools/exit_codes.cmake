# Checks the kscope tool's exit codes (ctest cli_exit_codes):
#   - README.md's table (the rows under "| exit code | meaning |") and the "exit codes:"
#     lines of `kscope --help` name the same codes in the same words (README's backticks
#     aside; a help line continued on the next, further indented, line is one entry);
#   - for every documented code, one case below makes the tool return exactly it, and no
#     case expects a code the table does not document.
#   cmake -DCLI=path/to/kscope -DREADME=README.md -DDATA=tests/data -DOUT=scratch_dir -P exit_codes.cmake
# CMake lists split at ';', which the texts hold: each ';' is swapped for a placeholder
# before a text is cut into lines, and swapped back in messages.
set(semicolon "<semicolon>")

# README: the table's rows, code -> text.
file(READ "${README}" readme)
string(FIND "${readme}" "| exit code | meaning |" table_start)
if(table_start LESS 0)
  message(FATAL_ERROR "README.md has no exit-code table (a '| exit code | meaning |' header)")
endif()
string(SUBSTRING "${readme}" ${table_start} -1 table)
string(FIND "${table}" "\n\n" table_end)
if(table_end GREATER 0)
  string(SUBSTRING "${table}" 0 ${table_end} table)
endif()
string(REPLACE ";" "${semicolon}" table "${table}")
string(REPLACE "\n" ";" table_lines "${table}")
set(readme_codes "")
foreach(line IN LISTS table_lines)
  if(line MATCHES "^\\| ([0-9]+) \\| (.*) \\|$")
    set(code ${CMAKE_MATCH_1})
    string(REPLACE "`" "" text "${CMAKE_MATCH_2}")
    list(APPEND readme_codes ${code})
    set(readme_${code} "${text}")
  endif()
endforeach()

# kscope --help: the lines after "exit codes:", code -> text.
execute_process(COMMAND ${CLI} --help RESULT_VARIABLE help_exit OUTPUT_VARIABLE help)
if(NOT help_exit EQUAL 0)
  message(FATAL_ERROR "kscope --help: exit code ${help_exit}")
endif()
string(FIND "${help}" "exit codes:\n" help_start)
if(help_start LESS 0)
  message(FATAL_ERROR "kscope --help prints no 'exit codes:' list")
endif()
string(SUBSTRING "${help}" ${help_start} -1 help)
string(REPLACE ";" "${semicolon}" help "${help}")
string(REPLACE "\n" ";" help_lines "${help}")
set(help_codes "")
set(current "")
foreach(line IN LISTS help_lines)
  if(line MATCHES "^  ([0-9]+)  (.*)$")
    set(current ${CMAKE_MATCH_1})
    list(APPEND help_codes ${current})
    set(help_${current} "${CMAKE_MATCH_2}")
  elseif(line MATCHES "^     (.*)$" AND NOT current STREQUAL "")
    set(help_${current} "${help_${current}} ${CMAKE_MATCH_1}")
  else()
    set(current "")
  endif()
endforeach()

set(failures "")
if(NOT readme_codes STREQUAL help_codes)
  list(APPEND failures "codes differ: README.md has '${readme_codes}', kscope --help '${help_codes}'")
endif()
foreach(code IN LISTS readme_codes)
  if(DEFINED help_${code} AND NOT readme_${code} STREQUAL help_${code})
    string(REPLACE "${semicolon}" "\;" r "${readme_${code}}")
    string(REPLACE "${semicolon}" "\;" h "${help_${code}}")
    list(APPEND failures "code ${code}: README.md says '${r}', kscope --help says '${h}'")
  endif()
endforeach()
if(readme_codes STREQUAL "")
  list(APPEND failures "no exit code found in README.md's table")
endif()

# One case per code: the expected code, then the arguments, '|'-separated.
set(cases
  "0|merge|${OUT}/exit_codes_merged.trace.json|${DATA}/trace_rank0.json|${DATA}/trace_rank1.json"
  "1|compare|${DATA}/compare_baseline.json|${DATA}/compare_slower.json"
  "2|merge|${OUT}/exit_codes_mixed.json|${DATA}/trace_rank0.json|${DATA}/multigpu_rank0.json"
  "3|merge|${OUT}/exit_codes_partial.trace.json|${DATA}/trace_rank0.json|${DATA}/trace_truncated.json"
  "4|merge|/nonexistent_dir/exit_codes.trace.json|${DATA}/trace_rank0.json"
  "5|compare|${DATA}/compare_baseline.json|${DATA}/report_empty.json"
  "6|compare|${DATA}/multigpu_merged.json|${DATA}/multigpu_merged.json")
set(tested "")
foreach(entry IN LISTS cases)
  string(REPLACE "|" ";" args "${entry}")
  list(POP_FRONT args expected)
  list(APPEND tested ${expected})
  execute_process(COMMAND ${CLI} ${args} RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT code STREQUAL expected)
    list(APPEND failures "kscope ${args}: exit code ${code}, expected ${expected}\n${out}${err}")
  endif()
  list(FIND readme_codes ${expected} documented)
  if(documented LESS 0)
    list(APPEND failures "a case expects exit code ${expected}, which README.md does not document")
  endif()
endforeach()
foreach(code IN LISTS readme_codes)
  list(FIND tested ${code} found)
  if(found LESS 0)
    list(APPEND failures "exit code ${code} is documented but no case checks it")
  endif()
endforeach()

if(failures)
  string(REPLACE ";" "\n" failures "${failures}")
  message(FATAL_ERROR "${failures}")
endif()
list(LENGTH readme_codes count)
message(STATUS "${count} exit codes: README.md and kscope --help agree, and each is what the tool returns")
