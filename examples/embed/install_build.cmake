# Script mode (cmake -P), run by the embed_install_build test: install the kernrt build in
# BUILD_DIR to WORK_DIR/prefix, configure and build SOURCE_DIR (examples/embed) against
# that prefix alone (plus EXTRA_PREFIX, where the build found its own dependencies), and
# run `embed --version`. Any failing step fails the test with its output.
function(step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "embed: ${what} failed (${rc}):\n${out}\n${err}")
  endif()
  message(STATUS "embed: ${what} ok")
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
step("install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix)

# A list cannot cross execute_process as one -D argument; the environment carries it.
set(prefixes ${WORK_DIR}/prefix ${EXTRA_PREFIX})
string(REPLACE ";" ":" prefixes "${prefixes}")
set(ENV{CMAKE_PREFIX_PATH} "${prefixes}")
set(defs -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=${CXX_COMPILER})
if(OPENSSL_ROOT_DIR)
  list(APPEND defs -DOPENSSL_ROOT_DIR=${OPENSSL_ROOT_DIR})
endif()
if(OPENSSL_USE_STATIC_LIBS)
  list(APPEND defs -DOPENSSL_USE_STATIC_LIBS=${OPENSSL_USE_STATIC_LIBS})
endif()
step("configure" ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}/build -G ${GENERATOR} ${defs})
step("build" ${CMAKE_COMMAND} --build ${WORK_DIR}/build)
step("start" ${WORK_DIR}/build/embed --version)
message(STATUS "${step_output}")
if(NOT step_output MATCHES "^kernrt [0-9]+\\.[0-9]+\\.[0-9]+, CUDA device (present|absent)")
  message(FATAL_ERROR "embed --version printed: ${step_output}")
endif()
