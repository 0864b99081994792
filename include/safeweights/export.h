// safeweights/export.h — which symbols the shared library exports.
//
// The library is compiled once, with hidden visibility (-fvisibility=hidden), into both
// libsafeweights.a and libsafeweights.so. Every public header wraps its declarations in
// SAFEWEIGHTS_API_BEGIN / SAFEWEIGHTS_API_END, which gives them default visibility: everything a public
// header declares is the API, and everything else (src/, simdjson, libdeflate, standard-library
// instantiations) stays internal to the library. A region per header rather than a mark per
// declaration, so a new declaration cannot be forgotten; the install test checks that every public
// header has its region, and cmake/safeweights.map still limits the shared library to the safeweights
// namespace.
//
// Thread safety: macros only.
#pragma once

#if defined(__GNUC__) || defined(__clang__)
#define SAFEWEIGHTS_API_BEGIN _Pragma("GCC visibility push(default)")
#define SAFEWEIGHTS_API_END _Pragma("GCC visibility pop")
#else
#define SAFEWEIGHTS_API_BEGIN
#define SAFEWEIGHTS_API_END
#endif
