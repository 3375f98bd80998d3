# kernrt_add_parts(): add_subdirectory every direct subfolder of the current source dir
# that has a CMakeLists.txt, in sorted order. A kernel family, tool, example or bench is
# added by creating its folder; no shared file needs editing.
function(kernrt_add_parts)
  file(GLOB parts LIST_DIRECTORIES true ${CMAKE_CURRENT_SOURCE_DIR}/*)
  list(SORT parts)
  foreach(part IN LISTS parts)
    if(IS_DIRECTORY ${part} AND EXISTS ${part}/CMakeLists.txt)
      add_subdirectory(${part})
    endif()
  endforeach()
endfunction()
