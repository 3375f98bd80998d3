# kernrt_numpy_python(VAR): sets VAR to a Python 3 interpreter that imports numpy, for the CPU
# tests that need it (Debian: python3-numpy, which tools/quickstart.sh installs): the one
# find_package(Python3) found, or /usr/bin/python3 when only that one has numpy (a pyenv shim
# first on PATH has its own site-packages). Falls back to the found one, whose test then names
# the missing module.
function(kernrt_numpy_python var)
  find_package(Python3 3.9 REQUIRED COMPONENTS Interpreter)
  set(py ${Python3_EXECUTABLE})
  execute_process(COMMAND ${py} -c "import numpy" RESULT_VARIABLE np OUTPUT_QUIET ERROR_QUIET)
  if(NOT np EQUAL 0 AND EXISTS /usr/bin/python3)
    execute_process(COMMAND /usr/bin/python3 -c "import numpy" RESULT_VARIABLE np OUTPUT_QUIET
                    ERROR_QUIET)
    if(np EQUAL 0)
      set(py /usr/bin/python3)
    endif()
  endif()
  set(${var} ${py} PARENT_SCOPE)
endfunction()
