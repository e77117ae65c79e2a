# `cmake --install` of the Python component into a fresh prefix, then the installed package
# imported by a Python that knows nothing but PYTHONPATH=<prefix>/<KSCOPE_PYTHON_INSTALL_DIR>:
# it must find its libkscope_c.so beside itself and time a scope.
#   cmake -DBUILD_DIR=... -DPREFIX=... -DSUBDIR=... -DPYTHON=... -P install_check.cmake
file(REMOVE_RECURSE ${PREFIX})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${PREFIX} --component python
                RESULT_VARIABLE installed OUTPUT_VARIABLE install_output ERROR_VARIABLE install_output)
if(NOT installed EQUAL 0)
  message(FATAL_ERROR "cmake --install --component python failed:\n${install_output}")
endif()
set(program [=[
import os, sys
import kscope
assert kscope.available(), kscope.load_error
here = os.path.dirname(kscope.__file__)
assert os.path.dirname(kscope.library_path) == here, (kscope.library_path, here)
assert os.path.realpath(here).startswith(os.path.realpath(sys.argv[1])), (here, sys.argv[1])
with kscope.scope("installed"):
    pass
assert kscope.report().find("installed")["calls"] == 1
print("kscope installed ok:", here)
]=])
execute_process(
  COMMAND ${CMAKE_COMMAND} -E env --unset=KSCOPE_LIBRARY PYTHONPATH=${PREFIX}/${SUBDIR} PYTHONDONTWRITEBYTECODE=1
          ${PYTHON} -c "${program}" ${PREFIX}
  RESULT_VARIABLE ran OUTPUT_VARIABLE out ERROR_VARIABLE out)
message("${out}")
if(NOT ran EQUAL 0)
  message(FATAL_ERROR "the installed package did not work")
endif()
