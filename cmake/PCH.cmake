#===- PCH.cmake - One precompiled header for masformer's C++ ---*- cmake -*-===//
#
# The MLIR and LLVM headers of cmake/pch/MASFormerPCH.h, compiled once
# (target MASFormerPCH) and reused by every masformer library and tool that
# includes MLIR: parsing those headers was most of each source file's
# compile time. A reused precompiled header needs the same compiler flags
# as its users: MASFormerPCH takes them the way add_mlir_library's objects
# do (llvm_update_compile_flags, position-independent code).
#
#===----------------------------------------------------------------------===//

option(MASFORMER_PCH "Precompile the common MLIR and LLVM headers" ON)

# Every target defined in DIR and the directories below it.
function(masformer_collect_targets dir out)
  get_property(targets DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    masformer_collect_targets("${sub}" more)
    list(APPEND targets ${more})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

# Called once every library and tool exists: the objects of the MLIR
# libraries (obj.MASFormer*) and the tools built with add_llvm_executable
# reuse MASFormerPCH. The runtime libraries and masformer-run include no
# MLIR and are built with other flags; the Python extension and the fuzzers
# (-fsanitize=fuzzer, which clang will not mix with a header compiled
# without it) too.
function(masformer_use_pch)
  if(NOT MASFORMER_PCH)
    return()
  endif()
  add_library(MASFormerPCH OBJECT
    "${PROJECT_SOURCE_DIR}/cmake/pch/MASFormerPCH.cpp")
  llvm_update_compile_flags(MASFormerPCH)
  set_target_properties(MASFormerPCH PROPERTIES POSITION_INDEPENDENT_CODE ON)
  target_precompile_headers(MASFormerPCH PRIVATE
    "${PROJECT_SOURCE_DIR}/cmake/pch/MASFormerPCH.h")
  set(users)
  foreach(dir lib tools test/lib)
    masformer_collect_targets("${PROJECT_SOURCE_DIR}/${dir}" targets)
    list(APPEND users ${targets})
  endforeach()
  foreach(target IN LISTS users)
    if(target MATCHES "^obj\\.MASFormer"
       OR target MATCHES "^masformer-(opt|compile|translate)$")
      target_precompile_headers(${target} REUSE_FROM MASFormerPCH)
    endif()
  endforeach()
endfunction()
