# Helpers shared by the reference kernels (kernels/<name>/CMakeLists.txt): finding tvm-ffi in the
# apache-tvm-ffi wheel, building a tvm-ffi module, and staging Hub variant directories with
# stage_variant.py (generic: it reads the kernel's build.toml [general]).

get_filename_component(HK_STAGE_VARIANT_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/../rmsnorm/stage_variant.py ABSOLUTE)

# hk_find_tvm_ffi(<kernel>): asks the apache-tvm-ffi Python package for its headers, library and
# version; sets HK_TVM_FFI_INCLUDE_DIR, HK_TVM_FFI_LIBRARY, HK_TVM_FFI_VERSION and HK_TVM_FFI_TAG
# (tvm-ffi<major><minor>, as variant names spell it) in the caller's scope. <kernel> names the
# kernel in the error message. Needs Python3_EXECUTABLE (find_package(Python3) first).
function(hk_find_tvm_ffi kernel)
  execute_process(
    COMMAND ${Python3_EXECUTABLE} -c
      "import tvm_ffi, tvm_ffi.libinfo as l; print(l.find_include_path()); print(l.find_libtvm_ffi()); print(tvm_ffi.__version__)"
    OUTPUT_VARIABLE out RESULT_VARIABLE rc ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${kernel}: the tvm-ffi variants need the apache-tvm-ffi Python package "
      "(${Python3_EXECUTABLE} -m pip install apache-tvm-ffi==0.1.15.post2, or run scripts/setup.sh); "
      "configure with -DHK_KERNELS_TVM_FFI=OFF to build without them")
  endif()
  string(REPLACE "\n" ";" out "${out}")
  list(GET out 0 inc)
  list(GET out 1 lib)
  list(GET out 2 ver)
  string(REGEX MATCH "^([0-9]+)\\.([0-9]+)" _m "${ver}")
  set(HK_TVM_FFI_INCLUDE_DIR ${inc} PARENT_SCOPE)
  set(HK_TVM_FFI_LIBRARY ${lib} PARENT_SCOPE)
  set(HK_TVM_FFI_VERSION ${ver} PARENT_SCOPE)
  set(HK_TVM_FFI_TAG "tvm-ffi${CMAKE_MATCH_1}${CMAKE_MATCH_2}" PARENT_SCOPE)
endfunction()

# hk_tvm_ffi_module(<target> OPT <flag> [OPENMP] SOURCES <src>...): a shipped tvm-ffi module
# (<target>.so, no "lib" prefix): optimised with <flag>, no sanitizers (it is loaded into Python
# and into other programs), hidden visibility, no undefined symbols, warnings as errors under
# HK_WERROR; OPENMP links OpenMP::OpenMP_C when it was found. Needs hk_find_tvm_ffi first.
function(hk_tvm_ffi_module target)
  cmake_parse_arguments(A "OPENMP" "OPT" "SOURCES" ${ARGN})
  set(warn -Wall -Wextra)
  if(HK_WERROR)
    list(APPEND warn -Werror)
  endif()
  add_library(${target} MODULE ${A_SOURCES})
  set_target_properties(${target} PROPERTIES PREFIX "" OUTPUT_NAME ${target}
    CXX_VISIBILITY_PRESET hidden C_VISIBILITY_PRESET hidden)
  target_include_directories(${target} SYSTEM PRIVATE ${HK_TVM_FFI_INCLUDE_DIR})
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:C,CXX>:${A_OPT} ${warn}>)
  target_link_libraries(${target} PRIVATE ${HK_TVM_FFI_LIBRARY} m)
  target_link_options(${target} PRIVATE -Wl,--no-undefined)
  if(A_OPENMP AND OpenMP_C_FOUND)
    target_link_libraries(${target} PRIVATE OpenMP::OpenMP_C)
  endif()
endfunction()

# hk_cuda_variant_tag(<out>): "cu<major><minor>" of the enabled CUDA compiler.
function(hk_cuda_variant_tag out)
  string(REGEX MATCH "^([0-9]+)\\.([0-9]+)" _m "${CMAKE_CUDA_COMPILER_VERSION}")
  set(${out} "cu${CMAKE_MATCH_1}${CMAKE_MATCH_2}" PARENT_SCOPE)
endfunction()

# hk_stage_variants(<target> SOURCE <kernel dir> HUB <hub dir> CPU_MODULE <module target>
#                   [CUDA_MODULE <module target> CUDA_ARCHS <archs>] COMMENT <text>):
# a custom target, built by default, that stages <hub dir>/build/<variant>/ for the CPU tvm-ffi
# module (<tag>-cpu-x86_64-linux) and, when given, the CUDA one (<tag>-cu<XY>-x86_64-linux with
# <archs> as kernels' metadata spells them).
function(hk_stage_variants target)
  cmake_parse_arguments(A "" "SOURCE;HUB;CPU_MODULE;CUDA_MODULE;CUDA_ARCHS;COMMENT" "" ${ARGN})
  set(stage ${Python3_EXECUTABLE} ${HK_STAGE_VARIANT_SCRIPT} --source ${A_SOURCE} --hub ${A_HUB})
  set(cmds COMMAND ${stage} --framework tvm-ffi --backend cpu
    --variant ${HK_TVM_FFI_TAG}-cpu-x86_64-linux --library $<TARGET_FILE:${A_CPU_MODULE}>)
  set(deps ${A_CPU_MODULE})
  if(A_CUDA_MODULE)
    hk_cuda_variant_tag(cu)
    list(APPEND cmds COMMAND ${stage} --framework tvm-ffi --backend cuda
      --variant ${HK_TVM_FFI_TAG}-${cu}-x86_64-linux --archs "${A_CUDA_ARCHS}"
      --library $<TARGET_FILE:${A_CUDA_MODULE}>)
    list(APPEND deps ${A_CUDA_MODULE})
  endif()
  add_custom_target(${target} ALL ${cmds}
    DEPENDS ${deps}
    COMMENT "${A_COMMENT}"
    VERBATIM)
endfunction()
