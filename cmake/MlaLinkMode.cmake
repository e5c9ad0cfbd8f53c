# Selects how the project links against LLVM and MLIR (see MLA_LINK_MODE).
#
# dylib:  every MLIR library resolves to libMLIR.so, LLVM to libLLVM.so.
#         Links take seconds; binaries need the LLVM 22 packages at run time.
# static: every MLIR and LLVM library is a static archive, so the tools depend
#         only on libc, libstdc++, libm, libgcc_s, libz and libzstd and can be
#         carried to a machine with no LLVM installed.

if(MLA_LINK_MODE STREQUAL "dylib")
  set(MLIR_LINK_MLIR_DYLIB ON)
  set(LLVM_LINK_LLVM_DYLIB ON)
elseif(MLA_LINK_MODE STREQUAL "static")
  set(MLIR_LINK_MLIR_DYLIB OFF)
  set(LLVM_LINK_LLVM_DYLIB OFF)

  # The LLVM components MLIR's libraries and the JIT need (their archives
  # name their own dependencies). Taking every archive instead would pull in
  # tool libraries with system dependencies (libpfm, libxml2, z3).
  llvm_map_components_to_libnames(_mla_static_llvm_libs
    Core Support Analysis TransformUtils IPO Passes Target TargetParser MC
    MCParser Object BitReader BitWriter IRReader AsmParser Linker
    OrcJIT ExecutionEngine JITLink RuntimeDyld PerfJITEvents AsmPrinter CodeGen
    SelectionDAG
    FrontendOpenMP FrontendOffloading Instrumentation Vectorize
    X86CodeGen X86AsmParser X86Desc X86Info
    NVPTXCodeGen NVPTXDesc NVPTXInfo)

  # Tool-only archives some MLIR libraries name: dropped.
  set(_mla_unwanted_llvm_libs LLVMOptDriver LLVMExegesis LLVMDiff LLVMCFIVerify)

  # The exported MLIR static targets name "LLVM" (and the execution engine
  # also "MLIR"), the shared libraries, in their link interface; point them
  # at the static archives instead (the MLIR ones are named by our targets).
  foreach(tgt ${MLIR_EXPORTED_TARGETS})
    if(TARGET ${tgt})
      get_target_property(_type ${tgt} TYPE)
      if(_type STREQUAL "STATIC_LIBRARY" OR _type STREQUAL "INTERFACE_LIBRARY")
        get_target_property(_deps ${tgt} INTERFACE_LINK_LIBRARIES)
        if(_deps AND "LLVM" IN_LIST _deps)
          list(REMOVE_ITEM _deps LLVM MLIR ${_mla_unwanted_llvm_libs})
          list(APPEND _deps ${_mla_static_llvm_libs})
          set_target_properties(${tgt} PROPERTIES INTERFACE_LINK_LIBRARIES "${_deps}")
        endif()
      endif()
    endif()
  endforeach()

  # LLVMExtensions (pulled in by LLVMPasses) names Polly, which Debian ships
  # without its archive: keep only its real dependency.
  if(TARGET LLVMExtensions)
    set_target_properties(LLVMExtensions PROPERTIES INTERFACE_LINK_LIBRARIES LLVMSupport)
  endif()


  # Stand-ins for optional system dependencies the archives may name.
  if(NOT TARGET zstd::libzstd_shared)
    add_library(zstd::libzstd_shared INTERFACE IMPORTED)
    set_target_properties(zstd::libzstd_shared PROPERTIES INTERFACE_LINK_LIBRARIES zstd)
  endif()
  if(NOT TARGET LibEdit::LibEdit)
    add_library(LibEdit::LibEdit INTERFACE IMPORTED)
  endif()
  if(NOT TARGET CURL::libcurl)
    add_library(CURL::libcurl INTERFACE IMPORTED)
  endif()
  add_link_options(-Wl,--as-needed)
else()
  message(FATAL_ERROR "MLA_LINK_MODE must be 'dylib' or 'static', got '${MLA_LINK_MODE}'")
endif()
