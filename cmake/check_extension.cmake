# Checks a built Python extension module (cmake -P): it must export exactly its PyInit_ symbol and
# must use the shared libstdc++ (NEEDED libstdc++.so.6), never a private static copy.
#   cmake -DMODULE=<path.so> -DENTRY=PyInit__safeweights -DNM=<nm> -DREADELF=<readelf>
#         [-DALLOW_STATIC_LIBSTDCXX=ON] -P check_extension.cmake
# Run after every link of _safeweights (the build fails) and as the ctest python_extension_exports.
#
# Why: a module that exports C++ runtime or template symbols (std::locale, std:: instantiations) lets
# them be bound by other libraries loaded later, so torch's libstdc++ ended up calling the module's
# copy of std::locale::_Impl::~_Impl on its own objects: free(): invalid pointer on `import safeweights, torch`.
foreach(var MODULE ENTRY NM READELF)
  if(NOT ${var})
    message(FATAL_ERROR "check_extension.cmake: ${var} is not set")
  endif()
endforeach()
execute_process(COMMAND ${NM} -D --defined-only ${MODULE}
  OUTPUT_VARIABLE nm_out RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${NM} -D --defined-only ${MODULE} failed: ${err}")
endif()
string(REPLACE "\n" ";" lines "${nm_out}")
set(exported)
foreach(line IN LISTS lines)
  if(line MATCHES "^[0-9a-fA-F]* *[A-Za-z] (.+)$")
    list(APPEND exported "${CMAKE_MATCH_1}")
  endif()
endforeach()
if(NOT exported STREQUAL ENTRY)
  list(LENGTH exported n)
  list(SUBLIST exported 0 20 first)
  string(REPLACE ";" "\n  " first "${first}")
  message(NOTICE "check_extension: FAILED: ${n} exported symbols")
  message(FATAL_ERROR "${MODULE} exports ${n} dynamic symbols; it must export exactly ${ENTRY}. "
    "First ones:\n  ${first}\nEverything linked into the module must be compiled with hidden visibility "
    "and linked with python/_safeweights.map.")
endif()
execute_process(COMMAND ${READELF} -d ${MODULE}
  OUTPUT_VARIABLE dyn RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${READELF} -d ${MODULE} failed: ${err}")
endif()
if(NOT dyn MATCHES "\\(NEEDED\\)[^\n]*\\[libstdc\\+\\+\\.so\\.6\\]")
  if(ALLOW_STATIC_LIBSTDCXX)
    message(WARNING "${MODULE} carries its own static libstdc++ (allowed by "
      "SAFEWEIGHTS_ALLOW_STATIC_LIBSTDCXX; it is fully hidden: the module exports only ${ENTRY}).")
    return()
  endif()
  message(NOTICE "check_extension: FAILED: no shared libstdc++")
  message(FATAL_ERROR "${MODULE} does not link the shared libstdc++ (no NEEDED libstdc++.so.6): the C++ "
    "runtime was linked statically (-static-libstdc++ in the flags, or a toolchain that only has "
    "libstdc++.a). A Python extension must share the process's libstdc++ with torch and numpy; "
    "-DSAFEWEIGHTS_ALLOW_STATIC_LIBSTDCXX=ON accepts a static copy, which the exports check keeps hidden.")
endif()
message(STATUS "${MODULE}: exports only ${ENTRY}, links the shared libstdc++")
