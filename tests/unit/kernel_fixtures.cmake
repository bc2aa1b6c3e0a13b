# Loader test fixture: a small tvm-ffi kernel built against the apache-tvm-ffi wheel (headers and
# libtvm_ffi found with `python3 -m tvm_ffi.config`), compiled with the system C++ compiler. Only
# the fixture is C++; libhubkern stays C and never links libtvm_ffi.
find_package(Python3 COMPONENTS Interpreter)
find_program(HK_FIXTURE_CXX NAMES c++ g++ clang++)
set(HK_FIXTURE_DIR ${PROJECT_BINARY_DIR}/tests/kernel-fixtures)
if(Python3_FOUND AND HK_FIXTURE_CXX)
  execute_process(COMMAND ${Python3_EXECUTABLE} -m tvm_ffi.config --includedir
    OUTPUT_VARIABLE HK_TVM_INC OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE r1 ERROR_QUIET)
  execute_process(COMMAND ${Python3_EXECUTABLE} -m tvm_ffi.config --dlpack-includedir
    OUTPUT_VARIABLE HK_TVM_DLPACK OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE r2 ERROR_QUIET)
  execute_process(COMMAND ${Python3_EXECUTABLE} -m tvm_ffi.config --libdir
    OUTPUT_VARIABLE HK_TVM_LIBDIR OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE r3 ERROR_QUIET)
  if(r1 EQUAL 0 AND r2 EQUAL 0 AND r3 EQUAL 0)
    set(variant ${HK_FIXTURE_DIR}/tvm-ffi01-cpu-x86_64-linux)
    set(lib ${variant}/_hkfixture_cpu_0000001.so)
    add_custom_command(OUTPUT ${lib}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${variant}
      COMMAND ${HK_FIXTURE_CXX} -std=c++17 -O1 -shared -fPIC -I${HK_TVM_INC} -I${HK_TVM_DLPACK}
              ${PROJECT_SOURCE_DIR}/tests/data/kernel/tvmffi_fixture.cc -o ${lib}
              -L${HK_TVM_LIBDIR} -ltvm_ffi
      COMMAND ${CMAKE_COMMAND} -E copy ${PROJECT_SOURCE_DIR}/tests/data/kernel/fixture_metadata.json
              ${variant}/metadata.json
      DEPENDS ${PROJECT_SOURCE_DIR}/tests/data/kernel/tvmffi_fixture.cc
              ${PROJECT_SOURCE_DIR}/tests/data/kernel/fixture_metadata.json
      COMMENT "Building the tvm-ffi loader test fixture")
    add_custom_target(hk_tvmffi_fixture ALL DEPENDS ${lib})
    file(WRITE ${PROJECT_BINARY_DIR}/tests/kernel-fixtures.env "HK_TVM_FFI_LIBDIR=${HK_TVM_LIBDIR}\n")
  else()
    message(WARNING "apache-tvm-ffi not importable by ${Python3_EXECUTABLE}: the loader tests will fail (run scripts/setup.sh)")
  endif()
endif()
