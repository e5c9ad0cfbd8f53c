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

  # Libraries that would drag in Polly, libLLVM.so or network clients.
  set(_mla_excluded_llvm_libs LLVM LLVMExtensions LLVMLTO LLVMDebuginfod)
  set(_mla_static_llvm_libs "")
  foreach(lib ${LLVM_AVAILABLE_LIBS})
    if(NOT lib IN_LIST _mla_excluded_llvm_libs AND TARGET ${lib})
      get_target_property(_type ${lib} TYPE)
      if(_type STREQUAL "STATIC_LIBRARY")
        list(APPEND _mla_static_llvm_libs ${lib})
      endif()
    endif()
  endforeach()

  # The exported MLIR static targets name "LLVM" (the shared library) in their
  # link interface; point them at the static archives instead.
  foreach(tgt ${MLIR_EXPORTED_TARGETS})
    if(TARGET ${tgt})
      get_target_property(_type ${tgt} TYPE)
      if(_type STREQUAL "STATIC_LIBRARY" OR _type STREQUAL "INTERFACE_LIBRARY")
        get_target_property(_deps ${tgt} INTERFACE_LINK_LIBRARIES)
        if(_deps AND "LLVM" IN_LIST _deps)
          list(REMOVE_ITEM _deps LLVM)
          list(APPEND _deps ${_mla_static_llvm_libs})
          set_target_properties(${tgt} PROPERTIES INTERFACE_LINK_LIBRARIES "${_deps}")
        endif()
      endif()
    endif()
  endforeach()

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
