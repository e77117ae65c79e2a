# ctest fixture for locale_test: generates the comma-decimal locale de_DE.UTF-8 into
# LOCPATH (a folder of the build tree) with localedef, so the test has one even where no
# such locale is installed. No root needed: glibc reads locales from $LOCPATH.
#   cmake -DLOCPATH=<dir> -P locale_setup.cmake
# Without localedef (Debian: libc-bin) or the locale source (Debian: the 'locales'
# package's /usr/share/i18n/locales/de_DE) it says so and succeeds: locale_test then uses
# an installed comma-decimal locale, or reports itself Skipped.
if(NOT LOCPATH)
  message(FATAL_ERROR "locale_setup.cmake: pass -DLOCPATH=<dir>")
endif()
set(target ${LOCPATH}/de_DE.UTF-8)
if(EXISTS ${target}/LC_NUMERIC)
  message(STATUS "locale_setup: ${target} already generated")
  return()
endif()
find_program(LOCALEDEF localedef)
if(NOT LOCALEDEF)
  message(STATUS "locale_setup: localedef not found (Debian: package libc-bin); locale_test falls back to an "
                 "installed comma-decimal locale or is skipped")
  return()
endif()
set(source_dirs /usr/share/i18n/locales /usr/local/share/i18n/locales)
set(found_source "")
foreach(dir IN LISTS source_dirs)
  if(EXISTS ${dir}/de_DE)
    set(found_source ${dir}/de_DE)
    break()
  endif()
endforeach()
if(NOT found_source)
  message(STATUS "locale_setup: no locale source de_DE in ${source_dirs} (Debian: package 'locales'); "
                 "locale_test falls back to an installed comma-decimal locale or is skipped")
  return()
endif()
file(MAKE_DIRECTORY ${LOCPATH})
# -c: write the locale even when localedef warns (it exits 1 on warnings); success is
# judged by the files it wrote.
execute_process(COMMAND ${LOCALEDEF} -c -i de_DE -f UTF-8 ${target}
                RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT EXISTS ${target}/LC_NUMERIC)
  message(FATAL_ERROR "locale_setup: localedef -i de_DE -f UTF-8 ${target} failed (exit ${code}):\n${out}${err}")
endif()
message(STATUS "locale_setup: generated ${target} (localedef exit ${code})")
