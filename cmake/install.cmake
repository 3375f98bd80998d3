# Install and export rules: an engine does find_package(kernrt) and links kernrt::runtime.
#
# libkernrt.so (kernrt::shared) carries the C ABI alone, its dependencies linked in.
# The two C++ libraries are static by default, so their PRIVATE dependencies (nlohmann_json,
# OpenSSL::Crypto, Threads, dl) appear in the export as $<LINK_ONLY:...>; the package
# config finds them again with find_dependency. nlohmann_json is header-only and only
# needed at build time, but its imported target is still named by the export.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS kernrt_manifest kernrt_runtime kernrt_shared EXPORT kernrtTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/manifest/include/kernrt
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/runtime/include/kernrt
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

set(KERNRT_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/kernrt)
install(EXPORT kernrtTargets NAMESPACE kernrt:: DESTINATION ${KERNRT_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/kernrtConfig.cmake.in
  ${PROJECT_BINARY_DIR}/kernrtConfig.cmake INSTALL_DESTINATION ${KERNRT_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/kernrtConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/kernrtConfig.cmake
  ${PROJECT_BINARY_DIR}/kernrtConfigVersion.cmake DESTINATION ${KERNRT_CMAKE_DIR})
