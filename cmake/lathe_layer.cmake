# lathe_layer(NAME DIR DEPS...): one static library per layer from DIR's *.cc, tests (*_test.cc) excluded.
function(lathe_layer name dir)
  file(GLOB srcs CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/${dir}/*.cc)
  list(FILTER srcs EXCLUDE REGEX "_test\\.cc$")
  add_library(${name} STATIC ${srcs})
  target_include_directories(${name} PUBLIC ${CMAKE_SOURCE_DIR}/src)
  target_link_libraries(${name} PUBLIC ${ARGN})
endfunction()
