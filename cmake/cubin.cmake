# Cubins and the manifests that pin them.
#
# kernrt_add_cubin(<name> SOURCE <file.cu> [ARCHS 90a 100a] [RUNNABLE 90a] [OPTIONS ...]
#                  [INCLUDE <dir>] [DEPENDS <file>...])
#   Compiles one .cu to one cubin per arch with the pinned flags below:
#     ${KERNRT_CUBIN_DIR}/<name>.sm<arch>.cubin
#   and adds them to target `kernrt_cubins` (built by `all`). Cubins are artifacts, never
#   linked. Only archs in RUNNABLE (default 90a) are copied into ${KERNRT_CUBIN_DIR}/run/,
#   the directory that program_io and the tests hand the runtime as --cubins. Kernels include
#   each other as "<family>/<file>" and "common/<file>" from INCLUDE (default kernels/ of this
#   tree; a variant build names another tree). Header dependencies come from nvcc's own
#   dependency file (-MD -MF, the custom command's DEPFILE: Ninja and Makefile generators),
#   so no hand list can go stale; DEPENDS is only for inputs nvcc does not read as headers.
#
# kernrt_add_host_library(<name> SOURCES <a.cu> ... [ARCHS 90a 100a])
#   Links the .cu files into a host shared library with CUDA kernels, as a torch extension
#   is: ${KERNRT_CUBIN_DIR}/run/lib<name>.so, one fatbin container per source (each with a
#   cubin per arch) in its `.nv_fatbin` section; same pinned flags. Target host_<name>.
#
# kernrt_pin_manifest(<template.json> <output.json> CUBINS <name.sm90a> ... [FILES <path> ...])
#   At build time, replaces every `@SHA256:<name.smXX>@` in the template with the SHA-256 of
#   that cubin (and every `@SHA256:<file name>@` with that of each FILES path), so a pinned
#   hash always matches the bytes next to it. Target pin_<output as a C identifier>; it
#   depends on each named cubin's target (cubin_<name>), so a pin in any directory runs after
#   the kernel folder that builds the cubin.
#
# The nvcc flags are part of a kernel's identity (its bytes, hence its pinned hash), so they
# are spelled here once for every build; CMakePresets.json picks generators and options.
set(KERNRT_CUBIN_DIR ${CMAKE_BINARY_DIR}/cubins CACHE INTERNAL "")
set(KERNRT_NVCC_FLAGS -O3 -std=c++17 --use_fast_math -lineinfo -Xptxas=-v
    CACHE STRING "Pinned nvcc flags for kernel cubins")
find_program(KERNRT_NVCC nvcc HINTS /usr/local/cuda/bin ENV CUDA_HOME PATH_SUFFIXES bin REQUIRED)
add_custom_target(kernrt_cubins ALL)

function(kernrt_add_cubin name)
  cmake_parse_arguments(A "" "SOURCE;INCLUDE" "ARCHS;RUNNABLE;OPTIONS;DEPENDS" ${ARGN})
  if(NOT A_ARCHS)
    set(A_ARCHS 90a 100a)
  endif()
  if(NOT A_RUNNABLE)
    set(A_RUNNABLE 90a)
  endif()
  if(NOT A_INCLUDE)
    set(A_INCLUDE ${PROJECT_SOURCE_DIR}/kernels)
  endif()
  get_filename_component(src ${A_SOURCE} ABSOLUTE)
  get_filename_component(inc ${A_INCLUDE} ABSOLUTE)
  set(outs)
  foreach(arch IN LISTS A_ARCHS)
    set(out ${KERNRT_CUBIN_DIR}/${name}.sm${arch}.cubin)
    set(dep ${KERNRT_CUBIN_DIR}/${name}.sm${arch}.d)
    set(cmds COMMAND ${KERNRT_NVCC} ${KERNRT_NVCC_FLAGS} ${A_OPTIONS}
        -gencode arch=compute_${arch},code=sm_${arch}
        -I${inc} -MD -MF ${dep} -cubin -o ${out} ${src})
    set(byproducts)
    if(arch IN_LIST A_RUNNABLE)
      set(run ${KERNRT_CUBIN_DIR}/run/${name}.sm${arch}.cubin)
      list(APPEND cmds COMMAND ${CMAKE_COMMAND} -E make_directory ${KERNRT_CUBIN_DIR}/run
           COMMAND ${CMAKE_COMMAND} -E copy ${out} ${run})
      list(APPEND byproducts ${run})
    endif()
    add_custom_command(OUTPUT ${out}
      BYPRODUCTS ${byproducts}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${KERNRT_CUBIN_DIR}
      ${cmds}
      DEPENDS ${src} ${A_DEPENDS}
      DEPFILE ${dep}
      COMMENT "nvcc sm_${arch}: ${name}"
      VERBATIM)
    list(APPEND outs ${out})
  endforeach()
  add_custom_target(cubin_${name} DEPENDS ${outs})
  add_dependencies(kernrt_cubins cubin_${name})
endfunction()

function(kernrt_add_host_library name)
  cmake_parse_arguments(A "" "" "SOURCES;ARCHS" ${ARGN})
  if(NOT A_ARCHS)
    set(A_ARCHS 90a 100a)
  endif()
  set(srcs)
  foreach(s IN LISTS A_SOURCES)
    get_filename_component(abs ${s} ABSOLUTE)
    list(APPEND srcs ${abs})
  endforeach()
  set(gencodes)
  foreach(arch IN LISTS A_ARCHS)
    list(APPEND gencodes -gencode arch=compute_${arch},code=sm_${arch})
  endforeach()
  set(out ${KERNRT_CUBIN_DIR}/run/lib${name}.so)
  add_custom_command(OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${KERNRT_CUBIN_DIR}/run
    COMMAND ${KERNRT_NVCC} ${KERNRT_NVCC_FLAGS} ${gencodes} -shared -Xcompiler -fPIC
            -cudart shared -I${PROJECT_SOURCE_DIR}/kernels -o ${out} ${srcs}
    DEPENDS ${srcs}
    COMMENT "nvcc host library: lib${name}.so"
    VERBATIM)
  add_custom_target(host_${name} DEPENDS ${out})
  add_dependencies(kernrt_cubins host_${name})
endfunction()

function(kernrt_pin_manifest template output)
  cmake_parse_arguments(A "" "" "CUBINS;FILES" ${ARGN})
  get_filename_component(tpl ${template} ABSOLUTE)
  set(deps ${A_FILES})
  foreach(c IN LISTS A_CUBINS)
    list(APPEND deps ${KERNRT_CUBIN_DIR}/${c}.cubin)
  endforeach()
  add_custom_command(OUTPUT ${output}
    COMMAND ${CMAKE_COMMAND} -DTEMPLATE=${tpl} -DOUTPUT=${output}
            -DCUBIN_DIR=${KERNRT_CUBIN_DIR} "-DCUBINS=${A_CUBINS}" "-DFILES=${A_FILES}"
            -P ${PROJECT_SOURCE_DIR}/cmake/pin_manifest.cmake
    DEPENDS ${tpl} ${deps} ${PROJECT_SOURCE_DIR}/cmake/pin_manifest.cmake
    COMMENT "pin manifest ${output}"
    VERBATIM)
  string(MAKE_C_IDENTIFIER ${output} tgt)
  add_custom_target(pin_${tgt} ALL DEPENDS ${output})
  foreach(c IN LISTS A_CUBINS)
    string(REGEX REPLACE "\\.sm[0-9a-z]+$" "" stem ${c})
    add_dependencies(pin_${tgt} cubin_${stem})
  endforeach()
endfunction()
