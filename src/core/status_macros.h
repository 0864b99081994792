// Internal helpers for propagating Status and Result. Not part of the public API.
#pragma once

#include "safeweights/error.h"

#define SW_CONCAT_INNER(a, b) a##b
#define SW_CONCAT(a, b) SW_CONCAT_INNER(a, b)

// Returns the Status from the enclosing function when it is an error.
#define SW_RETURN_IF_ERROR(expr)                \
  do {                                          \
    ::safeweights::Status sw_status_ = (expr);  \
    if (!sw_status_.is_ok()) return sw_status_; \
  } while (0)

// `SW_ASSIGN_OR_RETURN(auto x, make_x());` declares x from a Result, or returns its error.
#define SW_ASSIGN_OR_RETURN(lhs, expr) SW_ASSIGN_OR_RETURN_IMPL(SW_CONCAT(sw_result_, __LINE__), lhs, expr)
#define SW_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr)    \
  auto tmp = (expr);                                \
  if (!tmp.is_ok()) return std::move(tmp).status(); \
  lhs = std::move(tmp).value()
